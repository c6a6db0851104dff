"""The torch.compile pane in text and markdown (``perfstack.render.text`` lays out the page
and calls it, as ``perfstack.analysis.panes.PANES`` lists it)."""

from __future__ import annotations

from perfstack.analysis.panes.compile import CompileView
from perfstack.plugin.renderer import markdown_escape as escape
from perfstack.plugin.renderer import markdown_table
from perfstack.render.text.grid import Page
from perfstack.render.words.compile import (
    COMPILE_COLUMNS,
    COMPILE_TITLE,
    LINE_COLUMNS,
    compile_cells,
    compile_lines,
    line_cells,
    line_kernels,
    lines_sentence,
)


def text(page: Page, v: CompileView) -> None:
    """What torch.compile did: its cost, its breaks, and its frames as a table."""
    page.section(COMPILE_TITLE)
    page.sentences(compile_lines(v))
    if v.frames:
        page.add("")
        page.named_table("frame", COMPILE_COLUMNS, compile_cells(v))
    said = lines_sentence(v)
    if said is not None:
        page.add("")
        page.sentences([said])
        page.named_table("line", LINE_COLUMNS, line_cells(v))
        if v.more_lines:
            page.sentences([f"{v.more_lines} more line(s) in the compile layer (--full)."])


def markdown(v: CompileView) -> list[str]:
    """What torch.compile did: its cost and breaks in sentences, its frames as a table."""
    out = ["", f"### {escape(COMPILE_TITLE)}", ""]
    out += [f"- {escape(line)}" for line in compile_lines(v)]
    rows = [[escape(c) for c in cells] for cells in compile_cells(v)]
    if rows:
        out += ["", *markdown_table(["frame", *COMPILE_COLUMNS], rows)]
    said = lines_sentence(v)
    if said is not None:
        lines = [[*map(escape, cells), escape(kernels)]
                 for cells, kernels in zip(line_cells(v), line_kernels(v), strict=True)]
        out += ["", escape(said), "", *markdown_table(["line", *LINE_COLUMNS, "which"], lines)]
        if v.more_lines:
            out += ["", f"{v.more_lines} more line(s) in the compile layer (--full)."]
    return out
