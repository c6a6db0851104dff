"""Step marks on the GPU's own clock, for a workload that runs CUDA (standard library only:
torch is used only where the workload imported it and initialised CUDA).

CUDA runs asynchronously: a step's end on the host clock is when the host finished queueing
its work, which can be long before the device finishes it (2.7 ms on the host for 38 ms of
GEMMs). At each step mark a timing event is recorded on the current stream; the device
stamps it when it reaches it, that is when the work queued before the mark is done. At exit
one more event is recorded and waited for, and each mark is placed on the wall clock from its
distance to that last one: the steps as the device ran them, at the cost of one event record
a step and no synchronisation inside the workload (the bootstrap's at-exit wait aside).
"""

from __future__ import annotations

import sys
import time
from typing import Any

#: At most this many marks are recorded (each holds a CUDA event); later steps keep the
#: host's times only.
MAX_MARKS = 10_000
#: Each mark's event by its index among the step marks (``steps.state.times``).
_events: dict[int, Any] = {}


def _cuda() -> Any:
    """torch.cuda, when the workload imported torch and initialised CUDA; else None."""
    torch = sys.modules.get("torch")
    cuda = getattr(torch, "cuda", None) if torch is not None else None
    try:
        return cuda if cuda is not None and cuda.is_initialized() else None
    except Exception:  # a torch half imported, a broken driver: no device marks
        return None


def mark(index: int) -> None:
    """Record the step mark ``index`` on the device (nothing without CUDA, while a stream is
    captured into a CUDA graph, or past ``MAX_MARKS``)."""
    if len(_events) >= MAX_MARKS:
        return
    cuda = _cuda()
    if cuda is None:
        return
    try:
        if cuda.is_current_stream_capturing():
            return  # an event recorded into a graph's capture would break it
        event = cuda.Event(enable_timing=True)
        event.record()
    except Exception:
        return
    _events[index] = event


def epochs(count: int) -> list[float | None] | None:
    """Each of ``count`` step marks on the wall clock (epoch seconds) as the device reached
    it, None for a mark the device did not record; None without any. Waits for the device to
    finish what was queued: called once, at exit."""
    if not _events:
        return None
    cuda = _cuda()
    if cuda is None:
        return None
    try:
        last = cuda.Event(enable_timing=True)
        last.record()
        last.synchronize()
    except Exception:  # a device that failed (a crashed workload): the host's times stand
        return None
    now = time.time()
    out: list[float | None] = [None] * count
    for index, event in _events.items():
        if 0 <= index < count:
            try:  # (a mark on another device or stream than the last cannot be timed)
                out[index] = now - event.elapsed_time(last) / 1e3
            except Exception:
                continue
    return out if any(t is not None for t in out) else None
