"""The words of the device's views, defined once for every renderer: the device's time, the
kernels, each stream's idle time, the steps by phase, and how close the ops ran to the
machine (the roofline). ``perfstack.render.words.common`` holds the rest of the report's words.
"""

from __future__ import annotations

from perfstack.analysis.stats import median
from perfstack.analysis.views.device import DeviceTime
from perfstack.analysis.views.kernels import KernelView, short_name
from perfstack.analysis.views.roofline import RoofOp, RoofView
from perfstack.analysis.views.steps import Outlier, Phase, StepView
from perfstack.analysis.views.streams import FIGURES, StreamView
from perfstack.report.units import fmt_seconds, fmt_si, fmt_value, pct, pct_fine

#: The device breakdown's parts in words.
DEVICE_WORDS = {
    "compute": "compute kernels",
    "communication": "collectives not hidden behind compute",
    "memory": "memcpy and memset alone",
    "idle": "idle: no kernel, no copy",
    "host_wait": "waiting for the host to launch",
}


def device_title(d: DeviceTime) -> str:
    """'Device time: busy 24% of the profiled steps (torch)'."""
    busy = f"busy {pct(d.busy)} of {d.window}" if d.busy is not None else d.window
    return f"Device time: {busy} ({d.source})"


def device_answer(d: DeviceTime) -> str:
    """The headline of a report whose only time budget is the device's."""
    parts = {p.part: p.share for p in d.parts}
    idle = parts.get("idle")
    wait = parts.get("host_wait")
    busy = pct(d.busy) if d.busy is not None else "?"
    tail = ""
    if idle is not None:
        tail = f"; idle {pct(idle)}" + (f" ({pct(wait)} waiting for the host to launch)"
                                         if wait is not None else "")
    return f"The GPU is busy {busy} of {d.window}{tail} ({d.source})."


def device_notes(d: DeviceTime) -> list[str]:
    """The figures under the device breakdown: collectives hidden, launch queue."""
    out = []
    if d.comm_overlap is not None:
        out.append(f"collectives hidden behind compute: {pct(d.comm_overlap)} of their time")
    if d.launch_delay_s is not None:
        out.append(f"launch call to start on the device: median {fmt_seconds(d.launch_delay_s)}")
    return out


def kernels_title(k: KernelView) -> str:
    """The kernel view's heading: how many kernels, their summed device time."""
    return (f"Kernels: {k.count} distinct, {fmt_seconds(k.total_s)} on the device "
            "(shares of kernel time)")


def tensor_core_line(k: KernelView) -> str | None:
    """'tensor cores ran 78% of the GEMM, convolution and attention kernel time' (None
    without such kernels), with the part on the CUDA cores and the part the names do not
    tell."""
    if k.matrix_s <= 0:
        return None
    line = (f"tensor cores ran {pct(100 * k.tensor_core_s / k.matrix_s)} of the GEMM, "
            "convolution and attention kernel time")
    unknown = max(k.matrix_s - k.tensor_core_s - k.cuda_core_s, 0.0)
    rest = []
    if k.cuda_core_s > 0:
        rest.append(f"CUDA cores {pct(100 * k.cuda_core_s / k.matrix_s)}")
    if unknown > 1e-4 * k.matrix_s:
        rest.append(f"not told by the name {pct(100 * unknown / k.matrix_s)}")
    return line + (f" ({', '.join(rest)})" if rest else " (from the kernels' names)")


def kernel_kind_cells(k: KernelView) -> list[list[str]]:
    """One row per kind of kernel: kind, share, time, distinct kernels."""
    return [[kind.kind, pct(100 * kind.share), fmt_seconds(kind.time_s), f"{kind.kernels:,}"]
            for kind in k.kinds]


def kernel_cells(k: KernelView) -> list[list[str]]:
    """One row per top kernel: short name, kind, share, calls, mean time."""
    return [[short_name(t.name), t.kind, pct(100 * t.share),
             f"{t.calls:,}" if t.calls is not None else "n/a",
             fmt_seconds(t.mean_s) if t.mean_s is not None else "n/a"] for t in k.top]


#: How each roof's source is said.
ROOF_SOURCES = {"measured": "measured here", "datasheet": "datasheet"}


def roof_title(v: RoofView) -> str:
    """The roofline section's heading: the step's share of the machine's peak (the ceiling
    line below names the machine)."""
    if v.peak_share is None:
        return "How close to the machine: unknown"
    return f"How close to the machine: the ops ran at {pct_fine(v.peak_share)} of its peak"


def roof_ceiling_line(v: RoofView) -> str:
    """What the ops are measured against: each type's peak, the bandwidth, and whence."""
    c = v.ceilings
    order = ("fp32", "tf32", "bf16", "fp16", "fp64", "int8")
    peaks = " · ".join(f"{t} {fmt_si(c.peak_flops[t], 'flop/s')}" for t in order
                       if t in c.peak_flops)
    memory = f" · memory {fmt_si(c.bandwidth, 'B/s')}" if c.bandwidth else ""
    source = ROOF_SOURCES.get(c.source, c.source)
    if c.source == "datasheet" and c.how.get("source"):
        source = str(c.how["source"])
    threads = f", {c.threads} threads" if c.threads and c.device == "cpu" else ""
    slower = [t for t in order if t in ("bf16", "fp16") and t in c.peak_flops
              and "fp32" in c.peak_flops and c.peak_flops[t] < c.peak_flops["fp32"]]
    emulated = (f" ({' and '.join(slower)} slower than fp32: no native support)"
                if slower and c.device == "cpu" else "")
    sheet = c.how.get("datasheet")
    beside = ""
    if c.source == "measured" and isinstance(sheet, dict):  # a GPU's: its datasheet beside
        fp32 = (sheet.get("peak_flops") or {}).get("fp32")
        beside = (f"; datasheet ({sheet.get('model')}): fp32 "
                  f"{fmt_si(fp32, 'flop/s') if fp32 else '?'} · memory "
                  f"{fmt_si(sheet.get('bandwidth') or 0, 'B/s')}")
    where = "this CPU" if c.device == "cpu" else (c.name or "the GPU")
    return f"ceilings of {where}, {source}{threads}: {peaks}{memory}{emulated}{beside}"


def roof_summary(v: RoofView) -> str:
    """Where the costed op time is bound, and how much of the op time has a cost."""
    if v.why is not None:
        return v.why
    parts = []
    if v.memory_share is not None:
        parts.append(f"{pct(v.memory_share)} memory-bound")
    if v.latency_share is not None:
        parts.append(f"{pct(v.latency_share)} in calls too small for either roof")
    covered = (f" (the ops with a known cost hold {pct(v.coverage)} of the op time)"
               if v.coverage is not None else "")
    return f"of the costed op time: {', '.join(parts)}{covered}"


def roof_rate(o: RoofOp) -> str:
    """What an op achieved: FLOP/s where it computes, else bytes/s."""
    if o.flop_s:
        return fmt_si(o.flop_s, "flop/s")
    if o.byte_s is not None:
        return fmt_si(o.byte_s, "B/s")
    return "n/a"


def roof_cells(v: RoofView) -> list[list[str]]:
    """One row per heaviest op: name, time, share, achieved, roof share, bound, type."""
    return [[o.name, fmt_seconds(o.seconds), pct(100 * o.time_share), roof_rate(o),
             pct_fine(o.roof_share) if o.roof_share is not None else "n/a", o.bound,
             o.dtype or "-"] for o in v.top]


#: The CPU's step phases in words (the GPU's are DEVICE_WORDS).
STEP_WORDS = {"data": "data loading (DataLoader)", "compile": "torch.compile compiling",
              "eval": "evaluation (validation)", "ops": "torch ops",
              "other": "Python between ops, waiting"}


def phase_words(name: str) -> str:
    """A step phase as people read it."""
    return STEP_WORDS.get(name) or DEVICE_WORDS.get(name, name)


def steps_title(v: StepView) -> str:
    """'Steps: 5 profiled steps, median 216 ms, by phase on the device (torch)'."""
    where = "on the device" if v.device == "gpu" else "on the main thread"
    count = len(v.totals)
    return (f"Steps: {count} profiled step{'s' if count != 1 else ''}, median "
            f"{fmt_seconds(v.median)}, by phase {where} ({v.source})")


def step_sides_line(v: StepView) -> str | None:
    """'the host's step 2.68 ms (to queue its work), the device's work 38.4 ms: the device
    bounds the step' (None without both figures)."""
    if not v.host or not v.device_work or v.bound is None:
        return None
    host, device = median(v.host), median(v.device_work)
    phase = next((p for p in v.phases if p.name == "idle"), None)
    idle = (v.share(phase) or 0.0) if phase is not None else 0.0
    why = {"device": "the device bounds the step",
           "host": f"the host bounds the step (the device idles {pct(max(idle, 0.0))} of it, "
                   "waiting for launches)",
           "waits": f"the device idles {pct(max(idle, 0.0))} of the step with its work "
                    "launched (synchronisations, other streams or ranks)"}[v.bound]
    ahead = (", the host queued it ahead" if host < 0.5 * v.median else "")
    return (f"the host's step {fmt_seconds(host)} (its ProfilerStep range), the device's "
            f"own work {fmt_seconds(device)} a step: {why}{ahead}")


def step_cells(v: StepView) -> list[list[str]]:
    """One row per phase: name, its median over the steps, its share of all the steps' time
    (the phases add up to 100%), the fastest and slowest step's."""
    def share(p: Phase) -> str:
        value = v.share(p)
        return pct(value) if value is not None else "n/a"

    return [[("└ " if p.within else "") + phase_words(p.name), fmt_seconds(p.median),
             share(p), fmt_seconds(min(p.seconds)), fmt_seconds(max(p.seconds))]
            for p in v.phases]


def outlier_line(o: Outlier) -> str:
    """'step 3 took 1.9x the median step (412 ms): idle +196 ms'."""
    return (f"step {o.step} took {o.ratio:.1f}x the median step ({fmt_seconds(o.seconds)}): "
            f"{phase_words(o.phase)} +{fmt_seconds(o.extra)}")


#: The streams table's columns, for each figure.
STREAM_COLUMNS = ("busy", "idle: host", "other streams", "nothing ran", "queue", "deepest")


def streams_title(v: StreamView) -> str:
    """'Streams: busy, and why each idled, over the profiled steps' wall time (torch)'."""
    return f"Streams: busy, and why each idled, over {v.window} ({v.source})"


def stream_cells(v: StreamView) -> list[list[str]]:
    """One row per stream: busy and idle shares, the mean and deepest launch queue."""
    out = []
    for row in v.rows:
        cells = [row.stream]
        for figure in FIGURES:
            value = row.figures.get(figure)
            if value is None:
                cells.append("-")
            elif figure in ("gpu_queue_depth", "gpu_queue_depth_max"):
                cells.append(fmt_value(value, "count"))  # (as its metric is shown)
            else:
                cells.append(pct(value))
        out.append(cells)
    return out
