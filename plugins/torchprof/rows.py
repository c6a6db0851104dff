"""Turning an aggregated torch trace into framework, kernel and Python rows and metrics."""

from __future__ import annotations

import bisect
import json
import statistics
from collections import defaultdict
from typing import Any

from perfstack.report import Better, Layer, Metric, Row

from .devicerows import device_part
from .modules import module_rows
from .opgroups import SOURCE, US, Group, OpGroups, q, top_links
from .steps import cpu_steps, in_order
from .syncs import HostWaits
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
    stub = closing_stub(steps, windows, [c[0] for c in ops.step_children], ops.numbers)
    notes = [f"{len(steps)} profiled steps" if steps else "no steps: the whole run was profiled"]
    if stub is not None:
        notes.append(f"a last step range of {stub * 1e3:.3f} ms, the profiler closing, is "
                     "not a step: left out")
    metrics: list[Metric] = []
    waits: HostWaits | None = None
    if agg.kernels:
        device = device_part(agg, trees, ops, windows)
        kernel_rows, waits = device.rows, device.waits
        metrics += device.metrics
        notes += device.notes
        steps = device.steps or steps
    else:
        kernel_rows = ops.native_rows()
        metrics += cpu_steps(windows, ops.step_children, in_order(windows, ops.numbers))
    framework = [_framework_row(key, g, bool(agg.kernels)) for key, g in groups.items()]
    if waits is not None:  # each synchronisation's op: how often, how long the host waited
        by_key = {r.key: r for r in framework}
        for key, (calls, blocked) in waits.by_op.items():
            if key in by_key:
                by_key[key].values["sync_calls"] = q(calls, "count")
                by_key[key].values["sync_time"] = q(blocked * US, "s")
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
                 op_starts: list[float] | None = None,
                 numbers: list[int | None] | None = None) -> float | None:
    """Drop, in place, the profiler's closing step range when there is one: the last range
    in time, under :data:`STUB_FRACTION` of the median of at least two others, and holding
    no op (``op_starts``: when each op directly under a step range started, µs; None where
    the trace does not say; ``numbers``, the ranges' step numbers, lose it too). Return its
    duration (s), or None. (On a loaded machine a real last step can be 20x quicker than its
    slowed first ones: its ops keep it a step.)"""
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
    if numbers is not None and len(numbers) == len(windows):
        del numbers[last]
    del windows[last]
    return steps.pop(last)


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
