"""The memray backend's part inside the workload process (started by perfstack's bootstrap).

It starts memray's ``Tracker`` before the script runs and stops it when the script ends, so
that the capture holds the script's allocations and none of perfstack's. At every step it
notes the wall-clock time (``time.time_ns()``, memray's own clock for its memory snapshots),
so that the capture's memory can be read per step. Only memray and the standard library are
imported here: this runs in the workload.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable
from typing import Any

#: memray's capture of the whole script.
CAPTURE = "memray.bin"
#: What the hook noted: when the tracker started and stopped and when each step ended.
SIDECAR = "memray-steps.json"
#: At most this many step times are kept (a long job's later steps add nothing per step).
MAX_STEPS = 100_000


def start(options: dict[str, Any], folder: str) -> Callable[[], None]:
    """Start memray's tracker in this process; return the function that stops it and saves
    the step times."""
    import memray

    import perfstack

    path = os.path.join(folder, CAPTURE)
    tracker = memray.Tracker(path, native_traces=bool(options.get("native", True)),
                             memory_interval_ms=int(options.get("interval_ms", 2)),
                             follow_fork=False, trace_python_allocators=False)
    steps: list[int] = []

    def on_step() -> None:
        if len(steps) < MAX_STEPS:
            steps.append(time.time_ns())

    started = time.time_ns()
    tracker.__enter__()
    perfstack._step_callbacks.append(on_step)

    def finish() -> None:
        perfstack._step_callbacks.remove(on_step)
        tracker.__exit__(None, None, None)
        info = {"started_ns": started, "stopped_ns": time.time_ns(), "step_ends_ns": steps,
                "explicit_steps": perfstack._explicit,
                "memray": getattr(memray, "__version__", None)}
        tmp = os.path.join(folder, SIDECAR + ".tmp")
        with open(tmp, "w", encoding="utf-8") as fh:
            json.dump(info, fh)
        os.replace(tmp, os.path.join(folder, SIDECAR))

    return finish
