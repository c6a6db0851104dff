"""The steps pane in text and markdown: each phase of the profiled steps, the host's and
the device's side of a step, the outlier steps (``perfstack.render.text`` lays out the page
and calls it, as ``perfstack.analysis.panes.PANES`` lists it)."""

from __future__ import annotations

from perfstack.analysis.panes.steps import StepView
from perfstack.plugin.renderer import markdown_escape as escape
from perfstack.plugin.renderer import markdown_table
from perfstack.render.text.grid import Column, Page, table, wrap
from perfstack.render.words.steps import outlier_line, step_cells, step_sides_line, steps_title

#: The steps table's columns after the phase.
STEP_COLUMNS = ("median", "share", "fastest", "slowest")


def text(page: Page, v: StepView) -> None:
    """The steps by phase, the step's two sides and the outlier steps."""
    page.section(steps_title(v))
    page.extend(table([Column("phase", name=True), *(Column(c) for c in STEP_COLUMNS)],
                      step_cells(v), page.width))
    sides = step_sides_line(v)
    if sides:
        page.extend(wrap(sides, page.width, indent=4, first="  "))
    for o in v.outliers:
        page.extend(wrap(outlier_line(o), page.width, indent=4, first="  "))


def markdown(v: StepView) -> list[str]:
    """The steps by phase, the step's two sides and the outlier steps."""
    out = ["", f"### {escape(steps_title(v))}", ""]
    out += markdown_table(["phase", *STEP_COLUMNS],
                          [[escape(c) for c in row] for row in step_cells(v)])
    if (sides := step_sides_line(v)) is not None:
        out += [f"- {escape(sides)}"]
    return out + [f"- {escape(outlier_line(o))}" for o in v.outliers]
