"""A big job's per-rank figures as columns: a float a rank, not a metric a rank.

Each rank of a job publishes its own figures (``gpu_busy``, ``torch_step_time``, ...), which
a report of a few ranks lists one per rank (``gpu_busy[rank3]``). From ``BIG_JOB`` ranks on
the parent would hold tens of thousands of such metrics; :class:`RankColumns` folds them
instead, a rank at a time, into one column per figure (each rank's value, its unknowns with
why) and keeps whole only the ranks that stand out: the least and the most of each figure,
with every figure of theirs as they published it. Two folds of different ranks merge
(:meth:`RankColumns.merge`), and what they give does not depend on the order of the ranks.

What the report carries of a big job (``environment["across_ranks"]``, :meth:`summary`):
each figure's distribution over every rank (how many knew it, the mean, median, p90, least
and most with their ranks), exact, not sketched; each rank's step times (the heat map's);
and the ranks kept whole, whose figures are listed as a small job's are.
"""

from __future__ import annotations

import math
import re
import statistics
from array import array
from typing import Any

from perfstack.records import datarecord, field, replace
from perfstack.report.measures import Better, Metric
from perfstack.report.units import nearest_rank, numeric

#: From this many ranks with figures a job's per-rank figures are folded into columns.
BIG_JOB = 128
#: Per-rank figures whose samples the job's analysis reads across ranks (each rank's
#: collectives, aligned by ``perfstack.analysis.job.collectivesplit``): kept for every rank.
WHOLE_SAMPLES = re.compile(r"^gpu_collective(s|_bytes)\[")
#: Figures a rank stands out by that the report does not list as its own (a share of time
#: the job's analysis computes from its rows, ...): their names begin with it.
HIDDEN = "\0"
#: Where a rank's record was among the job's (unit index, record index): ties of "the first"
#: are broken by it.
Position = tuple[int, ...]


def is_steps(metric: Metric) -> bool:
    """Whether ``metric`` is a rank's step times (the first such of a rank is its steps)."""
    return metric.samples_of == "steps" and metric.unit == "s" and bool(metric.samples)


@datarecord
class Column:
    """One per-rank figure over the ranks folded so far."""

    first: Position  # where the figure first appeared: its place among the figures
    template: Metric  # the first rank's metric (its unit, texts), without value or samples
    ranks: array[int] = field(default_factory=lambda: array("q"))
    values: array[float] = field(default_factory=lambda: array("d"))  # NaN: unknown
    reasons: dict[int, str] = field(default_factory=dict)  # why, of the ranks unknown
    samples: dict[int, list[float]] = field(default_factory=dict)  # WHOLE_SAMPLES only
    #: (value, rank) as ``min``/``max`` of such pairs pick them: a tie goes to the lower rank
    #: for the least, to the higher for the most
    low: tuple[float, int] | None = None
    high: tuple[float, int] | None = None
    backends: set[str] = field(default_factory=set)  # the backends that published it

    def add(self, rank: int, metric: Metric, at: Position) -> None:
        """Take one rank's value of the figure."""
        if at < self.first:
            self.first, self.template = at, _template(metric)
        value = numeric(metric.value)
        self.ranks.append(rank)
        if value is None or math.isnan(value):
            self.values.append(math.nan)
            self.reasons[rank] = metric.reason or "unknown"
        else:
            self.values.append(value)
            pair = (value, rank)
            self.low = pair if self.low is None else min(self.low, pair)
            self.high = pair if self.high is None else max(self.high, pair)
        if metric.samples and WHOLE_SAMPLES.match(metric.name):
            self.samples[rank] = [float(s) for s in metric.samples]

    def merge(self, other: Column) -> None:
        """Take in the same figure of other ranks."""
        if other.first < self.first:
            self.first, self.template = other.first, other.template
        self.ranks.extend(other.ranks)
        self.values.extend(other.values)
        self.reasons.update(other.reasons)
        self.samples.update(other.samples)
        self.backends |= other.backends
        for pair in (other.low, other.high):
            if pair is not None:
                self.low = pair if self.low is None else min(self.low, pair)
                self.high = pair if self.high is None else max(self.high, pair)

    def by_rank(self) -> dict[int, float]:
        """Each rank's known value."""
        return {r: v for r, v in zip(self.ranks, self.values, strict=True) if not math.isnan(v)}

    def stats(self) -> dict[str, Any]:
        """The figure's distribution over its ranks, as the report carries it."""
        t = self.template
        known = sorted(v for v in self.values if not math.isnan(v))
        out: dict[str, Any] = {"name": t.name, "unit": t.unit, "layer": t.layer,
                               "source": t.source, "better": t.better.value,
                               "ranks": len(self.values), "known": len(known)}
        if t.detail:
            out["detail"] = True
        if t.description:
            out["description"] = t.description
        if known and self.low is not None and self.high is not None:
            out.update({"mean": math.fsum(known) / len(known),
                        "median": statistics.median(known), "p90": nearest_rank(known, 0.9),
                        "min": self.low[0], "min_rank": self.low[1],
                        "max": self.high[0], "max_rank": self.high[1]})
        if self.reasons:
            first = min(self.reasons)
            out["reason"] = f"rank {first}: {self.reasons[first]}"
        return out


def _template(metric: Metric) -> Metric:
    """A figure's texts without one rank's value or samples."""
    return replace(metric, value=None, samples=None, reason=None)


@datarecord
class Whole:
    """A rank kept whole: one record's figures, as the rank published them."""

    backend: str
    at: Position
    metrics: list[Metric]
    files: dict[str, str] = field(default_factory=dict)  # its artifacts: label -> path


class RankColumns:
    """The per-rank figures of a job's ranks, a column each, and the ranks that stand out."""

    def __init__(self) -> None:
        """An empty fold."""
        self.columns: dict[str, Column] = {}
        self.steps: dict[int, tuple[Position, array[float]]] = {}  # each rank's step times
        self.whole: dict[int, list[Whole]] = {}  # the ranks standing out
        self.derived: list[str] = []  # figures computed across ranks (see ``derive``)

    def add(self, backend: str, rank: int, metrics: list[Metric], at: Position,
            standing: dict[str, float] | None = None,
            files: dict[str, str] | None = None) -> None:
        """Fold one record's figures of ``rank`` (``at``: the record's place in the job);
        ``standing``: figures the job's analysis computes later, by which the rank may stand
        out (kept whole at their extremes, not listed); ``files``: the record's artifacts,
        listed for a rank kept whole (every rank's files are the report's ``analyzed``)."""
        steps = next((m for m in metrics if is_steps(m)), None)
        if steps is not None and (rank not in self.steps or at < self.steps[rank][0]):
            self.steps[rank] = (at, array("d", (float(s) for s in steps.samples or ())))
        for i, metric in enumerate(metrics):
            column = self.columns.get(metric.name)
            if column is None:
                column = self.columns[metric.name] = Column((*at, i), _template(metric))
            column.add(rank, metric, (*at, i))
            column.backends.add(backend)
        for name, value in (standing or {}).items():
            hidden = HIDDEN + name
            column = self.columns.get(hidden)
            if column is None:
                column = self.columns[hidden] = Column((*at, len(metrics)), Metric(
                    hidden, None, "", "run", "perfstack", Better.NEITHER))
            column.add(rank, replace(column.template, value=value), (*at, len(metrics)))
        if metrics or standing:
            self.whole.setdefault(rank, []).append(Whole(backend, at, metrics, files or {}))
            self._prune()

    def merge(self, other: RankColumns) -> None:
        """Take in a fold of other ranks."""
        for name, column in other.columns.items():
            if name in self.columns:
                self.columns[name].merge(column)
            else:
                self.columns[name] = column
        for rank, (at, times) in other.steps.items():
            if rank not in self.steps or at < self.steps[rank][0]:
                self.steps[rank] = (at, times)
        for rank, wholes in other.whole.items():
            self.whole.setdefault(rank, []).extend(wholes)
        self._prune()

    def drop(self, backends: set[str]) -> None:
        """Leave out what only ``backends`` published (a backend whose records do not fit
        the schema is left out of the report whole)."""
        for name in [n for n, c in self.columns.items() if c.backends and c.backends <= backends]:
            del self.columns[name]
        for rank in list(self.whole):
            self.whole[rank] = [w for w in self.whole[rank] if w.backend not in backends]
            if not self.whole[rank]:
                del self.whole[rank]

    def standing_out(self) -> set[int]:
        """The ranks at either end of some figure."""
        return {pair[1] for c in self.columns.values() for pair in (c.low, c.high)
                if pair is not None}

    def _prune(self) -> None:
        keep = self.standing_out()
        for rank in [r for r in self.whole if r not in keep]:
            del self.whole[rank]

    def ranks(self) -> int:
        """How many ranks published a figure."""
        return len({r for c in self.columns.values() for r in c.ranks})

    def names(self) -> list[str]:
        """The figures the report lists, in the order they first appeared."""
        return sorted((n for n in self.columns if not n.startswith(HIDDEN)),
                      key=lambda n: self.columns[n].first)

    def ends(self, name: str) -> set[int]:
        """The ranks of figure ``name``'s least and most."""
        column = self.columns.get(name)
        return {p[1] for p in (column.low, column.high) if p is not None} if column else set()

    def values(self, name: str) -> dict[int, float]:
        """Each rank's known value of figure ``name``."""
        column = self.columns.get(name)
        return column.by_rank() if column is not None else {}

    def samples(self) -> list[tuple[str, int, list[float]]]:
        """(figure, rank, samples) of the figures whose samples are kept for every rank."""
        return [(f"{name}[rank{rank}]", rank, samples)
                for name in self.names() for rank, samples in
                sorted(self.columns[name].samples.items())]

    def step_times(self) -> dict[int, array[float]]:
        """Each rank's step times, in rank order."""
        return {r: t for r, (_, t) in sorted(self.steps.items())}

    def derive(self, template: Metric, values: dict[int, float]) -> None:
        """Add a figure computed across ranks (each rank's collective wait, ...): a column
        like the ranks' own, after them."""
        last = max((c.first for c in self.columns.values()), default=(0,))
        column = Column((*last, len(self.derived) + 1), _template(template))
        for rank, value in sorted(values.items()):
            column.add(rank, replace(template, value=value), column.first)
        self.columns[template.name] = column
        self.derived.append(template.name)

    def kept(self) -> list[tuple[int, Whole]]:
        """The ranks kept whole, each record of theirs in the job's order."""
        return sorted(((r, w) for r, ws in self.whole.items() for w in ws),
                      key=lambda rw: (rw[1].at, rw[0]))

    def summary(self) -> dict[str, Any]:
        """What the report carries of the job's ranks (``environment["across_ranks"]``)."""
        steps = self.step_times()
        return {"ranks": self.ranks(), "kept": sorted(self.whole),
                "figures": [self.columns[n].stats() for n in self.names()],
                "steps": {"ranks": list(steps), "times": [list(t) for t in steps.values()]}}
