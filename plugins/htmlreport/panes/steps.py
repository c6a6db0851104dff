"""The HTML report's per-step breakdown: a stacked bar per profiled step, its phases side by
side (the text's table beside it), outlier steps marked; a step links to its range on the
Timeline where the page has one."""

from __future__ import annotations

from perfstack.analysis.panes.steps import StepView
from perfstack.render.words.steps import (
    outlier_line,
    phase_words,
    step_cells,
    step_sides_line,
    steps_title,
)
from perfstack.report.units import fmt_seconds

from ..charts import esc
from ..grid import table
from ..tables import TIMELINE_PANE
from .context import PageContext

PHASE_COLOURS = {"compute": "#e15759", "communication": "#59a14f", "memory": "#edc948",
                 "idle": "#bab0ac", "data": "#76b7b2", "compile": "#b07aa1", "eval": "#ff9da7",
                 "ops": "#f28e2b", "other": "#4e79a7"}
#: Steps drawn at most (the slowest are kept when there are more).
MOST = 60


def _to_timeline(v: StepView, index: int) -> str:
    """An open link to the ``index``-th profiled step (1-based, in profile order) on the
    Timeline: the page finds that profiler step range of the backend's run (its first
    rank's, in a job) there."""
    return (f'<a class="to-timeline" href="#{TIMELINE_PANE}" data-pane="{TIMELINE_PANE}" '
            f'data-step="{index}" data-group="{esc(v.source)} run">')


def overview(v: StepView, page: PageContext) -> str:
    """The section on the overview: a bar a step, its phases side by side, then the table."""
    parts = [p for p in v.phases if not p.within]
    order = list(range(len(v.totals)))
    if len(order) > MOST:
        keep = set(sorted(order, key=lambda i: -v.totals[i])[:MOST])
        order = [i for i in order if i in keep]
    slow = {o.index for o in v.outliers}
    width, label_w, bar_h = 1000, 90, 16
    top = max(v.totals) or 1.0
    height = bar_h * len(order) + 4
    svg = [f'<svg class="chart" id="steps-chart" viewBox="0 0 {width} {height}" '
           f'width="{width}" height="{height}" role="img" aria-label="steps by phase">']
    for row, i in enumerate(order):
        y = row * bar_h + 2
        mark = " (outlier)" if i + 1 in slow else ""
        if page.timeline:
            svg.append(_to_timeline(v, i + 1))
        number = v.numbers[i]
        svg.append(f'<text x="{label_w - 6}" y="{y + 12}" text-anchor="end">step {number}'
                   f"{'*' if mark else ''}</text>")
        x = float(label_w)
        for p in parts:
            w = (width - label_w - 120) * p.seconds[i] / top
            if w <= 0:
                continue
            svg.append(f'<rect class="step-part" x="{x:.1f}" y="{y}" width="{w:.1f}" '
                       f'height="{bar_h - 3}" fill="{PHASE_COLOURS.get(p.name, "#999")}">'
                       f"<title>step {number}{esc(mark)}: {esc(phase_words(p.name))} "
                       f"{esc(fmt_seconds(p.seconds[i]))}</title></rect>")
            x += w
        svg.append(f'<text x="{x + 4:.1f}" y="{y + 12}">{esc(fmt_seconds(v.totals[i]))}</text>')
        if page.timeline:
            svg.append("</a>")
    svg.append("</svg>")
    legend = "".join(f'<span><i class="swatch" style="background:'
                     f'{PHASE_COLOURS.get(p.name, "#999")}"></i>{esc(phase_words(p.name))}</span>'
                     for p in parts)
    sides = step_sides_line(v)
    notes = (f"<li>{esc(sides)}</li>" if sides else "") + "".join(
        f"<li>{esc(outlier_line(o))}"
        + (f" ({_to_timeline(v, o.index)}on the timeline</a>)" if page.timeline else "")
        + "</li>" for o in v.outliers)
    if page.timeline:
        notes += ("<li>A click on a step shows it on the Timeline: its range zoomed to and "
                  "selected, what ran in it summed" + ("" if v.numbered else
                  " (this report does not say the steps' numbers in the run: the chart counts "
                  "the profiled steps from 1, the Timeline names each by its number, torch's "
                  "ProfilerStep#N)") + ".</li>")
    return (f'<section id="steps"><h2>{esc(steps_title(v))}</h2>' + "".join(svg)
            + f'<p class="legend">{legend}</p>'
            + (f"<ul>{notes}</ul>" if notes else "")
            + table(["phase", "median", "share", "fastest", "slowest"],
                     [[esc(c) for c in row] for row in step_cells(v)], {1, 2, 3, 4})
            + "</section>")
