"""``perfstack show``, ``perfstack validate`` and ``perfstack plugins``: reading, not running."""

from __future__ import annotations

import sys
from pathlib import Path

from perfstack import errors
from perfstack.cli import DEFAULT_RUNS_DIR, EXIT_OK, Parser
from perfstack.pluginmanager import BackendEntry, Plugins
from perfstack.render import RenderOptions, renderers
from perfstack.report import Layer, Report


def _layer_providers(backends: dict[str, BackendEntry]) -> dict[str, list[str]]:
    out: dict[str, list[str]] = {layer.value: [] for layer in Layer}
    for name, entry in sorted(backends.items()):
        for layer in entry.backend.layers:
            out[layer.value].append(name)
    return out


def _terminal_width() -> int:
    import shutil

    return max(80, min(shutil.get_terminal_size((110, 24)).columns, 160))


def print_report(report: Report, plugins: Plugins, backends: dict[str, BackendEntry],
                 top: int = 10, depth: int = 3) -> None:
    """Print the text rendering of ``report`` to stdout (colour when it is a terminal)."""
    text = renderers(plugins)["text"].render(report, RenderOptions(
        top=top, depth=depth, width=_terminal_width(), color=sys.stdout.isatty(),
        layer_providers=_layer_providers(backends)))
    sys.stdout.write(text)
    sys.stdout.flush()


def _default_report() -> Path:
    from perfstack.rundir import latest_run

    latest = latest_run(DEFAULT_RUNS_DIR)
    if latest is None or not (latest / "report.json").is_file():
        raise errors.InputNotFound(
            f"no report named and no latest run under {DEFAULT_RUNS_DIR}; run 'perfstack run' "
            "first or name a report file")
    return latest / "report.json"


def cmd_show(plugins: Plugins, argv: list[str]) -> int:
    """Render a report in a terminal format or to a file."""
    from perfstack.reportfile import load_report

    available = renderers(plugins)
    parser = Parser(prog="perfstack show", description="Print a report, layer by layer.")
    parser.add_argument("report", nargs="?", type=Path,
                        help="report file (default: the latest run's report)")
    parser.add_argument("--format", default="text", choices=sorted(available),
                        help="output format (default: text)")
    parser.add_argument("-o", "--output", type=Path, metavar="FILE",
                        help="write to FILE instead of stdout")
    parser.add_argument("--top", type=int, default=10, metavar="N",
                        help="rows per layer; functions (and ops, kernels each) in the drill-down")
    parser.add_argument("--depth", type=int, default=3, metavar="N",
                        help="drill-down depth: 1 functions, 2 + torch ops, 3 + kernels")
    ns = parser.parse_args(argv)
    if ns.top < 1:
        raise errors.UsageError(f"--top must be at least 1, got {ns.top}")
    if not 1 <= ns.depth <= 3:
        raise errors.UsageError(f"--depth must be 1, 2 or 3, got {ns.depth}")
    path = ns.report if ns.report is not None else _default_report()
    report = load_report(path)
    renderer = available[ns.format]
    to_terminal = ns.output is None and sys.stdout.isatty()
    text = renderer.render(report, RenderOptions(
        top=ns.top, depth=ns.depth, width=_terminal_width() if to_terminal else 110,
        color=to_terminal, report_dir=path.parent.resolve(),
        layer_providers=_layer_providers(plugins.backends()[0])))
    if ns.output is not None:
        from perfstack.reportfile import write_text_atomic

        write_text_atomic(ns.output, text)
        print(f"wrote {ns.output}", file=sys.stderr)
    else:
        sys.stdout.write(text)
    return EXIT_OK


def cmd_validate(plugins: Plugins, argv: list[str]) -> int:
    """Check report files against the schema; the first invalid one sets the exit code."""
    from perfstack.report import SCHEMA_VERSION
    from perfstack.reportfile import load_report

    parser = Parser(prog="perfstack validate",
                    description="Check that files are valid perfstack reports.")
    parser.add_argument("reports", nargs="+", type=Path, help="report files")
    ns = parser.parse_args(argv)
    for path in ns.reports:
        report = load_report(path)
        rows = sum(len(rows) for rows in report.layers.values())
        print(f"{path}: valid perfstack/report v{SCHEMA_VERSION}: {len(report.backends)} "
              f"backends, {rows} rows, "
              f"{len(report.metrics)} metrics, {len(report.findings)} findings")
    return EXIT_OK


def cmd_plugins(plugins: Plugins, argv: list[str]) -> int:
    """List every installed backend, whether it can run here, and where it comes from."""
    from rich.console import Console
    from rich.table import Table
    from rich.text import Text

    parser = Parser(prog="perfstack plugins",
                    description="List installed backends: available here or not, and why.")
    parser.parse_args(argv)
    backends, failures = plugins.backends()
    table = Table(title="perfstack backends", title_justify="left")
    for col in ("backend", "layers", "here", "plugin", "package"):
        table.add_column(col)
    for name, entry in sorted(backends.items()):
        try:
            avail = entry.backend.check()
            here = Text("available", style="green") if avail.ok else Text(
                f"unavailable: {avail.reason}" + (f"\nfix: {avail.fix}" if avail.fix else ""),
                style="yellow")
        except Exception as exc:
            here = Text(f"check() raised {type(exc).__name__}: {exc}", style="red")
        table.add_row(Text(name), Text(",".join(layer.value for layer in entry.backend.layers)),
                      here, Text(entry.plugin), Text(entry.package or "-"))
    console = Console(highlight=False)
    console.print(table)
    problems: list[tuple[str, str | None]] = [
        (i.name, i.error) for i in plugins.infos.values() if i.error]
    problems += [(f.plugin, f.error) for f in failures]
    for name, error in problems:
        last = (error or "").strip().splitlines()[-1:] or ["unknown error"]
        console.print(Text(f"plugin {name} is broken: {last[0]}", style="red"), soft_wrap=True)
    return EXIT_OK
