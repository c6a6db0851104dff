"""The CUDA caching allocator's history as trace events: each device's allocated and reserved
memory over time, the allocated peak marked with the lines whose blocks held it, and torch's
own peak in its profiled steps marked with what each category held (``torch-memory.json``).

Read from the snapshot the torch backend keeps with ``--torch-memory`` on a GPU
(``cuda-memory.pickle``: ``torch.cuda.memory._snapshot()``): ``device_traces`` holds each
allocation, free and segment change with its time (µs, wall clock) and its stack;
``segments`` the state when it was taken. The allocated memory is what the
history recorded, replayed as the Memory pane's peak is (``cudasnap``: from 0 when recording
began), and the peak names the same sites (``cudasnap.block_site``); the reserved memory is
the segments at the end less what the history changed.

The file is a pickle: it is read with every class refused (torch writes only dicts, lists,
tuples, strings and numbers in it), so a report handed over cannot run code through it.
"""

from __future__ import annotations

import gzip
import io
import json
import pickle
from pathlib import Path
from typing import Any

from perfstack.report.units import fmt_bytes
from perfstack.runfolder.rundir import RunFolder

from ..runtracks import MARK
from .cudasnap import block_site, peak_blocks
from .memcats import MEMORY_SIDECAR

#: Thread id of a device's peak track (plus the device's index).
PEAK_TID = 9_000_200
#: Counter points a device's curves keep (the highest of each bin past that).
MAX_POINTS = 20_000
PEAK_LINES = 5


class _PlainOnly(pickle.Unpickler):
    """Unpickles plain containers and numbers only: any class is refused."""

    def find_class(self, module: str, name: str) -> Any:
        raise pickle.UnpicklingError(f"{module}.{name}: not a plain value; not read")


def load(path: Path, limit: int) -> dict[str, Any]:
    """The snapshot's data (``.gz`` or not), at most ``limit`` bytes of it read; ValueError
    where it is not one."""
    opener: Any = gzip.open if path.name.endswith(".gz") else open
    with opener(path, "rb") as fh:
        raw = fh.read(limit + 1)
    if len(raw) > limit:
        raise ValueError(f"{path}: over {limit >> 20} MiB; not read")
    try:
        data = _PlainOnly(io.BytesIO(raw)).load()
    except (pickle.UnpicklingError, EOFError, TypeError, ValueError, AttributeError) as exc:
        raise ValueError(f"{path}: not a CUDA memory snapshot ({exc})") from exc
    if not isinstance(data, dict) or not isinstance(data.get("device_traces"), list):
        raise ValueError(f"{path}: not a CUDA memory snapshot (no device_traces)")
    return data


def _thin(points: list[tuple[float, float]]) -> list[tuple[float, float]]:
    """At most MAX_POINTS points: past that, each bin's highest (a peak is never lost)."""
    if len(points) <= MAX_POINTS:
        return points
    size = -(-len(points) // MAX_POINTS)
    return [max(points[i:i + size], key=lambda p: p[1]) for i in range(0, len(points), size)]


def _device(pid: int, device: int, trace: list[dict[str, Any]], segments: list[Any],
            start_us: float) -> list[dict[str, Any]]:
    timed = [e for e in trace if isinstance(e, dict)
             and isinstance(e.get("time_us"), (int, float))]
    # allocated: what the history recorded, replayed as the Memory pane's peak is
    # (``cudasnap.peak_blocks``: from 0, a free counted when its block was seen allocated)
    live: dict[Any, int] = {}
    total, allocated = 0, []
    for e in timed:
        action, addr = e.get("action"), e.get("addr")
        if action == "alloc":
            live[addr] = int(e.get("size") or 0)
            total += live[addr]
        elif action == "free_completed" and addr in live:
            total -= live.pop(addr)
        else:
            continue
        allocated.append((float(e["time_us"]) - start_us, float(total)))
    # reserved: the segments at the end, less what the history changed
    mine = [x for x in segments if isinstance(x, dict) and x.get("device") == device]
    reserved_now = sum(int(x.get("total_size") or 0) for x in mine)
    changes = [(float(e["time_us"]) - start_us, int(e.get("size") or 0) * (
        1 if e.get("action") == "segment_alloc" else -1)) for e in timed
        if e.get("action") in ("segment_alloc", "segment_free")]
    level = reserved_now - sum(c for _, c in changes)
    reserved = []
    for ts, change in changes:
        level += change
        reserved.append((ts, float(level)))
    out: list[dict[str, Any]] = []
    for title, series in (("allocated", allocated), ("reserved", reserved)):
        out += [{"ph": "C", "pid": pid, "tid": 0, "ts": ts, "name":
                 f"GPU {device} {title} (B)", "args": {"value": v}} for ts, v in _thin(series)]
    peak, blocks = peak_blocks(timed)
    if peak is None or not blocks:
        return out
    at = next(ts for ts, v in allocated if v >= peak)
    held: dict[str, int] = {}
    for block in blocks:
        where = block_site(block.get("frames"))
        held[where] = held.get(where, 0) + int(block.get("size") or 0)
    top = sorted(held.items(), key=lambda kv: -kv[1])[:PEAK_LINES]
    tid = PEAK_TID + device
    out.append({"ph": "M", "name": "thread_name", "pid": pid, "tid": tid,
                "args": {"name": f"GPU {device} memory peaks"}})
    out.append({"ph": "X", "pid": pid, "tid": tid, "dur": 0.0, "cat": MARK, "ts": at,
                "name": f"peak allocated {fmt_bytes(peak)}: {top[0][0]} {fmt_bytes(top[0][1])}",
                "args": {"held": "; ".join(f"{w} {fmt_bytes(b)}" for w, b in top)}})
    return out


def cuda_memory_events(path: Path, pid: int, limit: int) -> list[dict[str, Any]]:
    """Each device's allocated and reserved memory over time as counters of process ``pid``,
    on the run's workload-start axis (µs), and its allocated peak as a slice naming what held
    it; ValueError where the file is not a snapshot."""
    data = load(path, limit)
    started = RunFolder(path.parent).started()
    traces = data["device_traces"]
    times = [e["time_us"] for t in traces if isinstance(t, list) for e in t
             if isinstance(e, dict) and isinstance(e.get("time_us"), (int, float))]
    start_us = started[1] / 1e3 if started else min(times, default=0.0)
    found = data.get("segments")
    segments: list[Any] = found if isinstance(found, list) else []
    out: list[dict[str, Any]] = []
    for device, trace in enumerate(traces):
        if isinstance(trace, list) and trace:
            out += _device(pid, device, trace, segments, start_us)
    return out + _categories(path.parent / MEMORY_SIDECAR, pid, start_us)


def _categories(sidecar: Path, pid: int, start_us: float) -> list[dict[str, Any]]:
    """torch's own peak in each profiled cycle (``--torch-memory``: its memory profile, which
    names each tensor's category), marked on the device's peak track with what each
    category held then: parameters, gradients, optimizer state, activations..."""
    try:
        cycles = json.loads(sidecar.read_text("utf-8")).get("cycles") or []
    except (OSError, ValueError, AttributeError):
        return []
    out: list[dict[str, Any]] = []
    for cycle in cycles:
        for name, device in ((cycle.get("devices") or {}) if isinstance(cycle, dict)
                             else {}).items():
            held = device.get("categories") if isinstance(device, dict) else None
            if not (str(name).startswith("cuda:") and isinstance(held, dict)
                    and isinstance(device.get("at_us"), (int, float))):
                continue
            index = int(str(name).split(":")[1] or 0)
            top = sorted(((str(k), int(v)) for k, v in held.items()
                          if isinstance(v, (int, float)) and v > 0), key=lambda kv: -kv[1])
            if not top:
                continue
            out.append({"ph": "X", "pid": pid, "tid": PEAK_TID + index, "dur": 0.0,
                        "cat": MARK, "ts": float(device["at_us"]) - start_us,
                        "name": f"torch's peak {fmt_bytes(sum(b for _, b in top))}: "
                        + ", ".join(f"{k.replace('_', ' ')} {fmt_bytes(b)}" for k, b in top[:3]),
                        "args": {"held": "; ".join(f"{k.replace('_', ' ')} {fmt_bytes(b)}"
                                                   for k, b in top)}})
    return out
