"""Each GPU stream in words, defined once for every renderer: the heading, the columns, a
row a stream and what the idle columns mean."""

from __future__ import annotations

from perfstack.analysis.panes.streams import FIGURES, StreamView
from perfstack.report.units import fmt_value, pct

#: The streams table's columns, for each figure.
STREAM_COLUMNS = ("busy", "idle: host", "other streams", "nothing ran", "queue", "deepest")


def streams_title(v: StreamView) -> str:
    """'Streams: busy, and why each idled, over the profiled steps' wall time (torch)'."""
    return f"Streams: busy, and why each idled, over {v.window} ({v.source})"


def stream_cells(v: StreamView) -> list[list[str]]:
    """One row per stream: busy and idle shares, the mean and deepest launch queue."""
    out = []
    for row in v.rows:
        cells = [row.stream]
        for figure in FIGURES:
            value = row.figures.get(figure)
            if value is None:
                cells.append("-")
            elif figure in ("gpu_queue_depth", "gpu_queue_depth_max"):
                cells.append(fmt_value(value, "count"))  # (as its metric is shown)
            else:
                cells.append(pct(value))
        out.append(cells)
    return out


#: What the idle and queue columns mean, under the table.
STREAMS_LEGEND = ("idle: host = the next launch call not yet made; other streams = launched, "
                  "another stream busy; queue = mean launch queue depth (CUDA stalls the host "
                  "at 1,024)")
