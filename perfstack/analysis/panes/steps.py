"""The per-step breakdown: each profiled step split into its phases, and the outlier steps.

Read from metrics whose samples are the steps and whose names share a prefix
(``gpu_step.*``: compute, communication, memory, idle and, within idle, host_wait;
``cpu_step.*``: data, compile, ops, other), as the torch backend gives them. The phases
add up to the step (host_wait is part of idle and is shown under it). A step is an outlier
when it took ``OUTLIER`` times the median step or more; it is named with the phase that grew
the most. A step is named by its number in the workload where the metrics say it
(``sample_steps``: the N of torch's ``ProfilerStep#N``, the name the Timeline gives the same
step), else the profiled steps are counted from 1.

On a GPU two figures stand beside the phases, each a step's: the host's own step range
(``gpu_step_host``: what it took to queue the step's work) and the device time of the step's
own work (``gpu_step_device``). The step is bound by the device when its own work fills
most of the step (``DEVICE_FILLS``), else by the host; where the device's work ended after
the host's range (a step well past the host's), the host ran ahead of the device.
"""

from __future__ import annotations

from perfstack.analysis.stats import median
from perfstack.records import datarecord
from perfstack.report import Metric, Report

#: The families of per-step phases, in the order a report shows them: (prefix, phases that
#: add up to the step, phases within another). A phase a backend left out (no DataLoader in
#: the trace: no data loading) is not shown; the last, the rest of the step, must be there.
FAMILIES = (("gpu_step.", ("compute", "communication", "memory", "idle"), ("host_wait",)),
            ("cpu_step.", ("data", "compile", "eval", "ops", "other"), ()))
#: A step this many times the median step is an outlier.
OUTLIER = 1.5
#: The device bounds a step whose own device work is at least this share of it.
DEVICE_FILLS = 0.85


@datarecord
class Phase:
    """One phase of the steps: its seconds in each step, in order."""

    name: str
    description: str
    seconds: list[float]
    within: bool = False  # part of the phase above it, not a part of the step of its own

    @property
    def median(self) -> float:
        """The median of this phase's seconds over the steps (the phase's metric value; the
        phases' medians need not add up to the median step)."""
        return median(self.seconds)


@datarecord
class Outlier:
    """A step that took much longer than the median step, and the phase that grew most."""

    step: int  # its number in the workload (torch's ProfilerStep#N), else 1-based
    index: int  # 1-based, in profile order
    seconds: float
    ratio: float  # to the median step
    phase: str
    extra: float  # the phase's seconds beyond its median


@datarecord
class StepView:
    """The steps of one backend's profile, by phase."""

    device: str  # "gpu" or "cpu"
    source: str
    phases: list[Phase]
    totals: list[float]  # each step's seconds (the phases that add up)
    outliers: list[Outlier]
    #: each step's number in the workload (torch's ``ProfilerStep#N``: the Timeline's name
    #: for it), where the report says; else the profiled steps counted from 1
    numbers: list[int]
    #: whether ``numbers`` are the report's (else counted from 1: a report made before reports
    #: said them, or a backend that does not know them)
    numbered: bool
    #: on a GPU: each step's host range and the device time of its own work (None: unknown)
    host: list[float] | None = None
    device_work: list[float] | None = None

    @property
    def bound(self) -> str | None:
        """Which side bounds the steps: "device" (its own work fills the step), "host" (the
        device idles in it, mostly before the host made the next launch call), "waits" (the
        device idles with its work launched: a synchronisation, another stream, another
        rank), None where the report does not say."""
        if not self.device_work or not self.totals or self.median <= 0:
            return None
        if median(self.device_work) >= DEVICE_FILLS * self.median:
            return "device"
        idle = next((p for p in self.phases if p.name == "idle"), None)
        wait = next((p for p in self.phases if p.name == "host_wait"), None)
        if idle is None or wait is None or sum(wait.seconds) >= 0.5 * sum(idle.seconds):
            return "host"
        return "waits"

    @property
    def median(self) -> float:
        """The median step's seconds."""
        return median(self.totals)

    def share(self, phase: Phase) -> float | None:
        """A phase's share (%) of all the profiled steps' time: the shares of the phases
        that make up the step add up to 100%, as medians of each phase would not."""
        whole = sum(self.totals)
        return 100 * sum(phase.seconds) / whole if whole > 0 else None


def _family(report: Report, prefix: str) -> list[Metric]:
    return [m for m in report.metrics
            if m.name.startswith(prefix) and m.samples and m.samples_of == "steps"]


def step_view(report: Report) -> StepView | None:
    """The first family of per-step phases the report holds, or None."""
    for prefix, parts, within in FAMILIES:
        found = {m.name[len(prefix):]: m for m in _family(report, prefix)}
        if parts[-1] not in found:
            continue
        present = [p for p in parts if p in found]
        count = min(len(found[p].samples or []) for p in present)
        if count == 0:
            continue
        phases = [Phase(name, found[name].description or name,
                        [float(v) for v in (found[name].samples or [])[:count]],
                        name in within)
                  for name in (*present, *within) if name in found]
        totals = [sum(p.seconds[i] for p in phases if not p.within) for i in range(count)]
        source = found[present[0]].source
        beside = {name: [float(v) for v in (m.samples or [])][:count]
                  for m in report.metrics if (name := m.name) in ("gpu_step_host",
                                                                 "gpu_step_device")
                  and m.samples and m.samples_of == "steps"}
        given = found[present[0]].sample_steps
        numbered = given is not None and len(given) >= count
        numbers = given[:count] if given and numbered else list(range(1, count + 1))
        return StepView(prefix.split("_")[0], source, phases, totals,
                        outliers(phases, totals, numbers), numbers, numbered,
                        beside.get("gpu_step_host"), beside.get("gpu_step_device"))
    return None


def outliers(phases: list[Phase], totals: list[float], numbers: list[int]) -> list[Outlier]:
    """The steps of ``OUTLIER`` times the median step or more, slowest first, each named by
    its number (``numbers``, one a step)."""
    if len(totals) < 3:
        return []
    middle = median(totals)
    out = []
    for i, total in enumerate(totals):
        if middle > 0 and total >= OUTLIER * middle:
            grew = max((p for p in phases if not p.within),
                       key=lambda p: p.seconds[i] - p.median)
            out.append(Outlier(numbers[i], i + 1, total, total / middle, grew.name,
                               grew.seconds[i] - grew.median))
    return sorted(out, key=lambda o: -o.seconds)


def view(report: Report, top: int, full: bool) -> StepView | None:
    """The pane's figures (its registered entry, ``perfstack.analysis.panes.PANES``)."""
    return step_view(report)
