"""``perfstack gate``: the newest runs of a workload against the level before them, for CI.

The reference is not one baseline report but the history itself, and never runs that share
the regression being judged:

- when the series stepped within the last ``RECENT`` runs (a significant change point,
  ``perfstack.history.changepoints``, the newest run included), the runs since the step are judged
  against the level before it: a regression that landed three runs ago fails today too, with
  the run and commits where it happened, instead of being vouched for by those three runs;
- otherwise the newest run is judged against the newest segment of the runs before it.

A run disturbed by other programs (``perfstack.machine.load``) is set aside as ``trend`` sets
it aside; when the newest run is disturbed the gate cannot judge it and says so.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from typing import Any

from perfstack.analysis.diff.drift import corrected
from perfstack.history import Entry, Group, changepoints
from perfstack.history.changepoints import Side
from perfstack.history.trend import MIN_RUNS, SeriesId, present_values, series_of, side_dict
from perfstack.records import datarecord

#: The gate's default significance, shared among the series gated (Bonferroni).
GATE_ALPHA = 0.01
#: The smallest step that starts a new segment for the gate's reference.
GATE_SEGMENT_STEP = 0.01
#: A change point among the newest this many runs is judged as the newest runs' change; an
#: older one is the history's settled level (``--since`` accepts a new level sooner).
RECENT = 10


@datarecord(frozen=True)
class Judgement:
    """The gate's answer for one series."""

    series: SeriesId
    value: float  # the newest run's value, or the mean of the runs since the step
    reference: Side  # the level judged against
    change: float  # relative
    pvalue: float
    regression: bool
    note: str
    #: how much slower the machine was for the judged runs than for the reference (probes)
    machine: float | None = None
    #: the first run of the level judged, when the series stepped among the newest runs
    since: Entry | None = None
    #: the last run of the reference level (the run before ``since``)
    before: Entry | None = None
    runs: int = 1  # how many runs the judged level holds

    def to_dict(self) -> dict[str, Any]:
        """Return the JSON form."""
        return {"series": self.series.to_dict(), "value": self.value,
                "reference": side_dict(self.reference), "change": self.change,
                "pvalue": self.pvalue, "regression": self.regression, "note": self.note,
                "machine_change": self.machine,
                "since": None if self.since is None else {
                    "run": self.since.id, "commit": self.since.commit,
                    "started": self.since.started,
                    "previous_commit": self.before.commit if self.before else None},
                "runs": self.runs}


def disturbed_newest(group: Group) -> str | None:
    """Return why the group's newest run was disturbed, or None."""
    return group.runs[-1].disturbed if group.runs else None


def gate(group: Group, names: Sequence[str] | None, threshold: float,
         alpha: float = GATE_ALPHA) -> list[Judgement]:
    """Judge the group's newest runs: for each gated series (``names``, else every metric
    that has a better direction), as the module says.

    A regression is worse by more than ``threshold`` (relative), beyond noise, and not the
    machine's doing. Beyond noise: with a recent step, the step is significant at the
    series' share of ``alpha`` (``share``); without one, the newest value's p-value under the
    segment's spread (Student t) is, and it is worse than every run of the segment (a
    spread with long tails fools the t-test alone). Not the machine's: a time or rate stays
    beyond the threshold once the machine's own change (the probes) is taken out. The newest
    run disturbed: every series says so and none is a regression."""
    gated = []
    for sid, values in series_of(group):
        if names is not None:
            if sid.key not in names:
                continue
        elif sid.kind != "metric" or sid.better == "neither":
            continue
        # The newest value as measured (a disturbed run's is set aside in ``values``).
        raw = (group.metrics if sid.kind == "metric" else group.rows).get(sid.key) or [None]
        if raw[-1] is not None:
            gated.append((sid, values, float(raw[-1])))
    hit = disturbed_newest(group)
    out = []
    for sid, values, newest in gated:
        if hit is not None:
            out.append(Judgement(sid, newest, changepoints.side([]), math.nan, 1.0, False,
                                 "disturbed"))
            continue
        out.append(_judge(group, sid, values, threshold,
                          share(alpha, sid.key == group.figure and sid.kind == "metric",
                                len(gated), group.figure in {s.key for s, _, _ in gated})))
    return out


def share(alpha: float, is_figure: bool, gated: int, figure_gated: bool) -> float:
    """Return one series' part of the gate's ``alpha`` (a weighted Bonferroni split, so the
    job fails on any series only as often as ``alpha`` says): the workload's own figure,
    when gated, has half of it; the other series share the rest equally."""
    if not figure_gated or gated == 1:
        return alpha / max(gated, 1)
    return alpha / 2 if is_figure else alpha / 2 / (gated - 1)


def _judge(group: Group, sid: SeriesId, values: list[float | None], threshold: float,
           each: float) -> Judgement:
    where, present = present_values(values)
    newest = present[-1]
    if len(present) - 1 < MIN_RUNS:
        return Judgement(sid, newest, changepoints.side(present[:-1]), math.nan, 1.0, False,
                         f"{len(present) - 1} runs before: needs {MIN_RUNS}")
    steps, _ = changepoints.detect(present, GATE_SEGMENT_STEP, alpha=each)
    recent = steps[-1] if steps and len(present) - steps[-1].index <= RECENT else None
    if recent is not None:
        start = steps[-2].index if len(steps) > 1 else 0
        reference, judged = present[start:recent.index], present[recent.index:]
        p = recent.pvalue
        beyond = p < each
        first_run = where[recent.index]
        ref_runs = [where[i] for i in range(start, recent.index)]
    else:
        past_steps, _ = changepoints.detect(present[:-1], GATE_SEGMENT_STEP)
        start = past_steps[-1].index if past_steps else 0
        reference, judged = present[start:-1], [newest]
        p = _prediction_p(newest, changepoints.side(reference))
        worst = max(reference) if sid.better == "lower" else min(reference)
        beyond = p < each and (newest > worst if sid.better == "lower" else newest < worst)
        first_run = where[-1]
        ref_runs = [where[i] for i in range(start, len(present) - 1)]
    ref = changepoints.side(reference)
    level = statistics.fmean(judged)
    change = level / ref.mean - 1 if ref.mean else math.nan
    worse = sid.better != "neither" and (change > 0) == (sid.better == "lower")
    big = abs(change) > threshold
    machine = _machine_change(group, sid, [i for i in range(first_run, len(group.runs))
                                           if group.runs[i].disturbed is None], ref_runs)
    fixed = corrected(change, machine, sid.unit)
    explained = machine is not None and not (abs(fixed) > threshold
                                             and (fixed > 0) == (change > 0))
    regression = bool(worse and big and beyond and not explained)
    if regression:
        note = "REGRESSION"
    elif worse and big and explained and machine is not None:
        way = "slower" if machine > 0 else "faster"
        note = f"machine {abs(machine):.0%} {way}"  # the probe explains the change
    elif worse and big:
        note = "within noise"  # worse by more than the threshold, not beyond noise
    elif worse and beyond:
        note = "under threshold"  # beyond noise, but smaller than the threshold
    else:
        note = "ok"
    since = group.runs[first_run] if recent is not None else None
    before = group.runs[ref_runs[-1]] if recent is not None and ref_runs else None
    return Judgement(sid, level, ref, change, p, regression, note, machine, since, before,
                     len(judged))


def _machine_change(group: Group, sid: SeriesId, judged: list[int],
                    reference: list[int]) -> float | None:
    """How much slower the machine was during the judged runs than during the reference's
    (the probe every run times in its own process: wall-clock for the run's own figures,
    CPU-only for the others), or None without probes."""
    wall = sid.layer == "run"

    def speeds(runs: list[int]) -> list[float]:
        found = (group.runs[i].speed_wall if wall else group.runs[i].speed_cpu for i in runs)
        return [x for x in found if x]

    now, before = speeds(judged), speeds(reference)
    if not now or not before:
        return None
    return statistics.median(now) / statistics.median(before) - 1


def _prediction_p(value: float, ref: Side) -> float:
    """Two-sided p-value of one new value under a segment's spread (Student t with n-1
    degrees of freedom, the segment's mean uncertain too)."""
    from scipy import stats

    if ref.n < 2:
        return 1.0
    scale = ref.sd * math.sqrt(1 + 1 / ref.n)
    if scale == 0:
        return 1.0 if value == ref.mean else 0.0
    return float(2 * stats.t.sf(abs(value - ref.mean) / scale, ref.n - 1))
