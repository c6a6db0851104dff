"""What bounds a GPU workload's steps, as numbers: device-bound, copy-bound, sync-bound,
launch-bound, or a device that waits with its work launched.

Read from the report's metric convention and rows, never from a backend (docs/gpu.md):

- the device's time over the profiled steps as it ran them: ``gpu_busy``, ``gpu_time.idle``,
  ``gpu_idle.host_wait`` (idle before the next launch call was made), ``gpu_idle.after_sync``
  (idle that held a synchronisation's return), ``gpu_copy_share`` (copies between host and
  device), and the steps by phase (``gpu_step.*``, the steps view) with ``gpu_step_device``
  (the device time of a step's own work) beside them;
- ``gpu_sync_calls`` and ``gpu_sync_time`` a step, and the framework rows that made them
  (``sync_calls``, ``sync_time`` values);
- the copy rows of the kernel layer (``attrs.copy``: direction and host memory; ``bytes`` and
  ``device`` values) and the host link's bandwidth in the GPU's ceilings (``how.link``);
- the baseline's ``step_time`` (steps unprofiled, on the device's clock where the workload ran
  CUDA): the device's work a step over it is how busy the device is without the profiler,
  whose own slowdown of the host otherwise reads as idle device.

A pure module: a report in, a ``GpuBound`` out.
"""

from __future__ import annotations

from typing import Any

from perfstack.analysis.panes.steps import step_view
from perfstack.analysis.stats import median
from perfstack.records import datarecord, field
from perfstack.report import Layer, Report

#: The device is the limit when it is busy this share (%) of a step.
DEVICE_BOUND = 80.0
#: Copies between host and device this share (%) of the steps: the link is the limit.
COPY_BOUND = 40.0
#: The host blocked in synchronisations this share (%) of its step (``GpuBound.blocked``), and
#: the device idle this share (%) of the steps after them: the synchronisations break the
#: pipeline.
SYNC_BLOCKED = 10.0
SYNC_IDLE = 25.0
#: The device idles this share (%) of the steps, mostly before the next launch: the host
#: cannot launch fast enough.
LAUNCH_IDLE = 30.0
#: Unprofiled, the device is busier than profiled by this many points: the idle is the
#: profiler's slowdown of the host, not the workload's.
PROFILER_GAP = 15.0


@datarecord
class Copies:
    """The copies of one direction and host memory: their bytes, device time and calls."""

    direction: str  # HtoD, DtoH
    host: str | None  # pageable, pinned, None (not said)
    bytes: float | None
    seconds: float
    calls: int
    link: float | None  # the host link's bytes/s for such a copy, measured or published
    link_how: str | None  # where that figure comes from

    @property
    def rate(self) -> float | None:
        """Achieved bytes/s."""
        return self.bytes / self.seconds if self.bytes and self.seconds > 0 else None


@datarecord
class SyncOp:
    """An op that made the host wait for the device: its row, calls and time blocked, and
    the user's line that called it where the trace says."""

    key: str
    op: str
    calls: int
    seconds: float
    caller: str | None


@datarecord
class GpuBound:
    """What bounds the steps (``kind``) and the figures that say so, over the profiled
    steps (per step where a figure says "a step")."""

    kind: str  # device | copy | sync | launch | waits
    busy: float  # % of a step the device was busy: unprofiled where a baseline says
    busy_profiled: float
    busy_unprofiled: float | None
    source: str
    step_s: float | None  # a profiled step, as the device ran it
    device_work_s: float | None  # the device time of a step's own work
    baseline_step_s: float | None  # an unprofiled step (the baseline's)
    idle: float | None  # % of the steps
    host_wait: float | None
    after_sync: float | None
    copy_share: float | None
    sync_calls: float | None  # a step
    sync_s: float | None  # the host's time blocked in them, a step
    sync_ops: list[SyncOp] = field(default_factory=list)
    copies: list[Copies] = field(default_factory=list)
    copy_bytes: float | None = None  # host<->device bytes a step

    def blocked(self) -> tuple[float, float | None, bool]:
        """The share (%) of a step the host spent blocked in synchronisations, the step it is
        a share of, and whether that step is unprofiled. A wait for the device lasts as long
        with the profiler as without, while the rest of the host's step slows under it (1.75x
        to 3x on the H200's 300-reads loop): over an unprofiled step on the device's clock,
        where the baseline gives one, the share does not move with the profiler's cost."""
        unprofiled = self.busy_unprofiled is not None and bool(self.baseline_step_s)
        step = self.baseline_step_s if unprofiled else self.step_s
        share = 100 * (self.sync_s or 0.0) / step if step else 0.0
        return share, step, unprofiled


def _value(report: Report, name: str) -> tuple[float, str] | None:
    m = report.metric(name)
    if m is None or not isinstance(m.value, (int, float)) or isinstance(m.value, bool):
        return None
    return float(m.value), m.source


def _samples_median(report: Report, name: str) -> float | None:
    m = report.metric(name)
    if m is None or not m.samples:
        return None
    return median([float(v) for v in m.samples])


def link_of(report: Report) -> dict[str, Any]:
    """The host link's figures in the GPU's ceilings (``how.link``), or {}."""
    ceilings = report.environment.get("ceilings")
    gpu = ceilings.get("gpu") if isinstance(ceilings, dict) else None
    how = gpu.get("how") if isinstance(gpu, dict) else None
    link = how.get("link") if isinstance(how, dict) else None
    return link if isinstance(link, dict) else {}


def _link_rate(link: dict[str, Any], direction: str, host: str | None) -> tuple[
        float | None, str | None]:
    """The link's bytes/s for a copy: measured for its direction and host memory where the
    probe measured it, else the published figure for one direction."""
    measured = link.get(f"{direction.lower()}_{host or 'pinned'}")
    if isinstance(measured, (int, float)) and measured > 0:
        return float(measured), f"measured here, {host or 'pinned'} memory"
    each = link.get("per_direction")
    if isinstance(each, (int, float)) and each > 0:
        return float(each), str(link.get("what") or "published")
    return None, None


def copies_of(report: Report) -> list[Copies]:
    """The host copies of the kernel layer, by direction and host memory, largest first."""
    found: dict[tuple[str, str | None], list[float]] = {}
    unknown: set[tuple[str, str | None]] = set()
    for row in report.layers.get(Layer.KERNEL, []):
        copy = row.attrs.get("copy")
        device = row.values.get("device")
        if not isinstance(copy, dict) or copy.get("direction") not in ("HtoD", "DtoH") \
                or device is None or device.value is None:
            continue
        key = (str(copy["direction"]), copy.get("host") if isinstance(copy.get("host"), str)
               else None)
        entry = found.setdefault(key, [0.0, 0.0, 0.0])
        moved, calls = row.values.get("bytes"), row.values.get("calls")
        if moved is None or moved.value is None:
            unknown.add(key)
        else:
            entry[0] += float(moved.value)
        entry[1] += float(device.value)
        entry[2] += float(calls.value or 0) if calls is not None else 0.0
    link = link_of(report)
    out = []
    for (direction, host), (total, seconds, count) in found.items():
        rate, how = _link_rate(link, direction, host)
        out.append(Copies(direction, host, None if (direction, host) in unknown else total,
                          seconds, int(count), rate, how))
    return sorted(out, key=lambda c: -c.seconds)


def sync_ops(report: Report, top: int = 3) -> list[SyncOp]:
    """The ops that made the host wait longest for the device, with their callers."""
    rows = [r for r in report.layers.get(Layer.FRAMEWORK, [])
            if r.values.get("sync_time") is not None and r.values["sync_time"].value]
    rows.sort(key=lambda r: -float(r.values["sync_time"].value or 0.0))
    out = []
    for r in rows[:top]:
        callers = r.links.get("python") or []
        calls = r.values.get("sync_calls")
        out.append(SyncOp(r.key, str(r.attrs.get("op") or r.name.split(" [", 1)[0]),
                          int(calls.value or 0) if calls is not None else 0,
                          float(r.values["sync_time"].value or 0.0),
                          callers[0] if callers else None))
    return out


def gpu_bound(report: Report) -> GpuBound | None:
    """What bounds the GPU steps of a report, or None where no device time was measured
    over steps."""
    busy = _value(report, "gpu_busy")
    if busy is None:
        return None
    steps = step_view(report)
    gpu_steps = steps is not None and steps.device == "gpu"
    step = median(steps.totals) if steps is not None and gpu_steps else None
    work = median(steps.device_work) if steps is not None and steps.device_work else None
    base = _value(report, "step_time")
    unprofiled = None
    # a baseline step shorter than the device's own work was timed on the host's clock
    # while CUDA ran asynchronously (an older perfstack): it says nothing of the device
    if base is not None and work and base[0] >= 0.9 * work:
        unprofiled = min(100.0, 100 * work / base[0])
    chosen = unprofiled if unprofiled is not None and unprofiled > busy[0] else busy[0]
    idle, wait = _value(report, "gpu_time.idle"), _value(report, "gpu_idle.host_wait")
    after, copy = _value(report, "gpu_idle.after_sync"), _value(report, "gpu_copy_share")
    calls, blocked = (_samples_median(report, "gpu_sync_calls"),
                      _samples_median(report, "gpu_sync_time"))
    moved = _samples_median(report, "gpu_copy_bytes")
    found = GpuBound(
        kind="waits", busy=chosen, busy_profiled=busy[0], busy_unprofiled=unprofiled,
        source=busy[1], step_s=step, device_work_s=work,
        baseline_step_s=base[0] if base is not None else None,
        idle=idle[0] if idle else None, host_wait=wait[0] if wait else None,
        after_sync=after[0] if after else None, copy_share=copy[0] if copy else None,
        sync_calls=calls, sync_s=blocked, sync_ops=sync_ops(report),
        copies=copies_of(report), copy_bytes=moved)
    found.kind = _kind(found)
    return found


def _kind(b: GpuBound) -> str:
    blocked = b.blocked()[0]
    if b.copy_share is not None and b.copy_share >= COPY_BOUND:
        return "copy"
    if b.busy >= DEVICE_BOUND:
        return "device"
    if blocked >= SYNC_BLOCKED and (b.after_sync or 0.0) >= SYNC_IDLE:
        return "sync"
    idle = b.idle if b.idle is not None else 100 - b.busy_profiled
    if (b.host_wait or 0.0) >= max(LAUNCH_IDLE, idle / 2):
        return "launch"
    return "waits"


def profiler_idle(b: GpuBound) -> bool:
    """Whether the device idles under the profiler mostly because the profiler slowed its
    host (unprofiled, it is that much busier)."""
    return b.busy_unprofiled is not None and b.busy_unprofiled - b.busy_profiled >= PROFILER_GAP
