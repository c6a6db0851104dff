"""``perfstack show --format markdown``: the report for an issue or a pull request.

Findings first, then how the runs went, the backends with their overhead, each layer's top
rows per backend, and the metrics. Every string that came from the workload (function and op
names, file paths, printed output) is escaped, so a name like ``<script>`` or ``a|b`` cannot
break the table or inject markup.
"""

from __future__ import annotations

from perfstack.pluginmanager import hookimpl
from perfstack.render import Renderer, RenderOptions
from perfstack.render import markdown_escape as escape
from perfstack.render_text import LAYER_TITLES, _environment_line
from perfstack.report import Layer, Report, Row
from perfstack.units import fmt_quantity, fmt_seconds, fmt_value

SEVERITY_MARK = {"critical": "🔴 critical", "warning": "🟠 warning", "info": "🔵 info"}


def _table(head: list[str], rows: list[list[str]]) -> list[str]:
    out = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    out += ["| " + " | ".join(cells) + " |" for cells in rows]
    return out


def _top(rows: list[Row], top: int) -> dict[str, list[Row]]:
    by_source: dict[str, list[Row]] = {}
    for row in rows:
        by_source.setdefault(row.source, []).append(row)
    return {source: items[:top] for source, items in by_source.items()}


class MarkdownRenderer(Renderer):
    """GitHub-flavoured markdown of the whole report."""

    name = "markdown"
    description = "markdown for an issue or a pull request (findings first)"
    output_file_extension = ".md"

    def render(self, report: Report, options: RenderOptions) -> str:
        """Return the report as markdown."""
        run = report.run
        wall = next((m for m in report.metrics if m.name == "wall_time"), None)
        out = [f"## perfstack: {escape(' '.join(run.command))}", "",
               f"{escape(_environment_line(report.environment))}  ",
               f"perfstack {escape(run.perfstack_version)} · {escape(run.started)} · "
               f"baseline {fmt_value(wall.value, 's', wall.reason) if wall else 'n/a'} "
               f"(median of {len(wall.samples or []) if wall else 0})"
               + ("" if run.complete else " · **interrupted: partial report**"), ""]
        out += ["### Findings", ""]
        if not report.findings:
            out.append("No findings.")
        for f in report.findings:
            out.append(f"- **{SEVERITY_MARK.get(f.severity, f.severity)}** "
                       f"{escape(f.title)} ({escape(f.rule)}, {escape(f.layer)})  ")
            out += [f"  {escape(e)}  " for e in f.evidence]
            out.append(f"  → {escape(f.action)}")
        out += ["", "### Backends", ""]
        out += _table(["backend", "status", "layers", "wall", "overhead", "notes"], [[
            escape(b.name), escape(b.status.value), escape(", ".join(b.layers)),
            fmt_seconds(b.wall_s) if b.wall_s is not None else "—",
            f"{b.overhead.ratio:.2f}x (n={b.overhead.baseline_n})" if b.overhead else
            escape(b.overhead_note or "—"),
            escape(b.reason or "; ".join(b.notes[:2]))] for b in report.backends])
        for layer in Layer:
            rows = report.layers.get(layer, [])
            out += ["", f"### {escape(LAYER_TITLES[layer])}", ""]
            if not rows:
                out.append("_nothing measured here_")
                continue
            for source, items in _top(rows, options.top).items():
                names = list(dict.fromkeys(k for r in items for k in r.values))[:5]
                out += [f"from **{escape(source)}**:", ""]
                out += _table(["name", *map(escape, names)], [
                    [escape(r.name[:120]), *(escape(fmt_quantity(r.values[n]))
                                             if n in r.values else "" for n in names)]
                    for r in items])
                out.append("")
        out += ["### Metrics", ""]
        out += _table(["metric", "value", "layer", "source", "n"], [[
            escape(m.name), escape(fmt_value(m.value, m.unit, m.reason)), escape(m.layer),
            escape(m.source), str(len(m.samples or []) or 1)] for m in report.metrics])
        return "\n".join(out) + "\n"


@hookimpl
def perfstack_renderers() -> list[Renderer]:
    """Provide the markdown format."""
    return [MarkdownRenderer()]
