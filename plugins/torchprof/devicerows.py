"""The device's part of a GPU trace: kernel rows (with the ops that launched them and their
cost), the device's time over the profiled steps as it ran them, the steps by phase, the
synchronisations and host copies, collectives and streams."""

from __future__ import annotations

from collections import defaultdict
from typing import Any

from perfstack.analysis.kernelnames import (
    LINK_DIRECTIONS,
    MATRIX_KINDS,
    copy_of,
    kernel_kind,
    tensor_cores,
)
from perfstack.records import datarecord, field
from perfstack.report import Better, Metric, Quantity, Row

from ..demangle import demangle
from .collectives import collective_metrics
from .links import COMM_KERNEL, Linker
from .opgroups import SOURCE, US, Group, OpGroups, q, top_links
from .optree import Tree
from .steps import device_windows, gpu_steps, in_order, stream_metrics
from .syncs import HostWaits, host_waits, wait_metrics
from .timeline import (
    COMMUNICATION,
    COMPUTE,
    MEMORY,
    DeviceEvent,
    DeviceTime,
    device_times,
    percentile,
    stream_times,
)
from .trace import TraceAggregate


@datarecord
class DevicePart:
    """What the device side of a trace gives the report."""

    rows: list[Row]
    metrics: list[Metric]
    notes: list[str]
    #: each profiled step as the device ran it, seconds (empty without steps)
    steps: list[float] = field(default_factory=list)
    waits: HostWaits | None = None


def device_part(agg: TraceAggregate, trees: dict[str, Tree], ops: OpGroups,
                windows: list[tuple[float, float]]) -> DevicePart:
    """The kernel layer and the device's figures of a trace with device events; ``windows``
    are the host's profiled step ranges (µs)."""
    linker = Linker(agg, trees)
    rows, device_total, unattributed, events = _device_kernels(agg, linker, ops)
    metrics = [
        Metric("torch_device_time", device_total * US, "s", "kernel", SOURCE, Better.LOWER,
               description="kernels, memcpy and memset summed (streams that overlap count "
               "twice; gpu_busy is the union)"),
        Metric("torch_device_unattributed", unattributed * US, "s", "kernel", SOURCE,
               Better.NEITHER, detail=True,
               description="device time no op launched (before the trace window, or by "
               "no op): in the kernel rows, in no op's device time"),
    ]
    counts = linker.counts
    notes = [f"device events linked to the op that launched them: {counts['external id']:,} by "
             f"External id, {counts['runtime call']:,} through the runtime call, "
             f"{counts['none']:,} with no launching op (unattributed)"]
    ran = device_windows(windows, events, in_order(windows, ops.numbers))
    steps: list[float] = []
    if ran.windows:  # the steps as the device ran them: their work and its queue too
        start, end = ran.windows[0][0], ran.windows[-1][1]
        steps = [(b - a) * US for a, b in ran.windows]
    elif ops.first is not None and ops.last is not None:
        start, end = ops.first, ops.last
    else:
        start, end = min(e.ts for e in events), max(e.end for e in events)
    window = "the profiled steps'" if windows else "the profiled run's"
    metrics += device_metrics(device_times(events, start, end), window)
    metrics += gpu_steps(ran, events)
    waits = host_waits(agg, trees, ops, windows, ran.windows)
    metrics += wait_metrics(waits)
    metrics += collective_metrics(agg.kernels, start, end)
    metrics += stream_metrics(stream_times(events, start, end), window)
    return DevicePart(rows, metrics, notes, steps, waits)


def _stream_order(item: tuple[Any, float]) -> tuple[int, str]:
    stream = item[0]
    return (0, f"{stream:012d}") if isinstance(stream, int) else (1, str(stream))


def device_metrics(times: list[DeviceTime], window: str) -> list[Metric]:
    """The device's busy share and temporal breakdown, as metrics (one device: plain names;
    several: the mean, and each device's busy share as ``gpu_busy[deviceN]``)."""
    if not times:
        return []
    span = sum(t.window for t in times)

    def share(part: float) -> float:
        return 100 * part / span if span > 0 else 0.0

    busy = share(sum(t.busy for t in times))
    out = [Metric("gpu_busy", busy, "%", "kernel", SOURCE, Better.HIGHER,
                  description=f"the union of kernels, memcpy and memset over {window} wall "
                  "time")]
    if len(times) > 1:
        out += [Metric(f"gpu_busy[device{t.device}]", 100 * t.busy / t.window, "%", "kernel",
                       SOURCE, Better.HIGHER, detail=True) for t in times if t.window > 0]
    for t in times:  # each stream's own union, when streams run side by side
        if len(t.streams) > 1 and t.window > 0:
            where = f"device{t.device}." if len(times) > 1 else ""
            out += [Metric(f"gpu_stream_busy[{where}stream{stream}]", 100 * busy_us / t.window,
                           "%", "kernel", SOURCE, Better.NEITHER, detail=True,
                           description=f"the union of this stream's kernels and copies over "
                           f"{window} wall time")
                     for stream, busy_us in sorted(t.streams.items(), key=_stream_order)]
    parts = (("compute", "compute kernels"),
             ("communication", "collective kernels not hidden behind compute"),
             ("memory", "memcpy and memset under no kernel"),
             ("idle", "no kernel, memcpy or memset"))
    for part, what in parts:
        out.append(Metric(f"gpu_time.{part}", share(sum(getattr(t, part) for t in times)), "%",
                          "kernel", SOURCE, Better.NEITHER, detail=True,
                          description=f"{what}, share of {window} wall time on the device"))
    out.append(Metric("gpu_idle.host_wait", share(sum(t.host_wait for t in times)), "%",
                      "kernel", SOURCE, Better.LOWER, detail=True,
                      description="idle before the next launch call was made: the device "
                      "waited for the host"))
    comm = sum(t.comm_total for t in times)
    if comm > 0:
        out.append(Metric("gpu_comm_overlap", 100 * sum(t.comm_overlapped for t in times) / comm,
                          "%", "kernel", SOURCE, Better.HIGHER, detail=True,
                          description="share of collective time hidden behind compute"))
        out.append(Metric("gpu_comm_time", comm * US, "s", "kernel", SOURCE, Better.LOWER,
                          detail=True, description="collective kernels' union on the device, "
                          "waiting for the other ranks included"))
    delays = [d for t in times for d in t.launch_delays]
    if delays:
        out.append(Metric("gpu_launch_delay", percentile(delays, 50) * US, "s", "kernel", SOURCE,
                          Better.NEITHER, detail=True,
                          description=f"median time from a launch call to the start on the "
                          f"device (95th percentile {percentile(delays, 95) * 1e3 * US:.3g} "
                          "ms)"))
    return out


def _kind(cat: str, name: str) -> str:
    if cat != "kernel":
        return MEMORY
    return COMMUNICATION if COMM_KERNEL.search(name) else COMPUTE


def _device_kernels(agg: TraceAggregate, linker: Linker, ops: OpGroups) -> tuple[
        list[Row], float, float, list[DeviceEvent]]:
    """Kernel rows, the device time, the unattributed part of it, and the device timeline."""
    per_kernel: dict[str, dict[str, Any]] = {}
    total = unattributed = 0.0
    events: list[DeviceEvent] = []
    for k in agg.kernels:
        found = linker.launcher(k)
        call = agg.runtime.get(k.correlation)
        events.append(DeviceEvent(k.ts, k.ts + k.dur, _kind(k.cat, k.name), k.device, k.stream,
                                  call.ts if call is not None else None))
        entry = per_kernel.setdefault(k.name, {"calls": 0, "time": 0.0, "cat": k.cat,
                                               "devices": set(), "ops": defaultdict(float),
                                               "none": 0.0, "bytes": 0})
        entry["calls"] += 1
        if entry["bytes"] is not None:  # a copy's bytes, where every one of them says
            entry["bytes"] = None if k.nbytes is None else entry["bytes"] + k.nbytes
        entry["time"] += k.dur
        entry["devices"].add(k.device)
        total += k.dur
        if found is None:
            entry["none"] += k.dur
            unattributed += k.dur
            continue
        tree, op = found
        entry["ops"][ops.group(tree, op).key] += k.dur
        for above in tree.ancestors(op):  # device time counts for the op and every op above
            ops.group(tree, above).device += k.dur
    rows = []
    # A kernel the trace names mangled (CUTLASS inside cuDNN) is shown by its C++ name; its
    # key stays the trace's, so reports before and after compare row for row.
    readable = demangle(list(per_kernel), params=True) or {}
    launched: dict[str, float] = defaultdict(float)  # op -> the kernel time it launched itself
    for e in per_kernel.values():
        for op, t in e["ops"].items():
            launched[op] += t
    for name, e in per_kernel.items():
        values = {"calls": q(e["calls"], "count"), "device": q(e["time"] * US, "s"),
                  "mean": q(e["time"] / e["calls"] * US, "s")}
        if e["none"]:
            values["unattributed"] = q(e["none"] * US, "s")
        attrs = {"kind": e["cat"], "devices": sorted(str(d) for d in e["devices"])}
        copy = copy_of(name) if e["cat"] == "gpu_memcpy" else None
        if copy is not None and copy[0] in LINK_DIRECTIONS:
            for op in e["ops"]:  # its launching ops' time is the link's, not the memory's
                ops.groups[op].transfer = True
        elif not e["none"]:
            attrs.update(_kernel_cost(values, e["ops"], launched, ops.groups))
        if copy is not None:
            attrs["copy"] = {"direction": copy[0], **({"host": copy[1]} if copy[1] else {})}
            if e["bytes"] is not None:
                values["bytes"] = q(e["bytes"], "B")
        said = readable.get(name, name)  # a mangled name's C++ name tells more
        if e["cat"] == "kernel" and kernel_kind(said) in MATRIX_KINDS:
            cores = tensor_cores(said)
            if cores is not None:
                attrs["tensor_cores"] = cores
        rows.append(Row(name, readable.get(name, name), SOURCE, values, attrs,
                        {"framework": top_links(e["ops"])} if e["ops"] else {}))
    rows.sort(key=lambda r: -(r.values["device"].value or 0))
    return rows, total, unattributed, events


def _kernel_cost(values: dict[str, Quantity], by_op: dict[str, float],
                 launched: dict[str, float], groups: dict[str, Group]) -> dict[str, Any]:
    """Give a kernel the FLOPs and bytes of the ops that launched it, each op's shared among
    the kernels it launched by their device time; return the attributes that say how."""
    flops = moved = 0.0
    has_flops = has_bytes = True
    dtypes = set()
    kinds = set()
    shared = False
    for op, t in by_op.items():
        g = groups.get(op)
        if g is None or not launched[op]:
            return {}
        part = t / launched[op]
        shared = shared or part < 0.999
        has_flops = has_flops and g.flops is not None
        has_bytes = has_bytes and g.bytes is not None
        flops += (g.flops or 0) * part
        moved += (g.bytes or 0) * part
        if g.dtype is not None:
            dtypes.add(g.dtype)
        kinds.add(g.kind)
    if has_flops:
        values["flops"] = q(round(flops), "flop")
    if has_bytes:
        values["bytes"] = q(round(moved), "B")
    attrs: dict[str, Any] = {}
    if (has_flops or has_bytes) and len(dtypes) == 1:
        attrs["dtype"] = dtypes.pop()
    if (has_flops or has_bytes) and len(kinds) == 1 and None not in kinds:
        attrs["op_kind"] = kinds.pop()
    if shared and (has_flops or has_bytes):
        # an op that launched several kernels: each gets its share by time, the op's average
        attrs["cost_shared"] = True
    return attrs
