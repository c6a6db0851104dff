"""The HTML report's streams section, in the Kernels tab: each GPU stream's busy share, why
it idled and its launch queue (the text's table)."""

from __future__ import annotations

from perfstack.analysis.panes.streams import StreamView
from perfstack.render.words.streams import (
    STREAM_COLUMNS,
    STREAMS_LEGEND,
    stream_cells,
    streams_title,
)

from ..charts import esc
from ..grid import table
from .context import PageContext

#: The page's own tab the section is drawn in.
WITHIN = "pane-kernels"


def within(v: StreamView, page: PageContext) -> str:
    """Each stream's row, and what the idle and queue columns mean."""
    return (f'<section id="streams"><h2>{esc(streams_title(v))}</h2>'
            + table(["stream", *STREAM_COLUMNS],
                    [[esc(c) for c in row] for row in stream_cells(v)], {1, 2, 3, 4, 5, 6})
            + f'<p class="muted">{esc(STREAMS_LEGEND)}</p></section>')
