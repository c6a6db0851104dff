"""``perfstack show``, ``perfstack validate`` and ``perfstack plugins``: reading, not running."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from perfstack import errors
from perfstack.cli import outputs
from perfstack.cli.common import DEFAULT_RUNS_DIR, EXIT_OK, Parser, terminal_columns
from perfstack.plugin.manager import Plugins
from perfstack.plugin.renderer import terminal_safe
from perfstack.report import Report
from perfstack.runfolder.filenames import REPORT_FILE


def output_width() -> int:
    """Return the width to lay text out for: $COLUMNS when set, else the terminal's, else 100;
    never under 60."""
    return max(60, min(terminal_columns(100), 240))


def print_report(report: Report, plugins: Plugins, top: int = 10, depth: int = 3,
                 full: bool = False, all_frames: bool = False,
                 report_dir: Path | None = None) -> None:
    """Print the text rendering of ``report`` to stdout (colour when it is a terminal)."""
    text = plugins.renderers()["text"].render(report, plugins.render_options(
        top=top, depth=depth, width=output_width(), color=sys.stdout.isatty(), full=full,
        all_frames=all_frames, report_dir=report_dir))
    sys.stdout.write(terminal_safe(text))
    sys.stdout.flush()


def add_view_options(parser: Parser) -> None:
    """Add the options that size the printed report (shared by run and show)."""
    parser.add_argument("--top", type=int, default=5, metavar="N",
                        help="rows per table, and functions (and ops, kernels each) in the "
                        "drill-down (default: 5)")
    parser.add_argument("--depth", type=int, default=3, metavar="N",
                        help="drill-down depth: 1 functions, 2 + torch ops, 3 + kernels "
                        "(default: 3)")
    parser.add_argument("--full", action="store_true",
                        help="every metric, not only those a person reads by default")
    parser.add_argument("--all-frames", action="store_true",
                        help="library functions one by one (default: folded into their "
                        "package, the workload's own code first)")


def check_view_options(ns: argparse.Namespace) -> None:
    """Refuse a --top or --depth out of range."""
    if ns.top < 1:
        raise errors.UsageError(f"--top must be at least 1, got {ns.top}")
    if not 1 <= ns.depth <= 3:
        raise errors.UsageError(f"--depth must be 1, 2 or 3, got {ns.depth}")


def _default_report() -> Path:
    from perfstack.runfolder.rundir import latest_run

    latest = latest_run(DEFAULT_RUNS_DIR)
    if latest is None or not (latest / REPORT_FILE).is_file():
        raise errors.InputNotFound(
            f"no report named and no latest run under {DEFAULT_RUNS_DIR}; run 'perfstack run' "
            "first or name a report file")
    return latest / REPORT_FILE


def cmd_show(plugins: Plugins, argv: list[str]) -> int:
    """Render a report in a terminal format or to a file."""
    from perfstack.report.files import load_report

    parser = Parser(prog="perfstack show",
                    description="Print a report: the answer first, then where the time goes, "
                    "the drill-down, each layer, the backends and the metrics.",
                    epilog="examples: perfstack show --full | perfstack show report.json "
                    "--format markdown -o report.md")
    parser.add_argument("report", nargs="?", type=Path,
                        help="report file (default: the latest run's report)")
    parser.add_argument("--format", default="text", choices=plugins.renderer_names(),
                        help="output format (default: text)")
    parser.add_argument("-o", "--output", type=Path, metavar="FILE",
                        help="write to FILE instead of stdout")
    add_view_options(parser)
    ns = parser.parse_args(argv)
    check_view_options(ns)
    path = ns.report if ns.report is not None else _default_report()
    outputs.refuse_collisions([("-o", ns.output)], [("the report shown", path)])
    report = load_report(path)
    renderer = plugins.renderer(ns.format)
    if renderer is None:  # argparse offered it: a plugin that no longer gives it
        raise errors.UsageError(f"--format {ns.format}: no installed plugin draws it now")
    to_terminal = ns.output is None and sys.stdout.isatty()
    options = plugins.render_options(
        top=ns.top, depth=ns.depth, width=output_width(), color=to_terminal,
        report_dir=path.parent.resolve(), full=ns.full, all_frames=ns.all_frames,
        output_dir=ns.output.parent.resolve() if ns.output is not None else None)
    try:
        text = renderer.render(report, options)
    finally:  # what a renderer left out is said, whether it drew or refused
        for notice in options.notices:
            print(f"perfstack: {terminal_safe(notice)}", file=sys.stderr)
    if ns.output is None or ns.format in ("text", "markdown"):
        text = terminal_safe(text)  # a workload's escape sequences cannot drive a terminal
    if ns.output is not None:
        from perfstack.report.files import write_text_atomic

        write_text_atomic(ns.output, text)
        print(f"wrote {ns.output}", file=sys.stderr)
    else:
        sys.stdout.write(text)
    return EXIT_OK


def cmd_validate(argv: list[str]) -> int:
    """Check report files against the schema; the first invalid one sets the exit code."""
    from perfstack.report import SCHEMA_VERSION
    from perfstack.report.files import read_report_data

    parser = Parser(prog="perfstack validate",
                    description="Check that files are valid perfstack reports.")
    parser.add_argument("reports", nargs="+", type=Path, help="report files")
    ns = parser.parse_args(argv)
    for path in ns.reports:
        data = read_report_data(path)
        rows = sum(len(rows) for rows in data["layers"].values())
        print(f"{path}: valid perfstack/report v{SCHEMA_VERSION}: {len(data['backends'])} "
              f"backends, {rows} rows, "
              f"{len(data['metrics'])} metrics, {len(data['findings'])} findings")
    return EXIT_OK


def plugin_listing(plugins: Plugins) -> dict[str, Any]:
    """Return every installed backend (name, layers, whether ``perfstack run`` uses it by
    default, whether it can run here and why not, where it comes from, whether it attaches to
    a running process and records on demand) and every broken plugin, as plain data."""
    from perfstack.plugin.backend import availability

    backends, failures = plugins.backends()
    rows = []
    for name, entry in sorted(backends.items()):
        avail = availability(entry.backend)
        here = {"available": avail.ok, "reason": avail.reason, "fix": avail.fix}
        rows.append({"name": name, "layers": [layer.value for layer in entry.backend.layers],
                     "default": not entry.backend.opt_in, **here, "plugin": entry.plugin,
                     "package": entry.package, "attach": entry.backend.live,
                     "on_demand": entry.backend.capture is not None})
    broken: list[dict[str, str | None]] = [
        {"plugin": i.name, "error": i.error} for i in plugins.infos.values() if i.error]
    broken += [{"plugin": f.plugin, "error": f.error} for f in failures]
    return {"backends": rows, "broken": broken}


def cmd_plugins(plugins: Plugins, argv: list[str]) -> int:
    """List every installed backend, whether it runs by default, whether it can run here."""
    import json

    from perfstack.render.text.grid import Column, table, wrap

    parser = Parser(prog="perfstack plugins",
                    description="List installed backends: which run by default and which are "
                    "opt-in (--plugins NAME), available here or not, and why.")
    parser.add_argument("--json", action="store_true", help="print the listing as JSON")
    ns = parser.parse_args(argv)
    listing = plugin_listing(plugins)
    if ns.json:
        sys.stdout.write(json.dumps(listing, indent=1) + "\n")
        return EXIT_OK
    width = output_width()
    rows = [[b["name"], ",".join(b["layers"]), "default" if b["default"] else "opt-in",
             "available" if b["available"] else "unavailable", b["package"] or "-"]
            for b in listing["backends"]]
    out = wrap("perfstack backends: perfstack run uses the default ones that are available; "
               "--plugins NAME picks any", width)
    out += table([Column("backend", name=True), Column("layers", left=True),
                  Column("runs", left=True), Column("here", left=True),
                  Column("package", left=True)], rows, width)
    for key, words in (("attach", "attach to a running process (perfstack attach)"),
                       ("on_demand", "record on demand (run --on-demand, then perfstack "
                        "capture)")):
        able = [b["name"] for b in listing["backends"] if b[key]]
        out += wrap(f"{words}: {', '.join(able) or 'none'}", width, indent=4, first="  ")
    for b in listing["backends"]:
        if not b["available"]:
            why = f"{b['name']}: {b['reason']}" + (f" (fix: {b['fix']})" if b["fix"] else "")
            out += wrap(why, width, indent=4, first="  ")
    for item in listing["broken"]:
        last = (item["error"] or "").strip().splitlines()[-1:] or ["unknown error"]
        out += wrap(f"plugin {item['plugin']} is broken: {last[0]}", width, indent=4,
                    first="  ")
    sys.stdout.write("\n".join(out) + "\n")
    return EXIT_OK
