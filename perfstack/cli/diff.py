"""``perfstack diff``: what changed between two reports, and whether it is more than noise."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from perfstack import errors
from perfstack.cli import DEFAULT_RUNS_DIR, EXIT_OK, Parser
from perfstack.pluginmanager import Plugins

EXIT_REGRESSION = 1


def _percent(text: str) -> float:
    try:
        value = float(text.strip().rstrip("%"))
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a percentage like 5%") from None
    if not 0 <= value < 1000:
        raise argparse.ArgumentTypeError(f"must be between 0% and 1000%, got {text}")
    return value / 100


def latest_two(base: Path = DEFAULT_RUNS_DIR) -> tuple[Path, Path]:
    """Return the reports of the two newest runs in the run folder (older first)."""
    runs = sorted(p for p in base.iterdir() if p.is_dir() and not p.is_symlink()
                  and (p / "report.json").is_file()) if base.is_dir() else []
    if len(runs) < 2:
        raise errors.InputNotFound(
            f"perfstack diff without arguments compares the two newest runs under {base}, "
            f"and there {'is' if len(runs) == 1 else 'are'} {len(runs)}; name two reports")
    return runs[-2] / "report.json", runs[-1] / "report.json"


def cmd_diff(plugins: Plugins, argv: list[str]) -> int:
    """Compare two reports; exit 1 with --fail-on-regression when a metric regressed."""
    from perfstack.diff import diff
    from perfstack.diff_render import render_markdown, render_text
    from perfstack.reportfile import load_report, write_text_atomic

    parser = Parser(prog="perfstack diff", description="Compare two reports: environment "
                    "differences first, then metrics (judged against noise) and rows in "
                    "every layer, sorted by the time they moved.",
                    epilog="example: perfstack diff base.json new.json --fail-on-regression 5%")
    parser.add_argument("reports", nargs="*", type=Path, metavar="REPORT",
                        help="BASE and NEW (default: the two newest runs in the run folder)")
    parser.add_argument("--format", choices=["text", "markdown", "json"], default="text")
    parser.add_argument("--fail-on-regression", type=_percent, metavar="PCT",
                        help="exit 1 when a metric that must not get worse regressed "
                        "significantly by more than PCT (e.g. 5%%)")
    parser.add_argument("--top", type=int, default=10, metavar="N",
                        help="rows per layer (default: 10)")
    parser.add_argument("-o", "--output", type=Path, metavar="FILE",
                        help="write to FILE instead of stdout")
    args = parser.parse_args(argv)
    if len(args.reports) == 1 or len(args.reports) > 2:
        raise errors.UsageError("perfstack diff takes two reports (BASE NEW), or none to "
                                "compare the two newest runs")
    if args.top < 1:
        raise errors.UsageError(f"--top must be at least 1, got {args.top}")
    base_path, new_path = args.reports if args.reports else latest_two()
    base, new = load_report(base_path), load_report(new_path)
    result = diff(base, new, str(base_path), str(new_path))
    threshold = args.fail_on_regression
    if args.format == "json":
        data = result.to_dict()
        if threshold is not None:
            data["gate"] = {"threshold": threshold,
                            "regressions": [m.name for m in result.regressions(threshold)]}
        text = json.dumps(data, indent=1) + "\n"
    elif args.format == "markdown":
        text = render_markdown(result, args.top, threshold)
    else:
        text = render_text(result, args.top, threshold)
    if args.output is not None:
        write_text_atomic(args.output, text)
        print(f"wrote {args.output}", file=sys.stderr)
    else:
        sys.stdout.write(text)
    if threshold is not None and result.regressions(threshold):
        return EXIT_REGRESSION
    return EXIT_OK
