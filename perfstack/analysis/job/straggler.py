"""Why the slowest rank is slow: its figures beside the other ranks' median.

A rank is slower per step because it computes more (on the device, or in CPU ops outside
collectives), because its host stalls (the device idle waiting for the next launch; Python
holding the GIL where py-spy sampled it), or because it waits longer in collectives (its
transfers are slower). Each per-rank figure a backend measured is set beside the median of the
other ranks; the cause named is the one the slowest rank exceeds the others by the most.
"""

from __future__ import annotations

import re
import statistics
from collections.abc import Callable, Iterable

from perfstack.records import datarecord
from perfstack.report import Metric

#: Per-rank figures that can explain a slow rank: the metric's base name, what it measures,
#: the cause it stands for, and whether it is a share of the rank's step time (else of its
#: run's wall time).
EXPLAINERS = (
    ("gpu_time.compute", "device compute", "more compute", True),
    ("cpu_compute", "CPU op time outside collectives", "more compute", False),
    ("gpu_idle.host_wait", "device idle waiting for the host", "a host stall", True),
    ("budget.interpreter", "Python code holding the GIL", "a host stall", False),
    ("collective_stall", "waiting in collectives", "waiting in collectives", True),
)
#: The slowest rank must exceed the others' median by this much (relative) for a cause,
NOTABLE = 0.10
#: and by this share of its step time (or points of its wall time).
MATERIAL = 0.05


@datarecord(frozen=True)
class Evidence:
    """One figure of the slowest rank beside the other ranks' median."""

    cause: str
    line: str
    excess: float  # the slowest rank's figure over the others' median, minus 1
    #: whether the difference is large enough to explain a slower step (5% of the slowest
    #: rank's step, or 5 points of its wall time), not only large relative to a small figure
    material: bool


def per_rank(metrics: Iterable[Metric], base: str) -> dict[int, float]:
    """The ``base[rankN]`` metrics' known values, by rank."""
    pattern = re.compile(re.escape(base) + r"\[rank(\d+)\]")
    return {int(found[1]): float(m.value) for m in metrics
            if (found := pattern.fullmatch(m.name)) and isinstance(m.value, (int, float))}


def evidence(figures: Callable[[str], dict[int, float]], slowest: int,
             cpu_compute: dict[int, float], step_median: dict[int, float]) -> list[Evidence]:
    """The slowest rank's figures beside the other ranks' median, most telling first.
    ``figures(base)``: each rank's known value of a per-rank figure; ``cpu_compute``: each
    rank's CPU op time outside collectives (s); ``step_median``: each rank's median step time
    (s), to say a share of the step time in milliseconds a step."""
    out = []
    for base, what, reason, of_step in EXPLAINERS:
        values = cpu_compute if base == "cpu_compute" else figures(base)
        if of_step:  # a share of the step time, in seconds a step: shares dilute
            values = {r: v / 100 * step_median[r] for r, v in values.items()
                      if r in step_median}
        others = [v for r, v in values.items() if r != slowest]
        if slowest not in values or not others:
            continue
        mine, typical = values[slowest], statistics.median(others)
        excess = mine / typical - 1 if typical > 0 else (float("inf") if mine > 0 else 0.0)
        if of_step:
            said = f"{mine * 1e3:.1f} ms a step against {typical * 1e3:.1f} ms"
            material = mine - typical >= MATERIAL * step_median[slowest]
        elif base == "cpu_compute":
            said = f"{mine * 1e3:.1f} ms against {typical * 1e3:.1f} ms"
            material = mine > typical
        else:
            said = f"{mine:.1f}% of its wall time against {typical:.1f}%"
            material = mine - typical >= 100 * MATERIAL
        where = (f"on rank {next(r for r in values if r != slowest)}" if len(others) == 1
                 else "on the other ranks' median")
        out.append(Evidence(reason, f"{what}: {said} {where}", excess, material))
    out.sort(key=lambda e: -e.excess)
    return out


def cause(found: list[Evidence]) -> Evidence | None:
    """The cause the evidence points at: of the figures whose difference is material, the one
    the slowest rank exceeds the others by the most (relatively), from NOTABLE; None when no
    figure stands out."""
    return next((e for e in found if e.material and e.excess > NOTABLE), None)


#: From this many ranks a slow rank is judged against the spread of the others too.
MANY_RANKS = 8
#: ... and stands out when its median step is beyond this many robust standard deviations
#: (1.4826 median absolute deviations) of the other ranks' medians (Iglewicz and Hoaglin).
OUTLIER_Z = 3.5


def outlier_among(medians: dict[int, float], rank: int,
                  least: float) -> tuple[bool, float, str]:
    """Whether ``rank``'s median step stands out of the other ranks' medians, judged from
    their distribution rather than from two ranks' steps: (beyond, its excess over the
    median rank, why). ``least``: the excess it needs. Among hundreds of ranks two ranks'
    few steps cannot say much (a 2-step trace is "within noise" at 50x), while every other
    rank's median says how steps spread."""
    others = [m for r, m in medians.items() if r != rank]
    typical = statistics.median(others)
    excess = medians[rank] / typical - 1 if typical > 0 else 0.0
    spread = 1.4826 * statistics.median(abs(m - typical) for m in others)
    z = (medians[rank] - typical) / spread if spread > 0 else float("inf")
    beyond = excess > least and z > OUTLIER_Z
    return beyond, excess, (
        f"{100 * excess:.0f}% over the median of the other {len(others)} ranks' median "
        + (f"steps, {z:.0f} robust deviations out" if spread > 0 and z < 1e6
           else "steps, which do not spread"))
