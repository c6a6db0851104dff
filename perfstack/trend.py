"""Trends over the history: where each series stepped, which commits, which layer and rows.

A group is one workload on one machine (runs on different machines are never compared). Its
series are every metric and the top rows of each layer (their primary value). Each series gets
a verdict over its newest segment, the runs since its last significant step:

- **changed**: it has significant steps (``perfstack.changepoints``); each with the commit range
  it happened in, its size with a 95% interval, and the other series that stepped at the same
  run, ranked by how much of the step they explain (rows in seconds against a step in seconds),
  the layer being that of the row that explains most;
- **cannot tell yet**: a possible step that is not significant, or a newest segment too noisy or
  too short for a step of ``min_change`` to be seen (with the runs it would take);
- **no change**: neither.

``gate`` judges the newest run against its series' newest segment (not one baseline report).
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from perfstack import changepoints
from perfstack.analysis.drift import corrected
from perfstack.changepoints import Side, Step
from perfstack.history import Entry, Group

CHANGED, UNSURE, STEADY = "changed", "cannot tell yet", "no change"
#: A series with fewer runs than this gets "cannot tell yet".
MIN_RUNS = 2 * changepoints.MIN_SIDE
#: The p-value below which another series counts as having stepped with a change point.
MOVED_P = 0.01


@dataclass(frozen=True)
class SeriesId:
    """Which series: a metric (by name) or a row (by key), with what it is measured in."""

    kind: str  # "metric" | "row"
    key: str
    label: str
    unit: str
    layer: str
    better: str  # "higher" | "lower" | "neither"

    def to_dict(self) -> dict[str, Any]:
        """Return the JSON form."""
        return {"kind": self.kind, "key": self.key, "label": self.label, "unit": self.unit,
                "layer": self.layer, "better": self.better}


@dataclass(frozen=True)
class Mover:
    """Another series that stepped at a change point."""

    series: SeriesId
    change: float  # relative
    delta: float  # absolute, in the series' unit
    share: float | None  # of the lead series' step, where the units agree
    pvalue: float

    def to_dict(self) -> dict[str, Any]:
        """Return the JSON form."""
        return {"series": self.series.to_dict(), "change": self.change, "delta": self.delta,
                "share": self.share, "pvalue": self.pvalue}


@dataclass(frozen=True)
class Change:
    """A significant step of one series, placed in the history."""

    series: SeriesId
    step: Step
    run: Entry  # the first run of the new level
    previous: Entry  # the last run of the old one
    movers: list[Mover]
    layer: str | None  # the layer of the row that explains most of it
    #: Where the step may be: the first run that may be on the new level, the last run that
    #: may still be on the old one (the run before ``earliest``) and the last that may be new.
    earliest: Entry | None = None
    before_earliest: Entry | None = None
    latest: Entry | None = None

    @property
    def precise(self) -> bool:
        """True when the step is placed at one run."""
        return self.earliest is None or self.earliest.id == self.latest_id

    @property
    def latest_id(self) -> int:
        """The last run that may be the first on the new level."""
        return (self.latest or self.run).id

    @property
    def worse(self) -> bool | None:
        """True for a regression, False for an improvement, None where neither applies."""
        if self.series.better == "neither":
            return None
        return (self.step.change > 0) == (self.series.better == "lower")

    def to_dict(self) -> dict[str, Any]:
        """Return the JSON form."""
        s = self.step
        return {"series": self.series.to_dict(), "index": s.index, "run": self.run.id,
                "commits": [self.previous.commit, self.run.commit],
                "may_be_at": {"first_run": (self.earliest or self.run).id,
                              "last_run": self.latest_id,
                              "commits": [(self.before_earliest or self.previous).commit,
                                          (self.latest or self.run).commit]},
                "started": self.run.started, "change": s.change, "interval": [s.low, s.high],
                "pvalue": s.pvalue, "before": _side(s.before), "after": _side(s.after),
                "worse": self.worse, "layer": self.layer,
                "movers": [m.to_dict() for m in self.movers]}


@dataclass(frozen=True)
class Verdict:
    """One series over the history."""

    series: SeriesId
    status: str
    values: list[float | None]
    changes: list[Change]
    possible: Change | None
    current: Side | None  # the newest segment
    detectable: float | None  # the smallest step the newest segment would show
    runs_needed: int | None  # runs in the newest segment before ``min_change`` would show

    @property
    def noise(self) -> float | None:
        """The newest segment's relative standard deviation."""
        c = self.current
        return c.sd / abs(c.mean) if c and c.mean else None

    def to_dict(self) -> dict[str, Any]:
        """Return the JSON form."""
        return {"series": self.series.to_dict(), "status": self.status, "values": self.values,
                "changes": [c.to_dict() for c in self.changes],
                "possible": self.possible.to_dict() if self.possible else None,
                "current": _side(self.current) if self.current else None,
                "noise": self.noise, "detectable": self.detectable,
                "runs_needed": self.runs_needed}


@dataclass
class Trend:
    """The verdicts of one group."""

    group: Group
    min_change: float
    verdicts: list[Verdict] = field(default_factory=list)

    @property
    def changes(self) -> list[Change]:
        """Every significant step of a series with a better direction, oldest first; at one
        run, metrics before rows."""
        return [c for c in self.all_changes if c.series.better != "neither"]

    @property
    def informational(self) -> list[Change]:
        """The steps of series with no better direction (counts of what happened: block
        operations, samples): reported, never a regression."""
        return [c for c in self.all_changes if c.series.better == "neither"]

    @property
    def all_changes(self) -> list[Change]:
        """Every significant step, oldest first; at one run, metrics before rows."""
        found = [c for v in self.verdicts for c in v.changes]
        return sorted(found, key=lambda c: (c.step.index, c.series.kind != "metric",
                                            -abs(c.step.change)))

    def to_dict(self) -> dict[str, Any]:
        """Return the JSON form."""
        g = self.group
        return {"workload": g.workload, "workload_id": g.workload_key, "machine": g.machine,
                "runs": [{"id": r.id, "started": r.started, "commit": r.commit,
                          "branch": r.branch, "dirty": r.dirty} for r in g.runs],
                "min_change": self.min_change, "alpha": changepoints.ALPHA,
                "verdicts": [v.to_dict() for v in self.verdicts]}


def _side(s: Side) -> dict[str, Any]:
    return {"mean": s.mean, "sd": s.sd, "n": s.n}


def series_of(group: Group) -> list[tuple[SeriesId, list[float | None]]]:
    """Return every series of a group: the metrics, then the rows."""
    out = [(SeriesId("metric", name, name, unit, layer, better), group.metrics[name])
           for name, (unit, layer, better) in sorted(group.metric_info.items())]
    for key, (name, unit, layer) in sorted(group.row_info.items(),
                                           key=lambda kv: (kv[1][2], kv[0])):
        # A row's primary value in time or bytes is what it cost: more is worse. A count
        # (samples, calls, block operations) says what happened, not how well.
        better = "lower" if unit in ("s", "B") else "neither"
        out.append((SeriesId("row", key, name, unit, layer, better), group.rows[key]))
    return out


def _present(values: Sequence[float | None]) -> tuple[list[int], list[float]]:
    where = [i for i, v in enumerate(values) if v is not None and math.isfinite(v)]
    return where, [float(values[i]) for i in where]  # type: ignore[arg-type]


#: Below this many values in all, the series are searched in this process; above it, by one
#: worker per usable CPU (each series is searched alone: the answers do not depend on it).
PARALLEL_FROM = 20_000


def _detect(job: tuple[list[float], float]) -> tuple[list[Step], Step | None]:
    return changepoints.detect(job[0], job[1])


def _detect_all(presents: list[list[float]], min_change: float
                ) -> list[tuple[list[Step], Step | None]]:
    """Search every series (the few below MIN_RUNS or constant are not asked)."""
    import os

    jobs = [(p, min_change) for p in presents]
    workers = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else 1
    if workers < 2 or len(jobs) < 2 * workers or sum(map(len, presents)) < PARALLEL_FROM:
        return [_detect(j) for j in jobs]
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor

    changepoints.prepare(max(map(len, presents)))
    with ProcessPoolExecutor(workers, mp_context=multiprocessing.get_context("fork")) as pool:
        return list(pool.map(_detect, jobs, chunksize=max(1, len(jobs) // (4 * workers))))


def analyse(group: Group, min_change: float = 0.05) -> Trend:
    """Return the verdict of every series of ``group``."""
    trend = Trend(group, min_change)
    every = series_of(group)
    searched = [(sid, values, *_present(values)) for sid, values in every]
    wanted = [present for _, _, _, present in searched
              if len(present) >= MIN_RUNS and max(present) != min(present)]
    answers = iter(_detect_all(wanted, min_change))
    for sid, values, where, present in searched:
        if len(present) < MIN_RUNS:
            trend.verdicts.append(Verdict(sid, UNSURE, list(values), [], None, None, None,
                                          MIN_RUNS))
            continue
        if max(present) == min(present):  # constant (a count that never moves)
            current = changepoints.side(present)
            trend.verdicts.append(Verdict(sid, STEADY, list(values), [], None, current, 0.0,
                                          None))
            continue
        steps, possible = next(answers)
        changes = [_place(group, sid, s, where, every) for s in steps]
        start = steps[-1].index if steps else 0
        segment = present[start:]
        current = changepoints.side(segment)
        smallest = changepoints.detectable(segment)
        needed = changepoints.runs_needed(segment, min_change)
        if changes:
            status = CHANGED
        elif possible is not None or smallest is None or smallest > min_change:
            status = UNSURE
        else:
            status = STEADY
        trend.verdicts.append(Verdict(
            sid, status, list(values), changes,
            _place(group, sid, possible, where, every) if possible else None, current,
            smallest, needed if smallest is None or smallest > min_change else None))
    return trend


def _place(group: Group, sid: SeriesId, step: Step, where: list[int],
           every: list[tuple[SeriesId, list[float | None]]]) -> Change:
    """Put a step found among a series' present values back among the group's runs, with
    the other series that stepped there."""
    run_index = where[step.index]
    first = where[step.index - step.before.n]
    last = where[step.index + step.after.n - 1]
    lead_delta = step.after.mean - step.before.mean
    movers = []
    for other, values in every:
        if other == sid:
            continue
        left = [v for v in values[first:run_index] if v is not None]
        right = [v for v in values[run_index:last + 1] if v is not None]
        if len(left) < 2 or len(right) < 2:
            continue
        diff, _, p = changepoints.welch(left, right)
        level = sum(left) / len(left)
        if p >= MOVED_P or not level:
            continue
        share = diff / lead_delta if other.unit == sid.unit and lead_delta else None
        movers.append(Mover(other, diff / level, diff, share, p))
    movers.sort(key=lambda m: (m.series.kind != "row",
                               -abs(m.share) if m.share is not None else 0.0, m.pvalue))
    rows = [m for m in movers if m.series.kind == "row"]
    layer = rows[0].series.layer if rows else (sid.layer if sid.kind == "row" else None)
    earliest = where[step.first] if step.first >= 0 else run_index
    latest = where[step.last] if step.last >= 0 else run_index
    return Change(sid, step, group.runs[run_index], group.runs[run_index - 1], movers, layer,
                  group.runs[earliest], group.runs[max(earliest - 1, 0)], group.runs[latest])


@dataclass(frozen=True)
class Judgement:
    """The gate's answer for one series: the newest run against its series' newest segment."""

    series: SeriesId
    value: float
    reference: Side  # the newest segment of the history, the newest run left out
    change: float  # relative
    pvalue: float  # of the newest value under the segment's spread (prediction, Student t)
    regression: bool
    note: str
    #: how much slower the machine was for the newest run than for the segment (the probes)
    machine: float | None = None

    def to_dict(self) -> dict[str, Any]:
        """Return the JSON form."""
        return {"series": self.series.to_dict(), "value": self.value,
                "reference": _side(self.reference), "change": self.change,
                "pvalue": self.pvalue, "regression": self.regression, "note": self.note,
                "machine_change": self.machine}


#: The gate's default significance: one new run against a segment (a single comparison).
GATE_ALPHA = 0.01
#: The smallest step that starts a new segment for the gate's reference.
GATE_SEGMENT_STEP = 0.01


def gate(group: Group, names: Sequence[str] | None, threshold: float,
         alpha: float = GATE_ALPHA) -> list[Judgement]:
    """Judge the group's newest run: for each gated series (``names``, else every metric that
    has a better direction), its value against the newest segment of the runs before it.

    A regression is a change in the worse direction beyond ``threshold`` (relative) that is
    beyond noise three ways: its p-value under the segment's spread (Student t) is below
    ``alpha`` shared among the series gated (Bonferroni: the job fails on one series out of
    many only as often as ``alpha`` says), and it is worse than every run of the segment (a
    spread with long tails, such as a few ms of system time, fools the t-test alone). And a
    time or rate stays beyond the threshold once the machine's own change is taken out (the
    probe each run times: a newest run on a machine 20% slower for the moment, with 20% more
    time, is the machine's doing, as ``perfstack diff`` judges it)."""
    gated = []
    for sid, values in series_of(group):
        if names is not None:
            if sid.key not in names:
                continue
        elif sid.kind != "metric" or sid.better == "neither":
            continue
        if values and values[-1] is not None:
            gated.append((sid, values))
    each = alpha / max(len(gated), 1)
    out = []
    for sid, values in gated:
        newest = float(values[-1])  # type: ignore[arg-type]
        where, past = _present(values[:-1])
        if len(past) < MIN_RUNS:
            out.append(Judgement(sid, newest, changepoints.side(past), math.nan, 1.0, False,
                                 f"{len(past)} runs before: needs {MIN_RUNS}"))
            continue
        steps, _ = changepoints.detect(past, GATE_SEGMENT_STEP)
        first = steps[-1].index if steps else 0
        segment = past[first:]
        ref = changepoints.side(segment)
        change = newest / ref.mean - 1 if ref.mean else math.nan
        p = _prediction_p(newest, ref)
        worse = sid.better != "neither" and (change > 0) == (sid.better == "lower")
        beyond_all = newest > max(segment) if sid.better == "lower" else newest < min(segment)
        big = abs(change) > threshold
        machine = _machine_change(group, sid, [where[i] for i in range(first, len(past))])
        fixed = corrected(change, machine, sid.unit)
        explained = machine is not None and not (abs(fixed) > threshold
                                                 and (fixed > 0) == (change > 0))
        regression = bool(worse and big and p < each and beyond_all and not explained)
        if regression:
            note = "REGRESSION"
        elif worse and big and explained and machine is not None:
            way = "slower" if machine > 0 else "faster"
            note = f"machine {abs(machine):.0%} {way}"  # the probe explains the change
        elif worse and big:
            note = "within noise"  # worse by more than the threshold, not beyond noise
        elif worse and p < each and beyond_all:
            note = "under threshold"  # beyond noise, but smaller than the threshold
        else:
            note = "ok"
        out.append(Judgement(sid, newest, ref, change, p, regression, note, machine))
    return out


def _machine_change(group: Group, sid: SeriesId, segment_runs: list[int]) -> float | None:
    """How much slower the machine was during the newest run than during the segment's runs
    (the probe every run times in its own process: wall-clock for the run's own figures,
    CPU-only for the others), or None without probes."""
    wall = sid.layer == "run"

    def speed(entry: Entry) -> float | None:
        return entry.speed_wall if wall else entry.speed_cpu

    newest = speed(group.runs[-1])
    before = [x for x in (speed(group.runs[i]) for i in segment_runs) if x]
    if not newest or not before:
        return None
    return newest / statistics.median(before) - 1


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
