"""The text report's memory section (``perfstack.render.text`` lays out the page and calls
it)."""

from __future__ import annotations

from perfstack.analysis.view import View
from perfstack.render.text.grid import Page, wrap
from perfstack.render.words.memory import (
    HOLDER_COLUMNS,
    MEMORY_TITLE,
    holder_cells,
    memory_lines,
    relation_line,
)


def memory(page: Page, view: View) -> None:
    """Where the memory goes: the peaks, the holders at the peak, the growth."""
    v = view.memory
    if v is None:
        return
    page.section(MEMORY_TITLE)
    page.sentences(memory_lines(v))
    if v.holders:
        page.add("")
        page.named_table("held at the peak by", HOLDER_COLUMNS, holder_cells(v))
    relation = relation_line(v)
    if relation:
        page.extend(wrap(relation, page.width, indent=4, first="  "))
