"""Turning an aggregated torch trace into framework, kernel and Python rows and metrics."""

from __future__ import annotations

import bisect
import json
import statistics
from collections import defaultdict
from typing import Any

from perfstack.analysis.kernelnames import (
    LINK_DIRECTIONS,
    MATRIX_KINDS,
    copy_of,
    kernel_kind,
    tensor_cores,
)
from perfstack.report import Better, Layer, Metric, Quantity, Row

from ..demangle import demangle
from .collectives import collective_metrics
from .links import COMM_KERNEL, Linker
from .modules import module_rows
from .opgroups import SOURCE, US, Group, OpGroups, q, top_links
from .steps import cpu_steps, device_windows, gpu_steps, stream_metrics
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
from .trace import TraceAggregate, build_trees, without_gc


def summarize(agg: TraceAggregate, with_flops: bool = True, stepped: bool = True) -> tuple[
        dict[Layer, list[Row]], list[Metric], list[str]]:
    """Return rows by layer, metrics and notes for an aggregated trace.

    ``stepped`` says whether the workload marked steps; without them torch still wraps the
    run in one ``ProfilerStep#0`` range, which is not a step.
    """
    with without_gc():
        return _summarize(agg, with_flops, stepped)


def _summarize(agg: TraceAggregate, with_flops: bool, stepped: bool) -> tuple[
        dict[Layer, list[Row]], list[Metric], list[str]]:
    trees = build_trees(agg)
    ops = OpGroups(agg, with_flops, stepped, native=not agg.kernels)
    for tree in trees.values():
        ops.add(tree)
    groups, steps, windows = ops.groups, ops.steps, ops.windows
    stub = closing_stub(steps, windows, [c[0] for c in ops.step_children])
    notes = [f"{len(steps)} profiled steps" if steps else "no steps: the whole run was profiled"]
    if stub is not None:
        notes.append(f"a last step range of {stub * 1e3:.3f} ms, the profiler closing, is "
                     "not a step: left out")
    metrics: list[Metric] = []
    if agg.kernels:
        linker = Linker(agg, trees)
        kernel_rows, device_total, unattributed, events = _device_kernels(agg, linker, ops)
        metrics += [
            Metric("torch_device_time", device_total * US, "s", "kernel", SOURCE, Better.LOWER,
                   description="kernels, memcpy and memset summed (streams that overlap count "
                   "twice; gpu_busy is the union)"),
            Metric("torch_device_unattributed", unattributed * US, "s", "kernel", SOURCE,
                   Better.NEITHER, detail=True,
                   description="device time no op launched (before the trace window, or by "
                   "no op): in the kernel rows, in no op's device time"),
        ]
        counts = linker.counts
        notes.append(
            f"device events linked to the op that launched them: {counts['external id']:,} by "
            f"External id, {counts['runtime call']:,} through the runtime call, "
            f"{counts['none']:,} with no launching op (unattributed)")
        ran = device_windows(windows, events)
        if ran.windows:  # the steps as the device ran them: their work and its queue too
            start, end = ran.windows[0][0], ran.windows[-1][1]
            steps = [(b - a) * US for a, b in ran.windows]
        elif ops.first is not None and ops.last is not None:
            start, end = ops.first, ops.last
        else:
            start, end = min(e.ts for e in events), max(e.end for e in events)
        metrics += device_metrics(device_times(events, start, end),
                                  "the profiled steps'" if windows else "the profiled run's")
        metrics += gpu_steps(ran, events)
        metrics += collective_metrics(agg.kernels, start, end)
        metrics += stream_metrics(stream_times(events, start, end),
                                  "the profiled steps'" if windows else "the profiled run's")
    else:
        kernel_rows = ops.native_rows()
        metrics += cpu_steps(windows, ops.step_children)
    framework = [_framework_row(key, g, bool(agg.kernels)) for key, g in groups.items()]
    framework.sort(key=lambda r: -(r.values["self"].value or 0))
    rows = {Layer.FRAMEWORK: framework, Layer.KERNEL: kernel_rows,
            Layer.PYTHON: _python_rows(agg, ops.root_frames),
            Layer.MODULE: module_rows(agg, trees)}
    metrics[:0] = [
        Metric("torch_ops_self_time", sum(g.self_time for g in groups.values()) * US, "s",
               "framework", SOURCE, Better.LOWER, detail=True,
               description="the ops' own CPU time, summed over the profiled steps"),
        Metric("torch_op_calls", sum(g.calls for g in groups.values()), "count", "framework",
               SOURCE, Better.NEITHER, detail=True),
    ]
    if steps:
        metrics.insert(0, Metric(
            "torch_step_time", statistics.median(steps), "s", "framework", SOURCE,
            Better.LOWER, samples=steps, samples_of="steps",
            description=("each profiled step as the device ran it: from the end of the step "
                         "before to the later of the host's step range and the end of the "
                         "device work it launched (CUDA runs asynchronously: the host's range "
                         "alone is the time to queue the work)") if agg.kernels and windows
            else "each profiled step's range (ProfilerStep#N) on the main thread"))
    metrics += compiled_metrics(groups, steps, kernel_rows if agg.kernels else [])
    if agg.truncated:
        notes.append(f"trace cut short (the run ended while writing it): {agg.truncated}")
    if agg.nonfinite:
        notes.append(f"{agg.nonfinite} event(s) of the trace had a time or duration that is not "
                     "a number (NaN or Infinity): left out, the rest read")
    if agg.repaired:
        notes.append(f"{agg.repaired} event(s) of the trace were invalid JSON (a quote in a "
                     "name, which Kineto writes unescaped): read with the quote escaped")
    return rows, metrics, notes


#: torch.compile's ranges in a trace: a compiled graph's call (forward) and its backward.
COMPILED_REGION = "Torch-Compiled Region"
COMPILED_BACKWARD = "CompiledFunctionBackward"
#: inductor's generated kernels are named for the fused ops (triton_poi_fused_mul_0).
GENERATED = ("triton_", "cpp_fused_")


def compiled_metrics(groups: dict[str, Any], steps: list[float],
                     kernels: list[Row]) -> list[Metric]:
    """How much of the profiled steps ran inside torch.compile's graphs: the compiled
    regions' calls (forward) and compiled backwards, inclusive, over the steps' time; on a
    GPU, the generated (Triton) kernels' share of the device time. Nothing without them."""
    inside = sum(g.total for g in groups.values()
                 if g.name.startswith(COMPILED_REGION) or g.name == COMPILED_BACKWARD)
    out = []
    if inside and steps:
        out.append(Metric(
            "compiled_share", min(100.0, 100 * inside * US / sum(steps)), "%", "compile",
            SOURCE, Better.NEITHER,
            description="of the profiled steps' time inside torch.compile's graphs (their "
            "'Torch-Compiled Region' calls and compiled backwards, inclusive); the rest ran "
            "eagerly"))
    device = [(r.name, r.values.get("device")) for r in kernels]
    total = sum(float(q.value or 0.0) for _, q in device if q is not None)
    made = sum(float(q.value or 0.0) for name, q in device
               if q is not None and name.startswith(GENERATED))
    if made and total:
        out.append(Metric(
            "generated_kernels_share", 100 * made / total, "%", "compile", SOURCE,
            Better.NEITHER, description="of the device time in kernels inductor generated "
            "(triton_*), the rest in library kernels (cuBLAS, cuDNN) and eager ops"))
    return out


#: A last step range this much shorter than the median of the others is the profiler's own
#: closing range (torch opens one for the step in which the profiler stops), not a step.
STUB_FRACTION = 0.05


def closing_stub(steps: list[float], windows: list[tuple[float, float]],
                 op_starts: list[float] | None = None) -> float | None:
    """Drop, in place, the profiler's closing step range when there is one: the last range
    in time, under :data:`STUB_FRACTION` of the median of at least two others, and holding
    no op (``op_starts``: when each op directly under a step range started, µs; None where
    the trace does not say). Return its duration (s), or None. (On a loaded machine a real
    last step can be 20x quicker than its slowed first ones: its ops keep it a step.)"""
    if len(steps) < 3 or len(steps) != len(windows):
        return None
    last = max(range(len(windows)), key=lambda i: windows[i][0])
    others = steps[:last] + steps[last + 1:]
    if steps[last] >= STUB_FRACTION * statistics.median(others):
        return None
    if op_starts:
        starts = sorted(op_starts)
        at = bisect.bisect_left(starts, windows[last][0])
        if at < len(starts) and starts[at] <= windows[last][1]:
            return None  # it ran ops: a quick step, not the closing range
    del windows[last]
    return steps.pop(last)


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


def _framework_row(key: str, g: Group, has_device: bool) -> Row:
    values = {"calls": q(g.calls, "count"), "total": q(g.total * US, "s"),
              "self": q(g.self_time * US, "s")}
    if has_device:
        values["device"] = q(g.device * US, "s")
    if g.flops is not None:
        values["flops"] = q(g.flops, "flop")
    if g.bytes is not None:
        values["bytes"] = q(g.bytes, "B")
    if g.alloc:
        values["self_alloc"] = q(g.alloc, "B")
    attrs: dict[str, Any] = {"op": g.name}
    if g.dtype is not None:
        attrs["dtype"] = g.dtype
    if g.kind is not None:
        attrs["op_kind"] = g.kind
    if g.transfer:
        attrs["transfer"] = "host"  # it copied between host and device
    if g.nested and g.nested * 2 >= g.total:
        # its cost is counted in the op it ran inside (aten::native_layer_norm in
        # aten::layer_norm): a sum over ops leaves it out
        attrs["cost_in_caller"] = True
    if g.dims:
        attrs["input_dims"] = json.loads(g.dims)
    links = {"python": top_links(g.callers)} if g.callers else {}
    return Row(key, key, SOURCE, values, attrs, links)


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


def _python_rows(agg: TraceAggregate, root_frames: dict[str, int]) -> list[Row]:
    """User-code Python functions seen by the profiler's stack tracer (with_stack only)."""
    if not agg.frames:
        return []
    per: dict[str, dict[str, float]] = defaultdict(lambda: {"calls": 0, "total": 0.0, "ops": 0})
    keys = agg.frame_keys
    for frames in agg.frames.values():
        for ts, end, fid in zip(frames.ts, frames.end, frames.key, strict=True):
            entry = per[keys[fid]]
            entry["calls"] += 1
            entry["total"] += end - ts
    for key, count in root_frames.items():
        per[key]["ops"] += count
    rows = []
    for key, e in per.items():
        func, _, where = key.partition(" (")
        file, _, line = where.rstrip(")").rpartition(":")
        rows.append(Row(key, key, SOURCE, {
            "calls": q(e["calls"], "count"), "total": q(e["total"] * US, "s"),
            "ops_called": q(e["ops"], "count")},
            {"function": func, "file": file, "line": int(line) if line.isdigit() else None,
             "time": "inclusive, as torch's stack tracer saw it"}))
    rows.sort(key=lambda r: -(r.values["total"].value or 0))
    return rows
