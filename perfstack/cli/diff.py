"""``perfstack diff``: what changed between two reports, and whether it is more than noise."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from perfstack import errors
from perfstack.analysis.diff.drift import SESSION_NOISE
from perfstack.cli import outputs
from perfstack.cli.common import (
    DEFAULT_RUNS_DIR,
    EXIT_OK,
    EXIT_REGRESSION,
    Parser,
    percentage,
)

if TYPE_CHECKING:
    from perfstack.analysis.diff import Diff
from perfstack.plugin.manager import Plugins
from perfstack.runfolder.filenames import REPORT_FILE


def latest_two(base: Path = DEFAULT_RUNS_DIR) -> tuple[Path, Path]:
    """Return the reports of the two newest runs in the run folder (older first)."""
    runs = sorted(p for p in base.iterdir() if p.is_dir() and not p.is_symlink()
                  and (p / REPORT_FILE).is_file()) if base.is_dir() else []
    if len(runs) < 2:
        raise errors.InputNotFound(
            f"perfstack diff without arguments compares the two newest runs under {base}, "
            f"and there {'is' if len(runs) == 1 else 'are'} {len(runs)}; name two reports")
    return runs[-2] / REPORT_FILE, runs[-1] / REPORT_FILE


def cmd_diff(plugins: Plugins, argv: list[str]) -> int:
    """Compare two reports; exit 1 with --fail-on-regression when a metric regressed."""
    from perfstack.analysis.diff import comparable, diff
    from perfstack.report.files import load_report

    parser = Parser(prog="perfstack diff", description="Compare two reports: environment "
                    "differences first, then metrics (judged against noise) and rows in "
                    "every layer, sorted by the time they moved.",
                    epilog="example: perfstack diff base.json new.json --fail-on-regression 5%")
    parser.add_argument("reports", nargs="*", type=Path, metavar="REPORT",
                        help="BASE and NEW (default: the two newest runs in the run folder)")
    formats = diff_formats(plugins)
    parser.add_argument("--format", choices=formats, default="text",
                        help=", ".join(formats) + " (pages from installed output formats "
                        "need -o)" if len(formats) > 3 else "text, markdown or json")
    parser.add_argument("--fail-on-regression", type=percentage, metavar="PCT",
                        help="exit 1 when a metric that must not get worse regressed "
                        "significantly by more than PCT (e.g. 5%%)")
    parser.add_argument("--session-noise", type=percentage, default=SESSION_NOISE, metavar="PCT",
                        help="between-session noise of this machine: changes within it are not "
                        "called changes when the reports come from separate sessions "
                        f"(default: {100 * SESSION_NOISE:g}%%; measure yours with an A/A pair)")
    parser.add_argument("--top", type=int, default=10, metavar="N",
                        help="rows per layer (default: 10)")
    parser.add_argument("-o", "--output", type=Path, metavar="FILE",
                        help="write to FILE instead of stdout")
    parser.add_argument("--force", action="store_true",
                        help="compare reports of different workloads (other script or "
                        "arguments)")
    args = parser.parse_args(argv)
    if len(args.reports) == 1 or len(args.reports) > 2:
        raise errors.UsageError("perfstack diff takes two reports (BASE NEW), or none to "
                                "compare the two newest runs")
    if args.top < 1:
        raise errors.UsageError(f"--top must be at least 1, got {args.top}")
    base_path, new_path = args.reports if args.reports else latest_two()
    outputs.refuse_collisions([("-o", args.output)], [("the base report", base_path),
                                                     ("the new report", new_path)])
    base, new = load_report(base_path), load_report(new_path)
    refused = None if args.force else comparable(base, new)
    if refused is not None:
        raise errors.UsageError(refused)
    result = diff(base, new, str(base_path), str(new_path), session_noise=args.session_noise)
    return emit(result, args.format, args.top, args.fail_on_regression, args.output, plugins)


def diff_formats(plugins: Plugins) -> list[str]:
    """The formats a diff can be written in: ours, and every renderer that draws diffs."""
    return ["text", "markdown", "json", *plugins.renderer_names(diffs=True)]


def emit(result: Diff, fmt: str, top: int, threshold: float | None,
         output: Path | None, plugins: Plugins | None = None) -> int:
    """Write a diff in ``fmt`` to ``output`` (stdout when None); return the exit code: 1 when
    ``threshold`` is set and a metric regressed beyond it."""
    from perfstack.cli.show import output_width
    from perfstack.plugin.renderer import DiffRenderer, RenderOptions, terminal_safe
    from perfstack.render.diff import render_markdown, render_text
    from perfstack.report.files import finite, write_text_atomic

    drawn = None
    if plugins is not None and fmt in plugins.renderer_names(diffs=True):
        drawn = plugins.renderer(fmt)
    if isinstance(drawn, DiffRenderer):
        options = RenderOptions(top=top, output_dir=output.parent.resolve() if output else None)
        text = drawn.render_diff(result, options)
    elif fmt == "json":
        text = json.dumps(finite(result.to_dict(threshold)), indent=1, allow_nan=False) + "\n"
    elif fmt == "markdown":
        text = render_markdown(result, top, threshold)
    else:
        text = render_text(result, top, threshold, width=output_width())
    if fmt in ("text", "markdown") or output is None:
        text = terminal_safe(text)
    if output is not None:
        write_text_atomic(output, text)
        print(f"wrote {output}", file=sys.stderr)
    else:
        sys.stdout.write(text)
    if threshold is not None and result.regressions(threshold):
        return EXIT_REGRESSION
    return EXIT_OK
