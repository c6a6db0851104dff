"""The streams of a GPU trace side by side: how busy each was, why it idled, how deep its
launch queue ran (the ``gpu_stream_busy``, ``gpu_stream_idle.*`` and ``gpu_queue_depth*``
metrics a backend published, one per stream)."""

from __future__ import annotations

import re

from perfstack.records import datarecord
from perfstack.report import Report

#: A per-stream metric: its figure and the stream (``stream7``, ``device1.stream7``).
PER_STREAM = re.compile(r"^(?P<figure>gpu_stream_busy|gpu_stream_idle\.\w+|gpu_queue_depth"
                        r"|gpu_queue_depth_max)\[(?P<stream>[^\]]+)\]$")
#: The columns, in order: the figure each comes from.
FIGURES = ("gpu_stream_busy", "gpu_stream_idle.host", "gpu_stream_idle.streams",
           "gpu_stream_idle.other", "gpu_queue_depth", "gpu_queue_depth_max")


@datarecord
class StreamRow:
    """One stream's figures (None where the backend published none)."""

    stream: str
    figures: dict[str, float | None]


@datarecord
class StreamView:
    """Every stream of the trace, busiest first; which metrics it shows."""

    source: str
    rows: list[StreamRow]
    window: str  # what the shares are of


def stream_view(report: Report) -> StreamView | None:
    """The streams table, None when the report has no per-stream idle figures."""
    by_stream: dict[str, dict[str, float | None]] = {}
    source, window = "", ""
    for m in report.metrics:
        found = PER_STREAM.match(m.name)
        if found is None:
            continue
        by_stream.setdefault(found["stream"], {})[found["figure"]] = (
            float(m.value) if m.value is not None else None)
        if found["figure"].startswith("gpu_stream_idle"):
            source = m.source
            window = (m.description or "").rpartition("share of ")[2]
    if not any("gpu_stream_idle.host" in f for f in by_stream.values()):
        return None
    rows = [StreamRow(s, {k: f.get(k) for k in FIGURES}) for s, f in by_stream.items()]
    for row in rows:  # one stream alone publishes no busy share of its own: the rest of idle
        idle = [row.figures.get(k) for k in FIGURES[1:4]]
        if row.figures["gpu_stream_busy"] is None and all(v is not None for v in idle):
            row.figures["gpu_stream_busy"] = max(100.0 - sum(v for v in idle if v), 0.0)
    rows.sort(key=lambda r: -(r.figures.get("gpu_stream_busy") or 0.0))
    return StreamView(source, rows, window)


def view(report: Report, top: int, full: bool) -> StreamView | None:
    """The pane's figures (its registered entry, ``perfstack.analysis.panes.PANES``)."""
    return stream_view(report)


def shows(name: str) -> bool:
    """Whether the pane shows metric ``name``: every per-stream figure."""
    return PER_STREAM.match(name) is not None
