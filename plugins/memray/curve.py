"""memray's run as trace events: the heap and the resident memory over time (memray's own
memory snapshots, its temporal view), and the peak marked with what held the heap then.

On the time axis of the run's workload start (µs), as the merged trace aligns every run. The
peak is one slice on a track of its own, named for the lines that held most of the heap at
that instant (memray's high-water-mark records, each charged to the innermost frame of the
workload's own code on its stack, else its innermost frame), with each line's bytes in its
details.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from perfstack.report.units import fmt_bytes
from perfstack.runfolder.rundir import RunFolder

from ..runtracks import MARK

#: Thread id of the peak's track, and how many lines the peak names.
PEAK_TID = 9_000_101
PEAK_LINES = 5
HEAP, RESIDENT = "heap (B)", "resident memory (B)"


def memray_events(path: Path, pid: int, home: str | None = None) -> list[dict[str, Any]]:
    """memray's heap and resident memory as counters of process ``pid``, and its peak as a
    slice naming what held it, by the memory layer's sites (``home``: the workload's folder,
    whose code is the workload's own); [] where the run's start is unknown."""
    import memray

    from .capture import Charger

    started = RunFolder(path.parent).started()
    if started is None:
        return []
    start_us = started[1] / 1e3
    with memray.FileReader(str(path)) as reader:
        snapshots = list(reader.get_memory_snapshots())
        peak_heap = int(reader.metadata.peak_memory)  # the exact peak (the report's peak_heap)
        charger = Charger(home, bool(reader.metadata.has_native_traces))
        held: dict[str, int] = {}
        for record in reader.get_high_watermark_allocation_records(merge_threads=True):
            where = charger.site(record).key
            held[where] = held.get(where, 0) + int(record.size)
    out: list[dict[str, Any]] = []
    for snap in snapshots:
        ts = snap.time * 1e3 - start_us
        out.append({"ph": "C", "pid": pid, "tid": 0, "ts": ts, "name": HEAP,
                    "args": {"value": float(snap.heap)}})
        out.append({"ph": "C", "pid": pid, "tid": 0, "ts": ts, "name": RESIDENT,
                    "args": {"value": float(snap.rss)}})
    if snapshots and held:
        peak = max(snapshots, key=lambda s: s.heap)  # when: the snapshot that saw the most
        top = sorted(held.items(), key=lambda kv: -kv[1])[:PEAK_LINES]
        out.append({"ph": "M", "name": "thread_name", "pid": pid, "tid": PEAK_TID,
                    "args": {"name": "heap peak"}})
        out.append({"ph": "X", "pid": pid, "tid": PEAK_TID, "ts": peak.time * 1e3 - start_us,
                    "dur": 0.0, "cat": MARK,
                    "name": f"peak heap {fmt_bytes(peak_heap)}: {top[0][0]} {fmt_bytes(top[0][1])}",
                    "args": {"held": "; ".join(f"{w} {fmt_bytes(b)}" for w, b in top)}})
    return out
