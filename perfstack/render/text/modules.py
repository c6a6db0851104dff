"""The text report's module section (``perfstack.render.text`` lays out the page and calls
it)."""

from __future__ import annotations

from perfstack.analysis.view import View
from perfstack.render.text.grid import Page
from perfstack.render.words.modules import MODULE_TITLE, module_cells, module_columns, module_lines


def modules(page: Page, view: View) -> None:
    """Where in the model the time goes: the model's time, its largest modules as a tree."""
    v = view.modules
    if v is None:
        return
    page.section(MODULE_TITLE)
    page.sentences(module_lines(v))
    page.add("")
    page.named_table("module", module_columns(v), module_cells(v))
