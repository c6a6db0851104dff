"""The module pane in text and markdown (``perfstack.render.text`` lays out the page and
calls it, as ``perfstack.analysis.panes.PANES`` lists it)."""

from __future__ import annotations

from perfstack.analysis.panes.modules import ModuleView
from perfstack.plugin.renderer import markdown_escape as escape
from perfstack.plugin.renderer import markdown_table
from perfstack.render.text.grid import Page
from perfstack.render.words.modules import (
    MODULE_TITLE,
    module_cells,
    module_columns,
    module_lines,
)


def text(page: Page, v: ModuleView) -> None:
    """Where in the model the time goes: the model's time, its largest modules as a tree."""
    page.section(MODULE_TITLE)
    page.sentences(module_lines(v))
    page.add("")
    page.named_table("module", module_columns(v), module_cells(v))


def markdown(v: ModuleView) -> list[str]:
    """Where in the model the time goes: the model's time, its largest modules as a tree
    (a depth's indent as em spaces, which markdown keeps)."""
    out = ["", f"### {escape(MODULE_TITLE)}", ""]
    out += [f"- {escape(line)}" for line in module_lines(v)]
    rows = []
    for cells in module_cells(v):
        name = cells[0].lstrip(" ")
        rows.append(["\u2003" * ((len(cells[0]) - len(name)) // 2) + escape(name), *cells[1:]])
    return [*out, "", *markdown_table(["module", *module_columns(v)], rows)]
