"""Turning an aggregated torch trace into framework, kernel and Python rows and metrics."""

from __future__ import annotations

import json
from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any

from perfstack.report import Better, Layer, Metric, Quantity, Row

from .flops import flops
from .trace import STEP_PREFIX, Op, TraceAggregate, build_trees

SOURCE = "torch"
US = 1e-6  # the trace's unit is the microsecond
MAX_LINKS = 5


@dataclass
class _Group:
    name: str = ""
    dims: str = ""
    calls: int = 0
    total: float = 0.0
    self_time: float = 0.0
    device: float = 0.0
    flops: int | None = None
    alloc: float = 0.0
    callers: dict[str, float] = field(default_factory=lambda: defaultdict(float))
    children_of: dict[str, float] = field(default_factory=lambda: defaultdict(float))


def op_key(op: Op) -> str:
    """Return the framework row key: the op name and its input shapes."""
    return f"{op.name} {op.dims}" if op.dims else op.name


def _survivor(op: Op) -> Op:
    while not op.name and op.parent is not None:
        op = op.parent
    return op


def _top_links(weights: dict[str, float]) -> list[str]:
    return [k for k, _ in sorted(weights.items(), key=lambda kv: -kv[1])[:MAX_LINKS]]


def _q(value: float, unit: str) -> Quantity:
    return Quantity(value, unit)


def summarize(agg: TraceAggregate, with_flops: bool = True, stepped: bool = True) -> tuple[
        dict[Layer, list[Row]], list[Metric], list[str]]:
    """Return rows by layer, metrics and notes for an aggregated trace.

    ``stepped`` says whether the workload marked steps; without them torch still wraps the
    run in one ``ProfilerStep#0`` range, which is not a step.
    """
    ops = build_trees(agg)
    by_ext: dict[Any, Op] = {}
    for tid_ops in agg.ops.values():
        for op in tid_ops:
            if op.ext is not None:
                by_ext.setdefault(op.ext, _survivor(op))
    groups: dict[str, _Group] = defaultdict(_Group)
    steps: list[float] = []
    for op in ops:
        if op.name.startswith(STEP_PREFIX):
            if stepped:
                steps.append(op.dur * US)
            continue
        g = groups[op_key(op)]
        g.name, g.dims = op.name, op.dims
        g.calls += 1
        g.total += op.dur
        g.self_time += op.dur - sum(c.dur for c in op.children)
        g.alloc += op.self_alloc
        if with_flops:
            count = flops(op.name, json.loads(op.dims) if op.dims else [], op.inputs)
            if count is not None:
                g.flops = (g.flops or 0) + count
        if op.user_frame is not None:
            g.callers[op.user_frame] += op.dur
    kernel_rows, device_total = _device_kernels(agg, by_ext, groups)
    if not agg.kernels:
        kernel_rows = _cpu_native_time(ops)
    framework = [_framework_row(key, g, bool(agg.kernels)) for key, g in groups.items()]
    framework.sort(key=lambda r: -(r.values["self"].value or 0))
    rows = {Layer.FRAMEWORK: framework, Layer.KERNEL: kernel_rows,
            Layer.PYTHON: _python_rows(agg, ops)}
    metrics = [
        Metric("torch_ops_self_time", sum(g.self_time for g in groups.values()) * US, "s",
               "framework", SOURCE, Better.LOWER, detail=True,
               description="the ops' own CPU time, summed over the profiled steps"),
        Metric("torch_op_calls", sum(g.calls for g in groups.values()), "count", "framework",
               SOURCE, Better.NEITHER, detail=True),
    ]
    if steps:
        ordered = sorted(steps)
        metrics.insert(0, Metric("torch_step_time", ordered[len(ordered) // 2], "s", "framework",
                                 SOURCE, Better.LOWER, samples=steps, samples_of="steps"))
    if agg.kernels:
        metrics.append(Metric("torch_device_time", device_total * US, "s", "kernel", SOURCE,
                              Better.LOWER))
        if steps:
            # Kernel time over the profiled steps' wall time: how busy the device kept.
            busy = min(100.0, 100 * device_total * US / sum(steps))
            metrics.append(Metric("budget.gpu_kernels", busy, "%", "kernel", SOURCE,
                                  Better.NEITHER))
    notes = [f"{len(steps)} profiled steps" if steps else "no steps: the whole run was profiled"]
    if agg.truncated:
        notes.append(f"trace cut short (the run ended while writing it): {agg.truncated}")
    return rows, metrics, notes


def _framework_row(key: str, g: _Group, has_device: bool) -> Row:
    values = {"calls": _q(g.calls, "count"), "total": _q(g.total * US, "s"),
              "self": _q(g.self_time * US, "s")}
    if has_device:
        values["device"] = _q(g.device * US, "s")
    if g.flops is not None:
        values["flops"] = _q(g.flops, "flop")
    if g.alloc:
        values["self_alloc"] = _q(g.alloc, "B")
    attrs: dict[str, Any] = {"op": g.name}
    if g.dims:
        attrs["input_dims"] = json.loads(g.dims)
    links = {"python": _top_links(g.callers)} if g.callers else {}
    return Row(key, key, SOURCE, values, attrs, links)


def _device_kernels(agg: TraceAggregate, by_ext: dict[Any, Op],
                    groups: dict[str, _Group]) -> tuple[list[Row], float]:
    per_kernel: dict[str, dict[str, Any]] = {}
    total = 0.0
    for k in agg.kernels:
        ext = k.ext if k.ext is not None else agg.runtime_ext.get(k.correlation)
        op = by_ext.get(ext)
        entry = per_kernel.setdefault(k.name, {"calls": 0, "time": 0.0, "cat": k.cat,
                                               "devices": set(), "ops": defaultdict(float)})
        entry["calls"] += 1
        entry["time"] += k.dur
        entry["devices"].add(k.device)
        total += k.dur
        if op is not None:
            key = op_key(op)
            entry["ops"][key] += k.dur
            while op is not None:  # device time counts for the op and every op above it
                if op.name and not op.name.startswith(STEP_PREFIX):
                    groups[op_key(op)].device += k.dur
                op = op.parent
    rows = [
        Row(name, name, SOURCE,
            {"calls": _q(e["calls"], "count"), "device": _q(e["time"] * US, "s"),
             "mean": _q(e["time"] / e["calls"] * US, "s")},
            {"kind": e["cat"], "devices": sorted(str(d) for d in e["devices"])},
            {"framework": _top_links(e["ops"])} if e["ops"] else {})
        for name, e in per_kernel.items()
    ]
    rows.sort(key=lambda r: -(r.values["device"].value or 0))
    return rows, total


def _cpu_native_time(ops: list[Op]) -> list[Row]:
    """On a CPU the trace has no kernels: each op's self time is its own native code."""
    per: dict[str, dict[str, Any]] = {}
    for op in ops:
        if "::" not in op.name:  # record_function ranges run no native code of their own
            continue
        own = op.dur - sum(c.dur for c in op.children)
        root = op
        while root.parent is not None and not root.parent.name.startswith(STEP_PREFIX):
            root = root.parent
        entry = per.setdefault(op.name, {"calls": 0, "self": 0.0, "roots": defaultdict(float)})
        entry["calls"] += 1
        entry["self"] += own
        if root is not op:
            entry["roots"][op_key(root)] += own
    rows = [
        Row(name, name, SOURCE, {"calls": _q(e["calls"], "count"), "self": _q(e["self"] * US, "s")},
            {"kind": "cpu-op-native", "meaning": "time in the op's own code, outside child ops"},
            {"framework": _top_links(e["roots"])} if e["roots"] else {})
        for name, e in per.items()
    ]
    rows.sort(key=lambda r: -(r.values["self"].value or 0))
    return rows


def _python_rows(agg: TraceAggregate, ops: list[Op]) -> list[Row]:
    """User-code Python functions seen by the profiler's stack tracer (with_stack only)."""
    if not agg.frames:
        return []
    per: dict[str, dict[str, float]] = defaultdict(lambda: {"calls": 0, "total": 0.0, "ops": 0})
    for frames in agg.frames.values():
        for f in frames:
            per[f.key]["calls"] += 1
            per[f.key]["total"] += f.end - f.ts
    for op in ops:
        if op.user_frame is not None and op.parent is None:
            per[op.user_frame]["ops"] += 1
    rows = []
    for key, e in per.items():
        func, _, where = key.partition(" (")
        file, _, line = where.rstrip(")").rpartition(":")
        rows.append(Row(key, key, SOURCE, {
            "calls": _q(e["calls"], "count"), "total": _q(e["total"] * US, "s"),
            "ops_called": _q(e["ops"], "count")},
            {"function": func, "file": file, "line": int(line) if line.isdigit() else None,
             "time": "inclusive, as torch's stack tracer saw it"}))
    rows.sort(key=lambda r: -(r.values["total"].value or 0))
    return rows
