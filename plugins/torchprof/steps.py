"""Each profiled step split into its phases, as metrics whose samples are the steps; and each
stream's idle time by cause and its launch queue (``stream_metrics``).

On a GPU, the device's time in each step's window (``timeline.device_times``): compute,
communication not hidden behind compute, memcpy/memset alone, and idle, with the idle time the
device waited for the host to launch; summed over the devices in the trace, divided by their
count. On a CPU, the main thread's step split into the DataLoader's ranges (data loading), the
other ops directly under the step, and the rest (Python between the ops, and waiting).
Each metric's value is the phase's median over the profiled steps (the phases' medians need
not add up to the median step); ``samples`` are the steps in order, so a step outlier can be
named by its number and a phase's share of all the steps' time summed.
"""

from __future__ import annotations

import bisect
import statistics
from collections.abc import Sequence

from perfstack.report import Better, Metric

from .timeline import DeviceEvent, StreamTime, device_times

SOURCE = "torch"
US = 1e-6

GPU_PHASES = (("compute", "compute kernels"),
              ("communication", "collective kernels not hidden behind compute"),
              ("memory", "memcpy and memset under no kernel"),
              ("idle", "no kernel, memcpy or memset on the device"),
              ("host_wait", "idle before the next launch call was made (within idle)"))
CPU_PHASES = (("data", "the DataLoader yielding the batch (enumerate(DataLoader) ranges)"),
              ("compile", "torch.compile compiling in the step (dynamo's timed ranges): a "
                          "first call or a recompile"),
              ("ops", "torch ops at the top of the step (an optimizer's step and the ops run "
                      "in it included), data loading apart"),
              ("other", "the rest of the step: Python between the ops, and waiting"))


def _metric(name: str, samples: list[float], what: str) -> Metric:
    return Metric(name, statistics.median(samples), "s", "framework", SOURCE,
                  Better.NEITHER, samples=samples, samples_of="steps", detail=True,
                  description=f"{what}, per profiled step (its median over the steps; the "
                  "samples are the steps in order)")


def gpu_steps(windows: Sequence[tuple[float, float]],
              events: Sequence[DeviceEvent]) -> list[Metric]:
    """Each step's device time by phase, in seconds."""
    if not windows or not events:
        return []
    per: dict[str, list[float]] = {part: [] for part, _ in GPU_PHASES}
    for start, end in sorted(windows):
        times = device_times(events, start, end)
        count = max(len(times), 1)
        for part, _ in GPU_PHASES:
            if times:
                per[part].append(sum(getattr(t, part) for t in times) / count * US)
            else:  # no device event in the step: the device idled through it
                per[part].append((end - start) * US if part == "idle" else 0.0)
    return [_metric(f"gpu_step.{part}", per[part], what) for part, what in GPU_PHASES]


def cpu_steps(windows: Sequence[tuple[float, float]],
              children: Sequence[tuple[float, float, str]]) -> list[Metric]:
    """Each step's main-thread time by phase, in seconds. ``children`` are the ops at the top
    of the main thread (directly under a step range, or under none); each counts in the steps
    it overlaps, for the part that overlaps (an optimizer's step range crosses the end of the
    step range its hook closed). Phase ``compile_in`` is dynamo compiling inside one of those
    ops: compile time, taken out of the op's."""
    if not windows or not children:
        return []
    ordered = sorted(windows)
    per: dict[str, list[float]] = {part: [0.0] * len(ordered) for part, _ in CPU_PHASES}
    starts = [w[0] for w in ordered]
    for start, end, phase in children:
        i = max(bisect.bisect_right(starts, start) - 1, 0)
        while i < len(ordered) and ordered[i][0] < end:
            overlap = min(end, ordered[i][1]) - max(start, ordered[i][0])
            if overlap > 0:
                if phase == "compile_in":  # compiling inside an op: out of the op's time
                    per["compile"][i] += overlap * US
                    per["ops"][i] -= overlap * US
                else:
                    per[phase][i] += overlap * US
            i += 1
    for i, (start, end) in enumerate(ordered):
        per["ops"][i] = max(per["ops"][i], 0.0)
        per["other"][i] = max((end - start) * US - per["data"][i] - per["compile"][i]
                              - per["ops"][i], 0.0)
    # a phase no step had (no DataLoader range, no compile in the trace) is not shown
    return [_metric(f"cpu_step.{part}", per[part], what) for part, what in CPU_PHASES
            if part not in ("data", "compile") or any(per[part])]


#: Each stream's idle causes, as metric names and what they count.
STREAM_IDLE = (("host", "idle before the call launching the stream's next event was made"),
               ("streams", "idle, launched, while another stream of the device was busy"),
               ("other", "idle, launched, with nothing running on the device"))


def stream_metrics(times: Sequence[StreamTime], window: str) -> list[Metric]:
    """Each stream's idle time by cause (% of the window) and its launch queue depth (the
    mean; the deepest in the description), and the deepest queue of any stream."""
    out: list[Metric] = []
    devices = {t.device for t in times}
    for t in times:
        if t.window <= 0:
            continue
        where = (f"device{t.device}." if len(devices) > 1 else "") + f"stream{t.stream}"
        for cause, what in STREAM_IDLE:
            out.append(Metric(f"gpu_stream_idle.{cause}[{where}]",
                              100 * getattr(t, cause) / t.window, "%", "kernel", SOURCE,
                              Better.LOWER if cause == "host" else Better.NEITHER,
                              detail=True, description=f"{what}, share of {window} wall time"))
        if t.queue_mean is not None:
            out.append(Metric(f"gpu_queue_depth[{where}]", t.queue_mean, "count", "kernel",
                              SOURCE, Better.NEITHER, detail=True,
                              description=f"mean launch queue depth over {t.launches:,} "
                              f"launches (deepest {t.queue_max:,}; 1,024 stalls the host)"))
            out.append(Metric(f"gpu_queue_depth_max[{where}]", t.queue_max, "count", "kernel",
                              SOURCE, Better.NEITHER, detail=True,
                              description="the deepest launch queue of the stream"))
    deepest = [t.queue_max for t in times if t.queue_max is not None]
    if deepest:
        out.append(Metric("gpu_queue_depth_max", max(deepest), "count", "kernel", SOURCE,
                          Better.NEITHER, detail=True,
                          description="the deepest launch queue of any stream (operations "
                          "launched and not yet started; CUDA stalls the host at 1,024)"))
    return out
