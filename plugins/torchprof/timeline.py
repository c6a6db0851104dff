"""The device's time as a union of intervals: busy, what it was busy with, and idle.

Streams run in parallel, so adding kernel durations counts an overlap twice (a collective
beside a GEMM); every figure here is a length of a union of intervals instead. Within a window
(the profiled steps, on the trace's clock), per device:

- ``busy``: the union of kernels, memcpy and memset;
- ``compute``: the union of compute kernels; ``communication``: collective kernels (NCCL,
  RCCL) not under compute; ``memory``: memcpy/memset under no kernel; ``idle``: the rest of the
  window. The four add up to the window (the temporal breakdown HTA calls idle/compute/
  non-compute, with communication and memory apart);
- ``host_wait``: the part of the idle time before the call that launched the next device event
  was even made: the device waited for the host;
- ``comm_overlap``: the share of collective time hidden behind compute;
- ``launch_delays``: for each event, the time from its launch call to its start on the device
  (a long queue means the host runs ahead; a short one at idle gaps means it cannot keep up).
"""

from __future__ import annotations

import bisect
from collections.abc import Iterable, Sequence
from typing import Any

from perfstack.records import datarecord, field

Segments = list[tuple[float, float]]

COMPUTE, COMMUNICATION, MEMORY = "compute", "communication", "memory"


@datarecord(frozen=True)
class DeviceEvent:
    """One kernel, memcpy or memset on the device's clock (µs)."""

    ts: float
    end: float
    kind: str  # compute, communication or memory
    device: Any
    stream: Any
    launched: float | None = None  # when the launching runtime call started, if known


def union(intervals: Iterable[tuple[float, float]]) -> Segments:
    """Return the union of intervals as sorted, disjoint segments."""
    out: Segments = []
    for start, end in sorted(intervals):
        if end <= start:
            continue
        if out and start <= out[-1][1]:
            if end > out[-1][1]:
                out[-1] = (out[-1][0], end)
        else:
            out.append((start, end))
    return out


def length(segments: Segments) -> float:
    """Return the total length of disjoint segments."""
    return sum(end - start for start, end in segments)


def intersect(a: Segments, b: Segments) -> Segments:
    """Return the intersection of two sorted, disjoint segment lists."""
    out: Segments = []
    i = j = 0
    while i < len(a) and j < len(b):
        start, end = max(a[i][0], b[j][0]), min(a[i][1], b[j][1])
        if start < end:
            out.append((start, end))
        if a[i][1] < b[j][1]:
            i += 1
        else:
            j += 1
    return out


def clip(intervals: Iterable[tuple[float, float]], lo: float, hi: float) -> Segments:
    """Return the intervals cut to [lo, hi], dropping those outside."""
    return [(max(s, lo), min(e, hi)) for s, e in intervals if e > lo and s < hi]


@datarecord
class DeviceTime:
    """One device's time within the window, in µs."""

    device: Any
    window: float
    busy: float
    compute: float
    communication: float
    memory: float
    idle: float
    host_wait: float
    comm_total: float  # collective time, hidden or not
    comm_overlapped: float  # collective time under compute
    events: int
    streams: dict[Any, float] = field(default_factory=dict)  # busy per stream
    launch_delays: list[float] = field(default_factory=list)


def device_times(events: Sequence[DeviceEvent], start: float, end: float) -> list[DeviceTime]:
    """Return each device's time in the window [start, end], devices in sorted order."""
    by_device: dict[Any, list[DeviceEvent]] = {}
    for ev in events:
        if ev.end > start and ev.ts < end:
            by_device.setdefault(ev.device, []).append(ev)
    return [_one(dev, evs, start, end)
            for dev, evs in sorted(by_device.items(), key=lambda kv: str(kv[0]))]


def _one(device: Any, events: list[DeviceEvent], start: float, end: float) -> DeviceTime:
    def segs(kinds: tuple[str, ...]) -> Segments:
        return union(clip(((e.ts, e.end) for e in events if e.kind in kinds), start, end))

    busy = segs((COMPUTE, COMMUNICATION, MEMORY))
    compute = segs((COMPUTE,))
    comm = segs((COMMUNICATION,))
    kernels = segs((COMPUTE, COMMUNICATION))
    comm_under_compute = length(intersect(comm, compute))
    window = end - start
    streams: dict[Any, float] = {}
    for stream in {e.stream for e in events}:
        streams[stream] = length(union(clip(((e.ts, e.end) for e in events
                                             if e.stream == stream), start, end)))
    return DeviceTime(
        device=device, window=window, busy=length(busy), compute=length(compute),
        communication=length(comm) - comm_under_compute,
        memory=length(busy) - length(kernels), idle=window - length(busy),
        host_wait=_host_wait(events, busy, start, end), comm_total=length(comm),
        comm_overlapped=comm_under_compute, events=len(events), streams=streams,
        launch_delays=[e.ts - e.launched for e in events
                       if e.launched is not None and start <= e.ts < end])


def _host_wait(events: list[DeviceEvent], busy: Segments, start: float, end: float) -> float:
    """Idle time before the next device event's launch call was made."""
    ordered = sorted(events, key=lambda e: e.ts)
    starts = [e.ts for e in ordered]
    gaps: Segments = []
    cursor = start
    for seg_start, seg_end in busy:
        if seg_start > cursor:
            gaps.append((cursor, seg_start))
        cursor = max(cursor, seg_end)
    total = 0.0
    for gap_start, gap_end in gaps:
        i = bisect.bisect_left(starts, gap_end)
        if i >= len(ordered):
            continue
        launched = ordered[i].launched
        if launched is not None:
            total += min(max(launched - gap_start, 0.0), gap_end - gap_start)
    return total


def percentile(values: Sequence[float], q: float) -> float:
    """Return the q-th percentile (0-100) by linear interpolation; values must be non-empty."""
    ordered = sorted(values)
    pos = (len(ordered) - 1) * q / 100
    low = int(pos)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (pos - low)


@datarecord
class StreamTime:
    """One stream's time within the window, in µs: busy, its idle time by cause, and how deep
    its launch queue was.

    Idle is split the way the host and the device explain it: ``host`` before the call that
    launched the stream's next event was made (the host had not asked yet); ``streams`` after
    it, while another stream of the device was busy (a dependency on, or a wait for, other
    work); ``other`` the rest (launched, nothing running: a synchronisation, an event wait).
    The queue depth is HTA's: outstanding operations on the stream, one more at each launch
    call, one less as each starts on the device, over the events launched in the window.
    """

    device: Any
    stream: Any
    window: float
    busy: float
    host: float
    streams: float
    other: float
    launches: int
    queue_mean: float | None
    queue_max: int | None


def stream_times(events: Sequence[DeviceEvent], start: float, end: float) -> list[StreamTime]:
    """Each stream's time in the window [start, end], by device and stream."""
    by_stream: dict[tuple[Any, Any], list[DeviceEvent]] = {}
    for ev in events:
        by_stream.setdefault((ev.device, ev.stream), []).append(ev)
    out = []
    for (device, stream), own in by_stream.items():
        others = union(clip(((e.ts, e.end) for (d, s), evs in by_stream.items()
                             if d == device and s != stream for e in evs), start, end))
        out.append(_stream(device, stream, sorted(own, key=lambda e: e.ts), others, start,
                           end))
    return sorted(out, key=lambda t: (str(t.device), str(t.stream)))


def _stream(device: Any, stream: Any, own: list[DeviceEvent], others: Segments,
            start: float, end: float) -> StreamTime:
    busy = union(clip(((e.ts, e.end) for e in own), start, end))
    starts = [e.ts for e in own]
    other_ends = [seg_end for _, seg_end in others]
    host = streams = other = 0.0
    cursor = start
    for seg_start, seg_end in [*busy, (end, end)]:
        if seg_start > cursor:  # an idle gap [cursor, seg_start]
            i = bisect.bisect_left(starts, seg_start)
            launched = own[i].launched if i < len(own) else None
            waited = (min(max(launched - cursor, 0.0), seg_start - cursor)
                      if launched is not None else 0.0)
            host += waited
            busy_elsewhere = _covered(cursor + waited, seg_start, others, other_ends)
            streams += busy_elsewhere
            other += seg_start - cursor - waited - busy_elsewhere
        cursor = max(cursor, seg_end)
    changes = sorted([(e.launched, 1) for e in own if e.launched is not None
                      and start <= e.launched < end]
                     + [(e.ts, -1) for e in own if e.launched is not None
                        and start <= e.launched < end])
    depth, depths = 0, []
    for _, step in changes:
        depth += step
        depths.append(depth)
    return StreamTime(device, stream, end - start, length(busy), host, streams, other,
                      len(changes) // 2, sum(depths) / len(depths) if depths else None,
                      max(depths) if depths else None)


def _covered(lo: float, hi: float, segments: Segments, ends: list[float]) -> float:
    """How much of [lo, hi] sorted, disjoint ``segments`` (their ends in ``ends``) cover:
    found by bisection, so each of a stream's many gaps costs only its own overlaps."""
    total = 0.0
    i = bisect.bisect_right(ends, lo)
    while i < len(segments) and segments[i][0] < hi:
        total += min(hi, segments[i][1]) - max(lo, segments[i][0])
        i += 1
    return total
