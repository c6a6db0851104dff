"""The memory pane in text and markdown (``perfstack.render.text`` lays out the page and
calls it, as ``perfstack.analysis.panes.PANES`` lists it)."""

from __future__ import annotations

from perfstack.analysis.panes.memory import MemoryView
from perfstack.plugin.renderer import markdown_escape as escape
from perfstack.plugin.renderer import markdown_table
from perfstack.render.text.grid import Page, wrap
from perfstack.render.words.memory import (
    HOLDER_COLUMNS,
    MEMORY_TITLE,
    holder_cells,
    memory_lines,
    relation_line,
)


def text(page: Page, v: MemoryView) -> None:
    """Where the memory goes: the peaks, the holders at the peak, the growth."""
    page.section(MEMORY_TITLE)
    page.sentences(memory_lines(v))
    if v.holders:
        page.add("")
        page.named_table("held at the peak by", HOLDER_COLUMNS, holder_cells(v))
    relation = relation_line(v)
    if relation:
        page.extend(wrap(relation, page.width, indent=4, first="  "))


def markdown(v: MemoryView) -> list[str]:
    """Where the memory goes: the peaks, the holders at the peak, the growth."""
    out = ["", f"### {MEMORY_TITLE}", ""]
    out += [f"- {escape(line)}" for line in memory_lines(v)]
    if v.holders:
        out += [""]
        out += markdown_table(["held at the peak by", *HOLDER_COLUMNS],
                              [[escape(c) for c in row] for row in holder_cells(v)])
    relation = relation_line(v)
    if relation:
        out += ["", f"_{escape(relation)}_"]
    return out
