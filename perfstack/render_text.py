"""The ``text`` format: the layered report in a terminal, drawn with rich.

Header (command, environment, how the runs ended), the backend table, then Python →
framework → kernel → hardware (top rows of each, per backend), the metrics, and findings.
An empty layer says which backends would fill it.
"""

from __future__ import annotations

import io
from typing import Any

from rich.console import Console, Group, RenderableType
from rich.panel import Panel
from rich.table import Table
from rich.text import Text
from rich.tree import Tree

from perfstack.analysis.budget import drill_down, hardware_beside, time_budget
from perfstack.pluginmanager import hookimpl
from perfstack.render import Renderer, RenderOptions
from perfstack.report import Layer, Report, Row, Status
from perfstack.units import fmt_quantity, fmt_seconds, fmt_value

STATUS_STYLE = {
    Status.OK: "green", Status.UNAVAILABLE: "yellow", Status.FAILED: "red",
    Status.CRASHED: "red", Status.TIMEOUT: "red", Status.INTERRUPTED: "magenta",
    Status.SKIPPED: "dim",
}
SEVERITY_STYLE = {"critical": "bold red", "warning": "yellow", "info": "cyan"}
LAYER_TITLES = {
    Layer.PYTHON: "Python: functions, threads, the GIL",
    Layer.FRAMEWORK: "Framework: torch ops, shapes, FLOPs, memory",
    Layer.KERNEL: "Kernel: CPU/GPU kernels, hot native symbols",
    Layer.HARDWARE: "Hardware: counters, CPU use, memory, GPU power",
}
MAX_VALUE_COLUMNS = 6


def _environment_line(env: dict[str, Any]) -> str:
    py = env.get("python", {})
    cpu = env.get("cpu", {})
    parts = [f"{py.get('implementation', 'Python')} {py.get('version', '?')}"]
    osinfo = env.get("os", {})
    parts.append(f"{osinfo.get('system', '?')} {osinfo.get('machine', '')}".strip())
    isa = cpu.get("isa") or []
    best = next((w for w in ("AMX-BF16", "AVX-512F", "AVX2", "NEON") if w in isa), None)
    parts.append(f"{cpu.get('model') or 'unknown CPU'} ({cpu.get('logical_cpus', '?')} CPUs"
                 + (f", {best}" if best else "") + ")")
    torch = env.get("torch")
    if isinstance(torch, dict) and torch.get("version"):
        parts.append(f"torch {torch['version']}")
    threads = env.get("threads") or {}
    if threads:
        parts.append(" ".join(f"{k}={v}" for k, v in sorted(threads.items())))
    return " · ".join(parts)


def _plural(n: int, word: str) -> str:
    return f"{n} {word}" if n == 1 else f"{n} {word}s"


def _header(report: Report) -> RenderableType:
    run = report.run
    lines = Text()
    lines.append("$ " + " ".join(run.command) + "\n", style="bold")
    lines.append(_environment_line(report.environment) + "\n")
    lines.append(f"perfstack {run.perfstack_version} · started {run.started} · "
                 f"{fmt_seconds(run.duration_s)} in all · {_plural(len(run.runs), 'run')}\n")
    wall = report.metric("wall_time")
    if wall is not None and wall.samples:
        spread = ""
        if len(wall.samples) > 1:
            low, high = fmt_seconds(min(wall.samples)), fmt_seconds(max(wall.samples))
            spread = f" (min {low}, max {high})"
        lines.append(f"baseline: median {fmt_seconds(float(wall.value or 0))} over "
                     f"{_plural(len(wall.samples), 'run')}{spread}\n")
    said = next((r for r in run.runs if r.role == "baseline" and r.stdout_tail), None)
    if said is not None and said.stdout_tail:
        lines.append(f"the workload printed ({said.id}, last lines):\n", style="dim")
        for line in said.stdout_tail.splitlines()[-3:]:
            lines.append(f"  {line}\n")
    bad = [r for r in run.runs if not r.exit.clean]
    if bad:
        for r in bad:
            lines.append(f"run {r.id}: {r.exit.describe()}\n", style="bold red")
    else:
        lines.append("every run exited 0\n", style="green")
    if not run.complete:
        lines.append("INTERRUPTED: this report is partial\n", style="bold magenta")
    lines.rstrip()
    return Panel(lines, title="perfstack report", title_align="left")


def _backends(report: Report) -> RenderableType:
    table = Table(title="Backends", title_justify="left", expand=False)
    for col in ("backend", "status", "layers", "wall", "overhead", "notes"):
        table.add_column(col)
    for b in report.backends:
        if b.overhead is not None:
            ov = b.overhead
            spread = ""
            if ov.baseline_stdev_s is not None and ov.baseline_median_s:
                spread = f" ±{ov.baseline_stdev_s / ov.baseline_median_s:.0%}"
            overhead = f"{ov.ratio:.2f}x{spread} (n={ov.baseline_n})"
        else:
            overhead = b.overhead_note or "-"
        notes = [n for n in (b.reason, f"fix: {b.fix}" if b.fix else None) if n] + b.notes
        table.add_row(Text(b.name), Text(b.status.value, style=STATUS_STYLE[b.status]),
                      Text(",".join(b.layers) or "-"),
                      Text(fmt_seconds(b.wall_s) if b.wall_s is not None else "-"),
                      Text(overhead), Text("\n".join(notes)))
    return table


def _rows_table(source: str, rows: list[Row], top: int) -> RenderableType:
    columns: list[str] = []
    for row in rows[:top]:
        columns += [name for name in row.values if name not in columns]
    columns = columns[:MAX_VALUE_COLUMNS]
    table = Table(title=Text(f"from {source} ({len(rows)} rows)"), title_justify="left")
    table.add_column("name", no_wrap=True, overflow="ellipsis", max_width=56)
    for col in columns:
        table.add_column(Text(col), justify="right")
    reasons: list[str] = []  # unknown values: the reason once, as a footnote, not in every cell

    def cell(row: Row, col: str) -> Text:
        q = row.values.get(col)
        if q is None:
            return Text("")
        if q.value is None:
            reason = q.reason or "unknown"
            if reason not in reasons:
                reasons.append(reason)
            return Text(f"n/a [{reasons.index(reason) + 1}]", style="dim")
        return Text(fmt_quantity(q))

    for row in rows[:top]:
        table.add_row(Text(row.name), *(cell(row, c) for c in columns))
    if not reasons:
        return table
    notes = Text("".join(f"  [{i}] {r}\n" for i, r in enumerate(reasons, 1)), style="dim")
    return Group(table, notes)


def _layer(report: Report, layer: Layer, options: RenderOptions) -> RenderableType:
    rows = report.layers[layer]
    title = Text(LAYER_TITLES[layer], style="bold underline")
    if not rows:
        in_run = [f"{b.name} ({b.status.value})" for b in report.backends
                  if layer.value in b.layers]
        providers = options.layer_providers.get(layer.value, [])
        if in_run:
            hint = "nothing measured here; backends in this run for it: " + ", ".join(in_run)
        elif providers:
            hint = "nothing measured here; filled by: " + ", ".join(
                f"--plugins {p}" for p in providers)
        else:
            hint = "nothing measured here; no installed backend feeds this layer"
        return Group(title, Text(hint, style="dim"), Text(""))
    by_source: dict[str, list[Row]] = {}
    for row in rows:
        by_source.setdefault(row.source, []).append(row)
    tables = [_rows_table(src, group, options.top) for src, group in by_source.items()]
    return Group(title, *tables, Text(""))


def _bar(share: float, width: int = 20) -> str:
    filled = max(0, min(width, round(share / 100 * width)))
    return "█" * filled + "·" * (width - filled)


def _budget(report: Report) -> RenderableType:
    budget = time_budget(report)
    if not budget.lines:
        return Text("Where the time goes: no backend measured a time budget "
                    "(pyspy and perftop do)\n", style="dim")
    wall = f" of {fmt_seconds(budget.wall_s)} wall time" if budget.wall_s else ""
    table = Table(title=f"Where the time goes{wall}", title_justify="left")
    for col, justify in (("part", "left"), ("layer", "left"), ("share", "right"),
                         ("seconds", "right"), ("", "left"), ("measured by", "left")):
        table.add_column(col, justify=justify)  # type: ignore[arg-type]
    for line in budget.lines:
        table.add_row(Text(("  └ " if line.depth else "") + line.title), Text(line.layer),
                      Text(f"{line.share:.1f}%"),
                      Text(fmt_seconds(line.seconds) if line.seconds is not None else "-"),
                      Text(_bar(line.share)), Text(line.source))
    notes = [Text(f"  {n}", style="dim") for n in budget.notes]
    return Group(table, *notes, Text(""))


def _tree(report: Report, options: RenderOptions) -> RenderableType:
    nodes, notes = drill_down(report, top=options.top, depth=options.depth)
    if not nodes:
        return Text("")
    beside = hardware_beside(report)
    label = Text("Drill-down: top Python functions → torch ops → kernels", style="bold")
    if beside:
        label.append("\n  hardware: " + "; ".join(beside), style="")
    tree = Tree(label)

    def add(parent: Tree, node: Any) -> None:
        text = Text(node.label)
        text.append(f"  {node.figures}", style="dim")
        text.append(f"  [{node.source}]", style="dim")
        branch = parent.add(text)
        for child in node.children:
            add(branch, child)

    for node in nodes:
        add(tree, node)
    return Group(tree, *[Text(f"  {n}", style="dim") for n in notes], Text(""))


def _metrics(report: Report) -> RenderableType:
    table = Table(title="Metrics", title_justify="left")
    for col in ("metric", "value", "layer", "source", "better", "n"):
        table.add_column(col)
    for m in report.metrics:
        table.add_row(Text(m.name), Text(fmt_value(m.value, m.unit, m.reason)), Text(m.layer),
                      Text(m.source), Text(m.better.value),
                      Text(str(len(m.samples)) if m.samples else "-"))
    return table


def _findings(report: Report) -> RenderableType:
    if not report.findings:
        return Text("Findings: none", style="bold")
    order = {"critical": 0, "warning": 1, "info": 2}
    parts: list[RenderableType] = [Text("Findings", style="bold underline")]
    for f in sorted(report.findings, key=lambda f: order.get(f.severity, 3)):
        text = Text()
        text.append(f"[{f.severity}] ", style=SEVERITY_STYLE.get(f.severity, ""))
        text.append(f"{f.title}", style="bold")
        text.append(f"  ({f.layer}, {f.rule}, from {f.source})\n", style="dim")
        for line in f.evidence:
            text.append(f"    {line}\n")
        text.append(f"  → {f.action}\n", style="italic")
        parts.append(text)
    return Group(*parts)


class TextRenderer(Renderer):
    """The layered report for a terminal."""

    name = "text"
    description = "the layered report for a terminal (colour when it is one)"

    def render(self, report: Report, options: RenderOptions) -> str:
        """Return the report as terminal text."""
        buffer = io.StringIO()
        console = Console(file=buffer, width=options.width, force_terminal=options.color,
                          color_system="standard" if options.color else None,
                          highlight=False, emoji=False)
        console.print(_header(report))
        console.print(_backends(report))
        console.print()
        console.print(_budget(report))
        console.print(_tree(report, options))
        for layer in Layer:
            console.print(_layer(report, layer, options))
        console.print(_metrics(report))
        console.print()
        console.print(_findings(report))
        return buffer.getvalue()


@hookimpl
def perfstack_renderers() -> list[Renderer]:
    """Provide the text renderer."""
    return [TextRenderer()]
