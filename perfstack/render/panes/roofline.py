"""The roofline pane in text and markdown: how close the ops ran to the machine's ceilings
(``perfstack.render.text`` lays out the page and calls it, as
``perfstack.analysis.panes.PANES`` lists it)."""

from __future__ import annotations

from perfstack.analysis.panes.roofline import RoofView
from perfstack.plugin.renderer import markdown_escape as escape
from perfstack.plugin.renderer import markdown_table
from perfstack.render.text.grid import Column, Page, table, wrap
from perfstack.render.words.roofline import roof_ceiling_line, roof_cells, roof_summary, roof_title


def text(page: Page, v: RoofView) -> None:
    """The ceilings, where the op time is bound, and the heaviest ops against their roof."""
    page.section(roof_title(v))
    page.extend(wrap(roof_ceiling_line(v), page.width, indent=4, first="  "))
    page.extend(wrap(roof_summary(v), page.width, indent=4, first="  "))
    if v.top:
        page.add("")
        page.extend(table([Column("op", name=True), Column("time"), Column("share"),
                           Column("achieved"), Column("of roof"), Column("bound", left=True),
                           Column("type", left=True)], roof_cells(v), page.width))


def markdown(v: RoofView) -> list[str]:
    """The ceilings, where the op time is bound, and the heaviest ops against their roof."""
    out = ["", f"### {escape(roof_title(v))}", "", escape(roof_ceiling_line(v)), "",
           f"_{escape(roof_summary(v))}_"]
    if v.top:
        out += [""]
        out += markdown_table(["op", "time", "share", "achieved", "of roof", "bound", "type"],
                              [[escape(c) for c in row] for row in roof_cells(v)])
    return out
