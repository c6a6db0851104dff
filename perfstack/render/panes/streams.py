"""The streams pane in text and markdown: each GPU stream's busy share, why it idled and
its launch queue (``perfstack.render.text`` lays out the page and calls it, as
``perfstack.analysis.panes.PANES`` lists it)."""

from __future__ import annotations

from perfstack.analysis.panes.streams import StreamView
from perfstack.plugin.renderer import markdown_escape as escape
from perfstack.plugin.renderer import markdown_table
from perfstack.render.text.grid import Column, Page, table, wrap
from perfstack.render.words.streams import (
    STREAM_COLUMNS,
    STREAMS_LEGEND,
    stream_cells,
    streams_title,
)


def text(page: Page, v: StreamView) -> None:
    """Each stream: busy, why it idled, its launch queue; what the columns mean."""
    page.section(streams_title(v))
    page.extend(table([Column("stream", name=True), *(Column(c) for c in STREAM_COLUMNS)],
                      stream_cells(v), page.width))
    page.extend(wrap(STREAMS_LEGEND, page.width, indent=4, first="  "))


def markdown(v: StreamView) -> list[str]:
    """Each stream: busy, why it idled, its launch queue."""
    return ["", f"### {escape(streams_title(v))}", "",
            *markdown_table(["stream", *STREAM_COLUMNS], stream_cells(v))]
