"""Trends over the history: where each series stepped, which commits, which layer and rows.

A group is one workload on one machine (runs on different machines are never compared). Its
series are every metric and the top rows of each layer (their primary value). Each series gets
a verdict over its newest segment, the runs since its last significant step:

- **changed**: it has significant steps (``perfstack.history.changepoints``); each with the
  commit range it happened in, its size with a 95% interval, and the other series that
  stepped at the same run, ranked by how much of the step they explain (rows in seconds
  against a step in seconds), the layer being that of the row that explains most;
- **cannot tell yet**: a possible step that is not significant, or a newest segment too noisy or
  too short for a step of ``min_change`` to be seen (with the runs it would take);
- **no change**: neither.

``perfstack.history.gate`` judges the newest runs against the level before the latest change point.

A run disturbed by other programs on the machine (``perfstack.machine.load``: recorded per run
in the history) is set aside: it has no value in any series, and the text names it.
"""

from __future__ import annotations

import contextlib
import math
import signal
from collections.abc import Iterator, Sequence
from typing import Any

from perfstack.history import Entry, Group, changepoints
from perfstack.history.changepoints import Side, Step
from perfstack.records import datarecord, field

CHANGED, UNSURE, STEADY = "changed", "cannot tell yet", "no change"
#: A series with fewer runs than this gets "cannot tell yet".
MIN_RUNS = 2 * changepoints.MIN_SIDE
#: The significance of the workload's own figure (``Group.figure``): declared by the workload
#: before any run, it is a family of one; every other series is one of dozens searched, held
#: to changepoints.ALPHA.
FIGURE_ALPHA = 0.01
#: The p-value below which another series counts as having stepped with a change point.
MOVED_P = 0.01


@datarecord(frozen=True)
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


@datarecord(frozen=True)
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


@datarecord(frozen=True)
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
                "pvalue": s.pvalue, "before": side_dict(s.before),
                "after": side_dict(s.after),
                "worse": self.worse, "layer": self.layer,
                "movers": [m.to_dict() for m in self.movers]}


@datarecord(frozen=True)
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
                "current": side_dict(self.current) if self.current else None,
                "noise": self.noise, "detectable": self.detectable,
                "runs_needed": self.runs_needed}


@datarecord
class Trend:
    """The verdicts of one group."""

    group: Group
    min_change: float
    verdicts: list[Verdict] = field(default_factory=list)

    @property
    def set_aside(self) -> list[Entry]:
        """The runs left out of every series: disturbed by other programs on the machine."""
        return [r for r in self.group.runs if r.disturbed]

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
                          "branch": r.branch, "dirty": r.dirty, "disturbed": r.disturbed}
                         for r in g.runs],
                "min_change": self.min_change, "alpha": changepoints.ALPHA,
                "figure": g.figure, "figure_alpha": FIGURE_ALPHA,
                "verdicts": [v.to_dict() for v in self.verdicts]}


def side_dict(s: Side) -> dict[str, Any]:
    """Return a segment's mean, spread and count as JSON."""
    return {"mean": s.mean, "sd": s.sd, "n": s.n}


def series_of(group: Group) -> list[tuple[SeriesId, list[float | None]]]:
    """Return every series of a group: the metrics, then the rows; a run disturbed by other
    programs (``Entry.disturbed``) has no value in any of them (None: set aside)."""
    aside = [r.disturbed is not None for r in group.runs]

    def kept(values: list[float | None]) -> list[float | None]:
        return [None if out else v for v, out in zip(values, aside, strict=True)]

    out = [(SeriesId("metric", name, name, unit, layer, better), kept(group.metrics[name]))
           for name, (unit, layer, better) in sorted(group.metric_info.items())]
    for key, (name, unit, layer) in sorted(group.row_info.items(),
                                           key=lambda kv: (kv[1][2], kv[0])):
        # A row's primary value in time or bytes is what it cost: more is worse. A count
        # (samples, calls, block operations) says what happened, not how well.
        better = "lower" if unit in ("s", "B") else "neither"
        out.append((SeriesId("row", key, name, unit, layer, better), kept(group.rows[key])))
    return out


def present_values(values: Sequence[float | None]) -> tuple[list[int], list[float]]:
    """Return where a series has finite values, and those values."""
    where = [i for i, v in enumerate(values) if v is not None and math.isfinite(v)]
    return where, [float(values[i]) for i in where]  # type: ignore[arg-type]


#: Below this many values in all, the series are searched in this process; above it, by one
#: worker per usable CPU (each series is searched alone: the answers do not depend on it).
PARALLEL_FROM = 20_000


def _detect(job: tuple[list[float], float, float]) -> tuple[list[Step], Step | None]:
    return changepoints.detect(job[0], job[1], alpha=job[2])


def _detect_all(presents: list[list[float]], min_change: float, alphas: list[float]
                ) -> list[tuple[list[Step], Step | None]]:
    """Search every series (the few below MIN_RUNS or constant are not asked)."""
    import os

    jobs = [(p, min_change, a) for p, a in zip(presents, alphas, strict=True)]
    workers = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else 1
    if workers < 2 or len(jobs) < 2 * workers or sum(map(len, presents)) < PARALLEL_FROM:
        return [_detect(j) for j in jobs]
    import multiprocessing

    changepoints.prepare(max(map(len, presents)))
    # Ctrl-C reaches the whole process group: the workers leave it to this process, which
    # stops them all (a pool left to shut down by itself waited on them, and a second Ctrl-C
    # left it hung).
    # SIGINT is held back while the workers start (a worker forked before its initializer
    # ran died of a Ctrl-C with the task queue's lock, and terminate() then waited on the
    # pool for ever: 3 in 30 Ctrl-Cs that came as the workers started) and while they are
    # stopped (a second Ctrl-C there left the stopping half done); a Ctrl-C held back is
    # raised when it is let through.
    with _sigint_held():
        pool = multiprocessing.get_context("fork").Pool(workers, initializer=_leave_signals)
    try:
        found = pool.map(_detect, jobs, chunksize=max(1, len(jobs) // (4 * workers)))
    except BaseException:
        with _sigint_held():
            pool.terminate()
            pool.join()
        raise
    pool.close()
    pool.join()
    return found


@contextlib.contextmanager
def _sigint_held() -> Iterator[None]:
    """Hold SIGINT back in this thread for the block; one that came meanwhile is raised at
    its end."""
    signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT})


def _leave_signals() -> None:
    """In a worker (started with SIGINT held back): Ctrl-C and SIGHUP are the parent's to act
    on (it stops the workers)."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGHUP, signal.SIG_IGN)
    signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT})


def alpha_of(group: Group, sid: SeriesId) -> float:
    """The significance a series' steps are held to."""
    return FIGURE_ALPHA if sid.kind == "metric" and sid.key == group.figure \
        else changepoints.ALPHA


def analyse(group: Group, min_change: float = 0.05) -> Trend:
    """Return the verdict of every series of ``group``."""
    trend = Trend(group, min_change)
    every = series_of(group)
    searched = [(sid, values, *present_values(values)) for sid, values in every]
    asked = [(sid, present) for sid, _, _, present in searched
             if len(present) >= MIN_RUNS and max(present) != min(present)]
    answers = iter(_detect_all([p for _, p in asked], min_change,
                               [alpha_of(group, sid) for sid, _ in asked]))
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
