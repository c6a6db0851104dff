"""Runs inside the workload process (standard library only).

Objects a script keeps in its globals are freed when the script ends, before the exit
handlers run, so a snapshot at exit misses them. A watcher thread therefore takes a snapshot
whenever the traced memory has grown by a quarter since the last one, and the report shows the
allocation sites of the largest snapshot: where the memory was at (nearly) its peak.
"""

from __future__ import annotations

import json
import os
import threading
import tracemalloc
from collections.abc import Callable
from typing import Any

_IGNORED = (tracemalloc.__file__, "<frozen importlib._bootstrap>",
            "<frozen importlib._bootstrap_external>", "<unknown>")


def _sites(snapshot: tracemalloc.Snapshot, top: int) -> list[dict[str, Any]]:
    snapshot = snapshot.filter_traces([tracemalloc.Filter(False, f) for f in _IGNORED])
    return [{"file": stat.traceback[0].filename, "line": stat.traceback[0].lineno,
             "size": stat.size, "count": stat.count}
            for stat in snapshot.statistics("lineno")[:top]]


def start(options: dict[str, Any], folder: str) -> Callable[[], None]:
    """Start tracing and the watcher; the returned function writes the sites and the peak."""
    tracemalloc.start(int(options.get("frames", 1)))
    top = int(options.get("top", 25))
    best: dict[str, Any] = {"size": 0, "snapshot": None}
    stop = threading.Event()

    def watch() -> None:
        while not stop.wait(0.05):
            current, _ = tracemalloc.get_traced_memory()
            if current > 1.25 * best["size"] and current > 1 << 20:
                best["snapshot"] = tracemalloc.take_snapshot()
                best["size"] = current

    watcher = threading.Thread(target=watch, name="perfstack-tracemalloc", daemon=True)
    watcher.start()

    def finish() -> None:
        stop.set()
        watcher.join(timeout=5)
        current, peak = tracemalloc.get_traced_memory()
        snapshot = best["snapshot"] if best["size"] > current else tracemalloc.take_snapshot()
        taken_at = max(best["size"], current)
        tracemalloc.stop()
        tmp = os.path.join(folder, "tracemalloc.json.tmp")
        with open(tmp, "w", encoding="utf-8") as fh:
            json.dump({"current": current, "peak": peak, "snapshot_size": taken_at,
                       "sites": _sites(snapshot, top)}, fh)
        os.replace(tmp, os.path.join(folder, "tracemalloc.json"))

    return finish
