"""Steps made of many small ops: when the Python and dispatch between torch's ops outweigh
the work in them (``torch.small-ops``)."""

from __future__ import annotations

from perfstack.analysis.gpubound import gpu_bound
from perfstack.report import Finding, Layer, Report

#: Mean CPU time per op (s) below which ops are small enough for dispatch to dominate.
SMALL_OP_S = 20e-6
#: Ops per step from which their count, not their size, sets the step time.
MANY_OPS = 100
#: Mean CPU time per call (s) from which an op is heavy: its own work outweighs its fixed cost.
HEAVY_OP_S = 100e-6
#: How busy the device is (%, the GPU verdict's: of a step without the profiler where the
#: baseline says) from which the device, not the host's dispatch, bounds the step.
GPU_BUSY = 50.0


def _heavy_ops(report: Report, spent: float) -> tuple[list[str], float]:
    """Return the heavy ops (by self time, largest first, as 'name: calls x mean') and their
    share of the ops' self time: a mean over all ops hides a few big ones."""
    found: list[tuple[float, str]] = []
    for row in report.layers.get(Layer.FRAMEWORK, []):
        own, calls = row.values.get("self"), row.values.get("calls")
        if row.source != "torch" or own is None or calls is None or not calls.value \
                or own.value is None:
            continue
        mean = float(own.value) / float(calls.value)
        if mean >= HEAVY_OP_S:
            found.append((float(own.value), f"{row.name}: {calls.value:,.0f} x "
                                            f"{mean * 1e6:.0f} µs"))
    found.sort(reverse=True)
    share = sum(t for t, _ in found) / spent if spent else 0.0
    return [name for _, name in found], share


def small_ops(report: Report) -> list[Finding]:
    """Flag steps made of many small ops: the Python and dispatch overhead between them
    outweighs the work in them."""
    step = next((m for m in report.metrics if m.name == "torch_step_time"), None)
    calls = next((m for m in report.metrics if m.name == "torch_op_calls"), None)
    spent = next((m for m in report.metrics if m.name == "torch_ops_self_time"), None)
    if step is None or not step.samples or calls is None or spent is None \
            or not calls.value or spent.value is None:
        return []
    steps, step_total = len(step.samples), sum(step.samples)
    per_step = calls.value / steps
    mean_op = spent.value / calls.value
    in_ops = spent.value / step_total if step_total else 0.0
    if per_step < MANY_OPS or mean_op >= SMALL_OP_S:
        return []
    bound = gpu_bound(report)  # (busy of a step without the profiler, where a baseline says)
    if bound is not None and bound.busy >= GPU_BUSY:
        return []  # the device is the bound: fewer, fused ops would not make it faster
    heavy, heavy_share = _heavy_ops(report, float(spent.value))
    if heavy_share >= 0.5:
        return []  # the op time is in a few big ops (the mean hid them): fusing cannot help
    if in_ops < 0.5:
        # Most of the step is outside the ops: the Python issuing them is the bound.
        title = (f"Python-overhead-bound: {per_step:.0f} small ops per step take only "
                 f"{100 * in_ops:.0f}% of it")
        why = "the Python between the ops takes the rest"
    else:
        title = (f"many small ops: {per_step:.0f} per step averaging {mean_op * 1e6:.1f} µs "
                 "each, so per-op costs dominate")
        why = ("at a few µs per op, each op's fixed cost (dispatch, allocation, the profiler's "
               "record) is a large part of it")
    return [Finding(
        rule="torch.small-ops", title=title, layer="framework", severity="warning",
        evidence=[f"{calls.value:,.0f} op calls in {steps} profiled steps, "
                  f"{mean_op * 1e6:.1f} µs of CPU time each on average; their own CPU time "
                  f"is {100 * in_ops:.0f}% of the step time ({spent.value * 1e3:.1f} ms of "
                  f"{step_total * 1e3:.1f} ms, profiler overhead included): {why}",
                  f"ops of {HEAVY_OP_S * 1e6:.0f} µs or more take {100 * heavy_share:.0f}% of "
                  "the op time" + (": " + ", ".join(heavy[:3]) if heavy else "")],
        action=("fuse the small ops (torch.compile, vectorised formulations over a loop of "
                "ops), batch more work per call, or use CUDA graphs on a GPU"),
        source="torch")]
