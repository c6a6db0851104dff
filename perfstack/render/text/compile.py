"""The text report's torch.compile section (``perfstack.render.text`` lays out the page and
calls it)."""

from __future__ import annotations

from perfstack.analysis.view import View
from perfstack.render.text.grid import Page
from perfstack.render.words.compile import (
    COMPILE_COLUMNS,
    COMPILE_TITLE,
    compile_cells,
    compile_lines,
)


def compiled(page: Page, view: View) -> None:
    """What torch.compile did: its cost, its breaks, and its frames as a table."""
    v = view.compiled
    if v is None:
        return
    page.section(COMPILE_TITLE)
    page.sentences(compile_lines(v))
    if v.frames:
        page.add("")
        page.named_table("frame", COMPILE_COLUMNS, compile_cells(v))
