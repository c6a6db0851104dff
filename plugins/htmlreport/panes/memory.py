"""The HTML report's memory section: the same sentences and holders' table as the text,
and a chart of the memory after each step (the heap's low point in the memray run, the
resident memory in the run with no profiler), drawn as inline SVG: no script, no network."""

from __future__ import annotations

from perfstack.analysis.panes.memory import MemoryView
from perfstack.render.words.memory import (
    HOLDER_COLUMNS,
    MEMORY_TITLE,
    holder_cells,
    memory_lines,
    relation_line,
)
from perfstack.report import Layer, Metric
from perfstack.report.units import fmt_bytes_apart

from ..charts import esc
from ..grid import table
from .context import PageContext

#: Each series' colour and what it is ({source}: the backend that measured it).
SERIES = (("step_heap", "#e15759", "heap, each step's low point ({source} run)"),
          ("step_resident", "#4e79a7", "resident (run with no profiler)"))


def _chart(metric: Metric, colour: str, label: str, chart_id: str) -> str:
    """One series after each step, on its own scale (its least to its most)."""
    values = metric.samples or []
    width, height, left = 1000, 110, 90
    low, high = min(values), max(values)
    low_text, high_text = fmt_bytes_apart(low, high)
    span_v = (high - low) or 1.0
    # The heap's low points start at the second step (the first holds the set-up).
    first = 2 if metric.name == "step_heap" else 1
    span = max(len(values) - 1, 1)
    points = " ".join(
        f"{left + (width - left - 10) * i / span:.1f},"
        f"{height - 22 - (height - 36) * (v - low) / span_v:.1f}"
        for i, v in enumerate(values))
    return (f'<svg class="chart" id="{chart_id}" viewBox="0 0 {width} {height}" '
            f'width="{width}" height="{height}" role="img" aria-label="{esc(label)}">'
            f'<text x="{left}" y="10" fill="{colour}">{esc(label)}</text>'
            f'<text x="{left - 6}" y="18" text-anchor="end">{esc(high_text)}</text>'
            f'<text x="{left - 6}" y="{height - 22}" text-anchor="end">{esc(low_text)}</text>'
            f'<polyline class="memory-series" data-metric="{esc(metric.name)}" '
            f'points="{points}" fill="none" stroke="{colour}" stroke-width="1.5"/>'
            f'<text x="{left}" y="{height - 4}">step {first}</text>'
            f'<text x="{width - 10}" y="{height - 4}" text-anchor="end">step '
            f"{first + len(values) - 1}</text></svg>")


#: The pane's tab, and the tab it follows.
TAB = "Memory"
AFTER = "pane-hardware"


def pane(v: MemoryView | None, page: PageContext) -> str | None:
    """The pane (none when nothing measured the memory): the section with its charts, then
    the rows by function."""
    if v is None and not page.tables.has(Layer.MEMORY):
        return None
    return ((section(v, chart=True) if v is not None else "") + "<h2>By function</h2>"
            + page.tables.html(Layer.MEMORY))


def overview(v: MemoryView, page: PageContext) -> str:
    """The section as the overview shows it (no charts)."""
    return section(v)


def section(v: MemoryView, chart: bool = False) -> str:
    """Where the memory goes; with ``chart``, the memory after each step drawn above the
    holders."""
    lines = "".join(f"<li>{esc(line)}</li>" for line in memory_lines(v))
    out = [f'<section id="memory{"-pane" if chart else ""}"><h2>{esc(MEMORY_TITLE)}</h2>'
           f"<ul>{lines}</ul>"]
    if chart:
        for n, (metric, (_, colour, label)) in enumerate(zip(
                (v.heap_steps, v.resident_steps), SERIES, strict=True)):
            if metric is not None and metric.samples and len(metric.samples) > 1:
                out.append(_chart(metric, colour, label.format(source=metric.source),
                                  f"memory-chart-{n}"))
    if v.holders:
        out.append(table(["held at the peak by", *HOLDER_COLUMNS],
                          [[esc(c) for c in row] for row in holder_cells(v)],
                          numeric={1, 2, 3, 4}))
    relation = relation_line(v)
    if relation:
        out.append(f'<p class="muted">{esc(relation)}</p>')
    return "".join(out) + "</section>"
