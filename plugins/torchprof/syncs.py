"""Where the host waited for the device, and what the device's copies to and from the host
cost, over the profiled steps of a GPU trace.

A *synchronisation* is a runtime call that returns only once the device is done with work
queued before it: ``cudaStreamSynchronize`` / ``cudaDeviceSynchronize`` /
``cudaEventSynchronize`` (and HIP's), a plain ``cudaMemcpy``, and a ``cudaMemcpyAsync`` whose
copy reads or writes pageable host memory (the driver stages it, after the stream's earlier
work: torch's ``.item()``, ``.cpu()``, ``.tolist()``, ``float(t)`` and a printed tensor all
end in one). The host is blocked for the call's duration; the device then drains, and idles
until the host launches again: *after-sync* idle, the gap of the device's timeline that holds
the call's return. Each synchronisation is charged to the op that made it (the innermost op
on its thread), whose row then carries ``sync_calls`` and ``sync_time``.

A *host copy* is a memcpy between host and device (``HtoD``, ``DtoH``): its bytes, and its
union on the device's timeline as a share of the steps (``gpu_copy_share``).
"""

from __future__ import annotations

import bisect
import re
import statistics
from collections import defaultdict
from collections.abc import Sequence

from perfstack.analysis.kernelnames import copy_of
from perfstack.records import datarecord, field
from perfstack.report import Better, Metric

from .opgroups import OpGroups
from .optree import Tree
from .timeline import clip, length, union
from .trace import Kernel, RuntimeCall, TraceAggregate

SOURCE = "torch"
US = 1e-6
#: Runtime and driver calls that wait for the device whatever they copy.
SYNC_CALL = re.compile(r"^(cuda|hip)(Stream|Device|Event|Ctx)Synchronize$|"
                       r"^cu(Stream|Ctx|Event)Synchronize$|^(cuda|hip)Memcpy(WithStream)?$|"
                       r"^cuMemcpy(DtoH|HtoD)(_v2)?$")
#: Copy calls that wait when their copy touches pageable host memory.
ASYNC_COPY = re.compile(r"^(cuda|hip)MemcpyAsync$|^cuMemcpy(DtoH|HtoD)Async(_v2)?$")


@datarecord
class HostWaits:
    """The profiled steps' synchronisations and host copies, step by step (in order)."""

    calls: list[int] = field(default_factory=list)  # synchronisations a step
    blocked: list[float] = field(default_factory=list)  # µs the host was blocked in them
    copy_bytes: list[int] = field(default_factory=list)  # host<->device bytes a step
    after_sync: float = 0.0  # µs of device idle that held a synchronisation's return
    copy_union: float = 0.0  # µs of the device's timeline in host<->device copies
    window: float = 0.0  # µs of the steps as the device ran them
    by_op: dict[str, list[float]] = field(default_factory=lambda: defaultdict(lambda: [0, 0.0]))


def _synchronising(call: RuntimeCall, copies: dict[int, Kernel]) -> bool:
    if SYNC_CALL.match(call.name):
        return True
    if ASYNC_COPY.match(call.name):
        copy = copies.get(call.correlation)
        kind = copy_of(copy.name) if copy is not None else None
        return kind is not None and kind[1] == "pageable"
    return False


def host_waits(agg: TraceAggregate, trees: dict[str, Tree], ops: OpGroups,
               host: Sequence[tuple[float, float]],
               device: Sequence[tuple[float, float]]) -> HostWaits:
    """The synchronisations in each host step range (``host``) and the host copies of each
    step, with the device's after-sync idle and copy time over the steps as it ran them
    (``device``: one window a step, in order)."""
    out = HostWaits()
    if not host or not device:
        return out
    copies = {k.correlation: k for k in agg.kernels if k.cat == "gpu_memcpy"}
    ordered = sorted(host)
    starts = [w[0] for w in ordered]
    out.calls = [0] * len(ordered)
    out.blocked = [0.0] * len(ordered)
    out.copy_bytes = [0] * len(ordered)
    returns: list[tuple[float, float]] = []  # each synchronisation's (start, end)
    for call in agg.runtime.values():
        i = bisect.bisect_right(starts, call.ts) - 1
        if i < 0 or call.ts > ordered[i][1]:
            continue
        copy = copies.get(call.correlation)
        kind = copy_of(copy.name) if copy is not None else None
        if copy is not None and kind is not None and kind[0] in ("HtoD", "DtoH"):
            out.copy_bytes[i] += copy.nbytes or 0
        if not _synchronising(call, copies):
            continue
        out.calls[i] += 1
        out.blocked[i] += call.end - call.ts
        returns.append((call.ts, call.end))
        tree = trees.get(call.tid)
        op = tree.innermost(call.ts) if tree is not None else -1
        if tree is not None and op >= 0 and not tree.is_step(op):
            entry = out.by_op[ops.group(tree, op).key]
            entry[0] += 1
            entry[1] += call.end - call.ts
    lo, hi = device[0][0], device[-1][1]
    out.window = hi - lo
    busy = union(clip(((k.ts, k.ts + k.dur) for k in agg.kernels), lo, hi))
    gaps, cursor = [], lo
    for a, b in busy:
        if a > cursor:
            gaps.append((cursor, a))
        cursor = max(cursor, b)
    if cursor < hi:
        gaps.append((cursor, hi))
    ends = sorted(end for _, end in returns)
    for a, b in gaps:  # a gap that holds a synchronisation's return: the device drained
        j = bisect.bisect_left(ends, a)
        if j < len(ends) and ends[j] <= b:
            out.after_sync += b - a
    linked = [(k.ts, k.ts + k.dur) for k in agg.kernels if k.cat == "gpu_memcpy"
              and (c := copy_of(k.name)) is not None and c[0] in ("HtoD", "DtoH")]
    out.copy_union = length(union(clip(linked, lo, hi)))
    return out


def _per_step(name: str, samples: list[float], unit: str, what: str) -> Metric:
    return Metric(name, statistics.median(samples), unit,
                  "kernel", SOURCE, Better.LOWER, samples=samples, samples_of="steps",
                  detail=True, description=f"{what}, per profiled step (the median; the "
                  "samples are the steps in order)")


def wait_metrics(w: HostWaits) -> list[Metric]:
    """The synchronisations and host copies as metrics (none without steps)."""
    if not w.calls or w.window <= 0:
        return []
    out = [
        _per_step("gpu_sync_calls", [float(c) for c in w.calls], "count",
                  "calls that made the host wait for the device (stream, device and event "
                  "synchronisations, copies to or from pageable memory)"),
        _per_step("gpu_sync_time", [b * US for b in w.blocked], "s",
                  "the host's time blocked in those calls"),
        Metric("gpu_idle.after_sync", 100 * w.after_sync / w.window, "%", "kernel", SOURCE,
               Better.LOWER, detail=True,
               description="device idle that held a synchronisation's return: the device "
               "drained while the host waited, and idled until the host launched again; "
               "share of the profiled steps as the device ran them"),
        Metric("gpu_copy_share", 100 * w.copy_union / w.window, "%", "kernel", SOURCE,
               Better.LOWER, detail=True,
               description="the device's time in copies between host and device (HtoD, "
               "DtoH; their union), share of the profiled steps as the device ran them"),
    ]
    if any(w.copy_bytes):
        out.append(_per_step("gpu_copy_bytes", [float(b) for b in w.copy_bytes], "B",
                             "bytes copied between host and device"))
    return out
