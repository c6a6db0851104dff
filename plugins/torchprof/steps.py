"""Each profiled step split into its phases, as metrics whose samples are the steps; and each
stream's idle time by cause and its launch queue (``stream_metrics``).

On a GPU a step is what the device ran, not only what the host did: CUDA runs asynchronously,
and a host that only queues the work ends its ``ProfilerStep`` range long before the device
ends the step's work (2.7 ms on the host for 38 ms of GEMMs). The device work of a step is
the kernels and copies its launch calls made (linked by correlation id, the call inside the
host's step range); the step ends when both the host's range and that work have ended, and
the next step starts there (``device_windows``). Each step's window is then split by what the
device did in it (``timeline.device_times``): compute, communication not hidden behind
compute, memcpy/memset alone, and idle, with the idle time the device waited for the host to
launch; summed over the devices in the trace, divided by their count. The host's own step
and the device time of the step's own work are kept beside (``gpu_step_host``,
``gpu_step_device``): they say which side bounds the step.

On a CPU, the main thread's step split into the DataLoader's ranges (data loading), the
other ops directly under the step, and the rest (Python between the ops, and waiting).
Each metric's value is the phase's median over the profiled steps (the phases' medians need
not add up to the median step); ``samples`` are the steps in order, so a step outlier can be
named by its number and a phase's share of all the steps' time summed.
"""

from __future__ import annotations

import bisect
import statistics
from collections.abc import Sequence

from perfstack.records import datarecord
from perfstack.report import Better, Metric

from .timeline import DeviceEvent, StreamTime, device_times, length, union

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
              ("eval", "an evaluation loop run in the step (the model in eval mode between "
                       "two training steps: a validation), its data loading and ops included"),
              ("ops", "torch ops at the top of the step (an optimizer's step and the ops run "
                      "in it included), data loading apart"),
              ("other", "the rest of the step: Python between the ops, and waiting"))


def _metric(name: str, samples: list[float], what: str,
            numbers: list[int] | None) -> Metric:
    return Metric(name, statistics.median(samples), "s", "framework", SOURCE,
                  Better.NEITHER, samples=samples, samples_of="steps", sample_steps=numbers,
                  detail=True, description=f"{what}, per profiled step (its median over the "
                  "steps; the samples are the steps in order)")


def in_order(windows: Sequence[tuple[float, float]],
             numbers: Sequence[int | None]) -> list[int] | None:
    """The step ranges' numbers (``ProfilerStep#N``) in the order of their windows in time,
    as the steps' samples are; None where a range has none."""
    if len(numbers) != len(windows) or any(n is None for n in numbers):
        return None
    return [n for _, n in sorted(zip(windows, numbers, strict=True), key=lambda wn: wn[0])
            if n is not None]


@datarecord
class DeviceSteps:
    """The profiled steps as the device ran them, µs on the trace's clock, in order."""

    windows: list[tuple[float, float]]  # each step's [start, end]: they follow one another
    host: list[float]  # the host's step range's duration
    device: list[float | None]  # the union of the step's own device work (None: it had none)
    numbers: list[int] | None = None  # each step's number in the workload, where known


def device_windows(windows: Sequence[tuple[float, float]], events: Sequence[DeviceEvent],
                   numbers: list[int] | None = None) -> DeviceSteps:
    """Each host step range with the device work its launch calls made: the step ends at
    the later of the range's end and that work's end, and the next one starts there. The
    first starts at the host's range, or later where the device was still busy then with
    work queued before it (launched before the profiled window opened, or by no call in the
    trace): when that work ended. ``numbers``: the steps' numbers, in the same order."""
    ordered = sorted(windows)
    starts = [w[0] for w in ordered]
    own: list[list[DeviceEvent]] = [[] for _ in ordered]
    for ev in events:
        if ev.launched is None:
            continue
        i = bisect.bisect_right(starts, ev.launched) - 1
        if i >= 0 and ev.launched <= ordered[i][1]:
            own[i].append(ev)
    out = DeviceSteps([], [], [], numbers)
    if not ordered:
        return out
    opened = ordered[0][0]
    first_end = max([ordered[0][1], *(e.end for e in own[0])])
    cursor = max([opened, *(e.end for e in events if e.ts < first_end and (
        e.launched is None or e.launched < opened))])
    for (start, end), evs in zip(ordered, own, strict=True):
        finish = max([end, *(e.end for e in evs)])
        finish = max(finish, cursor)
        out.windows.append((cursor, finish))
        out.host.append(end - start)
        out.device.append(length(union((e.ts, e.end) for e in evs)) if evs else None)
        cursor = finish
    return out


def gpu_steps(steps: DeviceSteps, events: Sequence[DeviceEvent]) -> list[Metric]:
    """Each step's device time by phase, in seconds, over the step's window as the device
    ran it; and the host's step and the device time of the step's own work beside it."""
    if not steps.windows or not events:
        return []
    per: dict[str, list[float]] = {part: [] for part, _ in GPU_PHASES}
    for start, end in steps.windows:
        times = device_times(events, start, end)
        count = max(len(times), 1)
        for part, _ in GPU_PHASES:
            if times:
                per[part].append(sum(getattr(t, part) for t in times) / count * US)
            else:  # no device event in the step: the device idled through it
                per[part].append((end - start) * US if part == "idle" else 0.0)
    numbers = steps.numbers
    out = [_metric(f"gpu_step.{part}", per[part], what, numbers) for part, what in GPU_PHASES]
    out.append(_metric("gpu_step_host", [h * US for h in steps.host],
                       "the host's own step (its ProfilerStep range): what it took to queue "
                       "the step's work, not to run it", numbers))
    if all(d is not None for d in steps.device):
        out.append(_metric("gpu_step_device", [(d or 0.0) * US for d in steps.device],
                           "the device time of the step's own work (the union of the kernels "
                           "and copies its launch calls made)", numbers))
    return out


def cpu_steps(windows: Sequence[tuple[float, float]],
              children: Sequence[tuple[float, float, str]],
              numbers: list[int] | None = None) -> list[Metric]:
    """Each step's main-thread time by phase, in seconds. ``children`` are the ops at the top
    of the main thread (directly under a step range, or under none); each counts in the steps
    it overlaps, for the part that overlaps (an optimizer's step range crosses the end of the
    step range its hook closed). Phase ``compile_in`` is dynamo compiling inside one of those
    ops: compile time, taken out of the op's. ``numbers``: the steps' numbers, in time
    order."""
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
                              - per["eval"][i] - per["ops"][i], 0.0)
    # a phase no step had (no DataLoader range, no compile, no evaluation) is not shown
    return [_metric(f"cpu_step.{part}", per[part], what, numbers) for part, what in CPU_PHASES
            if part not in ("data", "compile", "eval") or any(per[part])]


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
