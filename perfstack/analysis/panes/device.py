"""The device's time as every format shows it: split into compute, communication, memory and
idle (the ``gpu_busy`` and ``gpu_time.*`` metrics a backend published)."""

from __future__ import annotations

from perfstack.analysis.panes.ranks import RANKED
from perfstack.records import datarecord
from perfstack.report import Report


@datarecord
class DevicePart:
    """One part of the device's time over the profiled steps."""

    part: str  # compute, communication, memory, idle, host_wait
    share: float  # % of the steps' wall time
    depth: int  # 1: a part of the line above it (host_wait of idle)
    metric: str


@datarecord
class DeviceTime:
    """The device's time (the ``gpu_busy`` and ``gpu_time.*`` metrics a backend published)."""

    busy: float | None  # gpu_busy, %
    source: str
    window: str  # what the shares are of, from the metric's description
    parts: list[DevicePart]
    comm_overlap: float | None  # % of collective time hidden behind compute
    launch_delay_s: float | None  # median time from a launch call to the start on the device


#: The device breakdown's parts, in order, with the metric each comes from.
DEVICE_PARTS = (("compute", "gpu_time.compute", 0), ("communication", "gpu_time.communication", 0),
                ("memory", "gpu_time.memory", 0), ("idle", "gpu_time.idle", 0),
                ("host_wait", "gpu_idle.host_wait", 1))
DEVICE_METRICS = ("gpu_busy", "gpu_comm_overlap", "gpu_launch_delay",
                  *(name for _, name, _ in DEVICE_PARTS))


def device_time(report: Report) -> DeviceTime | None:
    """The device's time over the profiled steps (or the run), from the metrics a backend
    published, or None where none did."""
    busy = report.metric("gpu_busy")
    parts = [DevicePart(part, float(m.value), depth, name) for part, name, depth in DEVICE_PARTS
             if (m := report.metric(name)) is not None and m.value is not None]
    if busy is None and not parts:
        return None
    # Over the profiled steps when the backend that measured the device had steps (it
    # published a per-step metric), else over the whole run.
    measured_by = {m.source for m in report.metrics
                   if m.name == "gpu_busy" or m.name.startswith("gpu_busy[")} - {"perfstack"}
    stepped = any(m.samples_of == "steps" and m.source in measured_by for m in report.metrics)
    window = "the profiled steps" if stepped else "the run"
    ranks = sum(1 for m in report.metrics if RANKED.match(m.name)
                and m.name.startswith("gpu_busy["))
    across = report.environment.get("across_ranks")
    if isinstance(across, dict):  # a big job: its ranks are counted in the distributions
        ranks = next((int(f.get("known") or 0) for f in across.get("figures") or []
                      if isinstance(f, dict) and f.get("name") == "gpu_busy"), ranks)
    if busy is not None and busy.source == "perfstack" and ranks > 1:  # the job's mean
        window += f" (the mean of {ranks} ranks)"
    overlap = report.metric("gpu_comm_overlap")
    delay = report.metric("gpu_launch_delay")
    return DeviceTime(
        float(busy.value) if busy is not None and busy.value is not None else None,
        busy.source if busy is not None else parts[0].metric, window, parts,
        float(overlap.value) if overlap is not None and overlap.value is not None else None,
        float(delay.value) if delay is not None and delay.value is not None else None)


def view(report: Report, top: int, full: bool) -> DeviceTime | None:
    """The pane's figures (its registered entry, ``perfstack.analysis.panes.PANES``)."""
    return device_time(report)


def shows(name: str) -> bool:
    """Whether the pane shows metric ``name`` (the default metrics table leaves it out)."""
    return name in DEVICE_METRICS
