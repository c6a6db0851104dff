"""A job's ranks folded as they are read: the parent holds what differs, not every rank.

``perfstack analyze`` reads each rank on a worker; what comes back is that rank's records.
:class:`JobFold` takes them as they arrive (:meth:`JobFold.add`) and keeps of each rank only
what the report needs of it: its metrics (step times, device figures), its facts, its share
of time in collectives (from its framework rows), and, from ``MANY_RANKS`` ranks on, its rows
folded into one row per key (``perfstack.report.job.rankfold``) and then dropped. Below
``MANY_RANKS`` ranks a job's rows stay one per rank, as they always did; the ranks read
before the job has that many are held until it does, then folded. Likewise its figures: from
``BIG_JOB`` ranks on they are folded into a column each (``perfstack.report.job.rankcolumns``), a
float a rank, and only the ranks that stand out are kept whole.

Folds merge (:meth:`JobFold.merge`): a worker folds the ranks it read, and the job's fold
takes each worker's in. What it gives (:meth:`JobFold.finish`) does not depend on the order
the ranks came in, nor on where they were folded: the report of a job is the same whether
its ranks were read in one process or on any number of workers.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from perfstack.analysis.job.distributed import collective_wait, communication_share, op_seconds
from perfstack.analysis.primary import Primary
from perfstack.plugin.backend import Collected, Recorded
from perfstack.plugin.manager import BackendEntry
from perfstack.records import datarecord, field
from perfstack.report import Layer, Metric
from perfstack.report.job.canon import Canon
from perfstack.report.job.rankcolumns import BIG_JOB, RankColumns, is_steps
from perfstack.report.job.rankfold import Position, RowFold
from perfstack.report.job.rankrows import MANY_RANKS
from perfstack.report.units import numeric
from perfstack.run import assembly
from perfstack.run.recorded.rankextras import Rest
from perfstack.run.recorded.reduce import UnitResult

#: rank -> (seconds in collective ops, seconds in all ops) of one source's framework rows
Shares = dict[int, tuple[float, float]]
#: rank -> (its first row's place, seconds in collective ops, seconds in all ops)
_Placed = dict[int, tuple[Position, float, float]]


class _Record:
    """One rank's records of one backend, its rows dropped once folded (slotted: a job of
    thousands of ranks holds one a rank)."""

    __slots__ = ("at", "rank", "recorded")

    def __init__(self, at: Position, rank: int | None, recorded: Recorded | None) -> None:
        """``at``: (unit index, record index), the order the report lists them in;
        ``recorded``: None once a big job's record is folded whole (its rows, figures, and
        the rest in ``_Rest``)."""
        self.at = at
        self.rank = rank
        self.recorded = recorded


@datarecord
class _Backend:
    """What one backend's ranks left in the fold."""

    records: list[_Record] = field(default_factory=list)
    fold: RowFold = field(default_factory=RowFold)
    #: what in its records does not fit the schema, with the record's place
    problems: list[tuple[Position, str]] = field(default_factory=list)
    #: source -> (its framework rows, the first one's place, each rank's shares)
    shares: dict[str, tuple[int, Position, _Placed]] = field(default_factory=dict)
    rest: Rest = field(default_factory=Rest)


@datarecord
class Folded:
    """The job as folded: per backend its records (rows merged from ``MANY_RANKS`` ranks),
    the facts of each rank, step times, collective shares and how rows were merged."""

    collected: dict[str, Collected]
    ranks: dict[str, list[int]]  # each backend's records' ranks, in order
    unranked: dict[str, list[int]]  # the ranks given to records whose files said none
    problems: dict[str, list[str]]
    recorded: dict[str, dict[str, Any]]  # "rankN" -> facts, for environment["recorded"]
    samples: Mapping[int, Sequence[float]]  # each rank's step times
    shares: tuple[str, Shares]  # the source of the most framework rows, and its shares
    rows_across_ranks: dict[str, int] | None  # {"ranks", "merged_away"} once merged
    world: int | None
    #: a job of BIG_JOB ranks or more: its per-rank figures, a column each (the ranks kept
    #: whole are in ``collected``, the others' figures only here)
    columns: RankColumns | None = None


def _add_shares(into: _Placed, shares: _Placed) -> None:
    """Add each rank's seconds to ``into``, keeping the first place a rank's rows had."""
    for rank, (at, comm, total) in shares.items():
        was = into.get(rank, (at, 0.0, 0.0))
        into[rank] = (min(was[0], at), was[1] + comm, was[2] + total)


def _standing(state: _Backend, rank: int, metrics: list[Metric]) -> dict[str, float]:
    """The figures across ranks a rank may stand out by, as far as its own records say:
    its share of op time in collectives (each source of framework rows), its collective
    wait (``perfstack.analysis.job.distributed``); kept whole where it is their least or most."""
    out = {}
    for source, (_, _, placed) in state.shares.items():
        if rank in placed and placed[rank][2] > 0:
            out[f"communication_share:{source}"] = communication_share(*placed[rank][1:])
    comm = next((numeric(m.value) for m in metrics if m.name == "gpu_comm_time"), None)
    steps = next((m.samples for m in metrics if is_steps(m)), None)
    wait = collective_wait(comm, steps) if comm is not None and steps else None
    if wait is not None:
        out["collective_wait"] = wait
    return out


def declared_primary(backends: dict[str, BackendEntry]) -> dict[str, dict[str, str]]:
    """Each backend's primary value by row kind, as :class:`JobFold` takes it."""
    return {name: e.backend.primary_by_kind() for name, e in backends.items()
            if e.backend.primary_by_kind()}


class JobFold:
    """The running state of one job's reading."""

    def __init__(self, declared: dict[str, dict[str, str]], big: bool = False) -> None:
        """``declared``: each backend's primary value by row kind (``Backend.primary``),
        which says the time of each framework row (see :func:`declared_primary`); ``big``:
        the job is known to be big (BIG_JOB units or more), its figures folded into columns
        from the first rank (a worker's batch of a few ranks too: no figure travels whole)."""
        self.primary = Primary()
        self.primary.declared = dict(declared)
        self.backends: dict[str, _Backend] = {}
        self.folding = False  # rows folded (MANY_RANKS ranks with rows seen)
        self.with_rows: set[int] = set()  # ranks that had rows
        self.big = big  # figures folded into columns (BIG_JOB ranks with figures seen)
        self.with_metrics: set[int] = set()  # ranks that had figures
        self.columns = RankColumns()
        self.world: int | None = None
        self.canon = Canon()  # what the ranks repeat, held once

    def __getstate__(self) -> dict[str, Any]:
        """What a worker's fold sends: all but its canon (the parent has its own)."""
        return {k: v for k, v in self.__dict__.items() if k != "canon"}

    def __setstate__(self, state: dict[str, Any]) -> None:
        """A fold received from a worker, with a canon of its own."""
        self.__dict__.update(state)
        self.canon = Canon()

    def _share(self, recorded: Recorded) -> None:
        """The record's facts and its metrics' texts, shared with the other ranks'."""
        recorded.environment = self.canon.facts(recorded.environment)
        recorded.collected.notes = [self.canon.same(n) for n in recorded.collected.notes]
        for metric in recorded.collected.metrics:
            self.canon.metric(metric)

    def add(self, index: int, result: UnitResult) -> UnitResult:
        """Take unit ``index``'s records in; return its result without them (its rows
        folded or held, the rest kept here)."""
        if result.error is not None or not result.records:
            return result
        state = self.backends.setdefault(result.unit.backend, _Backend())
        for j, item in enumerate(result.records):
            if item.world:
                self.world = max(self.world or 0, item.world)
            self._share(item)
            record = _Record((index, j), item.rank, item)
            state.records.append(record)
            if item.rank is not None:
                self._take(result.unit.backend, state, record)
        return UnitResult(result.unit, error=None, seconds=result.seconds)

    def _take(self, name: str, state: _Backend, record: _Record) -> None:
        """One ranked record: check it, note its shares, then fold or hold its rows and its
        figures."""
        assert record.rank is not None and record.recorded is not None
        collected = record.recorded.collected
        problems = assembly.malformed(collected)
        if problems:
            state.problems += [(record.at, p) for p in problems]
            collected.rows = {}
            return
        self._shares(state, record)
        if any(collected.rows.values()):
            self.with_rows.add(record.rank)
        if self.folding:
            self._fold(state, record)
        elif len(self.with_rows) >= MANY_RANKS:
            self._fold_held()
        if collected.metrics:
            self.with_metrics.add(record.rank)
        if self.big:
            self._columnize(name, record)
        elif len(self.with_metrics) >= BIG_JOB:
            self._columnize_held()

    def _columnize_held(self, names: list[str] | None = None) -> None:
        """From BIG_JOB ranks with figures on: fold the figures held so far (of the backends
        ``names``: a fold already big holds none of its own)."""
        self.big = True
        for name in self.backends if names is None else names:
            for record in self.backends[name].records:
                self._columnize(name, record)

    def _columnize(self, name: str, record: _Record) -> None:
        """A big job's ranked record: its figures into the columns, then the rest of it (its
        rows too, when folded) into the backend's ``_Rest``."""
        if record.rank is None or record.recorded is None:
            return
        collected = record.recorded.collected
        state = self.backends[name]
        if collected.metrics:
            self.columns.add(name, record.rank, collected.metrics, record.at,
                             _standing(state, record.rank, collected.metrics),
                             {label: str(path) for label, path in collected.artifacts.items()})
            collected.metrics = []
        self._strip(state, record)

    def _strip(self, state: _Backend, record: _Record) -> None:
        """Move what the report lists of a big job's record, besides rows and figures, into
        ``state.rest``; drop the record once it holds nothing else."""
        assert record.rank is not None and record.recorded is not None
        state.rest.take(record.rank, record.at, record.recorded)
        collected = record.recorded.collected
        if not any(collected.rows.values()) and not collected.metrics:
            record.recorded = None

    def _fold_held(self, states: list[_Backend] | None = None) -> None:
        """From MANY_RANKS ranks with rows on: fold the rows held so far (of ``states``:
        a fold already folding holds none of its own)."""
        self.folding = True
        for state in self.backends.values() if states is None else states:
            for record in state.records:
                if record.rank is not None and record.recorded is not None \
                        and record.recorded.collected.rows:
                    self._fold(state, record)

    def merge(self, other: JobFold) -> None:
        """Take in another fold of other units (a worker's)."""
        folding, big = self.folding, self.big
        if other.world:
            self.world = max(self.world or 0, other.world)
        for name, theirs in other.backends.items():
            for record in theirs.records:
                if record.recorded is not None:
                    self._share(record.recorded)
            mine = self.backends.get(name)
            if mine is None:
                self.backends[name] = theirs
                continue
            mine.records += theirs.records
            mine.rest.merge(theirs.rest)
            mine.fold.merge(theirs.fold)
            mine.problems += theirs.problems
            for source, (count, first, shares) in theirs.shares.items():
                was_count, was_first, was = mine.shares.get(source, (0, first, {}))
                _add_shares(was, shares)
                mine.shares[source] = (was_count + count, min(was_first, first), was)
        self.with_rows |= other.with_rows
        if folding:  # only the other's records can hold rows
            self._fold_held([self.backends[name] for name in other.backends])
        elif other.folding or len(self.with_rows) >= MANY_RANKS:
            self._fold_held()
        self.columns.merge(other.columns)
        self.with_metrics |= other.with_metrics
        if big:  # only the other's records can hold figures
            self._columnize_held(list(other.backends))
        elif other.big or len(self.with_metrics) >= BIG_JOB:
            self._columnize_held()

    def _fold(self, state: _Backend, record: _Record) -> None:
        assert record.rank is not None and record.recorded is not None
        for layer, rows in record.recorded.collected.rows.items():
            for i, row in enumerate(rows):
                state.fold.add(layer, row, record.rank, (*record.at, i))
        record.recorded.collected.rows = {}
        if self.big and not record.recorded.collected.metrics:
            self._strip(state, record)

    def _shares(self, state: _Backend, record: _Record) -> None:
        """The rank's seconds in collective ops and in all ops, per source of its framework
        rows, each op by its primary value (``perfstack.analysis.job.distributed``)."""
        assert record.rank is not None and record.recorded is not None
        for i, row in enumerate(record.recorded.collected.rows.get(Layer.FRAMEWORK, [])):
            at = (*record.at, i)
            count, first, shares = state.shares.get(row.source, (0, at, {}))
            state.shares[row.source] = (count + 1, min(first, at), shares)
            seconds = op_seconds(row, self.primary)
            if seconds is not None:
                _add_shares(shares, {record.rank: (at, *seconds)})

    def finish(self) -> Folded:
        """Give the records whose files said no rank the numbers their backend's ranks left
        free, in order, and return the job as folded."""
        unranked: dict[str, list[int]] = {}
        for name, state in self.backends.items():
            state.records.sort(key=lambda r: r.at)
            used = {r.rank for r in state.records if r.rank is not None}
            spare = (n for n in range(len(state.records) + len(used) + 1) if n not in used)
            for record in state.records:
                if record.rank is None:
                    record.rank = next(spare)
                    unranked.setdefault(name, []).append(record.rank)
                    self._take(name, state, record)
        every = {r.rank for s in self.backends.values() for r in s.records}
        multi = len(every) > 1
        failed = {name for name, state in self.backends.items() if state.problems}
        if self.big and failed:  # (their figures are not in the report: nor across ranks)
            self.columns.drop(failed)
        order = sorted(self.backends, key=lambda n: self.backends[n].records[0].at)
        collected: dict[str, Collected] = {}
        recorded: dict[str, dict[str, Any]] = {}
        samples: dict[int, tuple[Position, list[float]]] = {}
        merged_in = merged_out = 0
        for name in order:
            state = self.backends[name]
            out = Collected()
            for record in state.records:
                assert record.rank is not None
                if self.big and record.recorded is not None:
                    self._strip(state, record)  # (its rows or figures, if any, left)
                if record.recorded is None:
                    continue
                assembly.merge_rank(out, record.recorded.collected, record.rank, prefix=multi)
                facts, key = record.recorded.environment, f"rank{record.rank}"
                if facts:  # (shared with the ranks of equal facts while no other adds to it)
                    recorded[key] = {**recorded[key], **facts} if key in recorded else facts
                steps = next((m for m in record.recorded.collected.metrics if is_steps(m)),
                             None)
                if steps is not None and (record.rank not in samples
                                          or record.at < samples[record.rank][0]):
                    samples[record.rank] = (record.at, [float(t) for t in steps.samples or ()])
            if self.big:
                state.rest.listed(out, recorded)
            for rank, whole in self.columns.kept() if self.big else ():
                if whole.backend == name:  # a rank that stands out, listed as in a small job
                    for metric in whole.metrics:
                        metric.name = f"{metric.name}[rank{rank}]"
                        out.metrics.append(metric)
                    out.artifacts.update({f"{label}.rank{rank}": Path(path)
                                          for label, path in whole.files.items()})
            if self.folding:
                folded = state.fold.rows()
                for layer, rows in folded.items():
                    out.rows.setdefault(layer, []).extend(row for _, row in rows)
                merged_in += state.fold.rows_in
                merged_out += sum(len(rows) for rows in folded.values())
            collected[name] = out
        shares = self._chosen_shares()
        return Folded(
            collected=collected,
            ranks={n: [r.rank for r in s.records if r.rank is not None]
                   for n, s in self.backends.items()},
            unranked=unranked,
            problems={n: [p for _, p in sorted(s.problems, key=lambda ap: ap[0])]
                      for n, s in self.backends.items() if s.problems},
            recorded=recorded,
            samples=self.columns.step_times() if self.big else
            {r: t for r, (_, t) in sorted(samples.items(), key=lambda kv: kv[1][0])},
            shares=shares,
            rows_across_ranks={"ranks": len(self.with_rows), "merged_away": merged_in - merged_out}
            if self.folding and merged_in > merged_out else None,
            world=self.world, columns=self.columns if self.big else None)

    def _chosen_shares(self) -> tuple[str, Shares]:
        """The source of the most framework rows (the first such, on a tie) and its ranks'
        shares of time in collectives, those with op time."""
        counts: dict[str, list[Any]] = defaultdict(lambda: [0, None, {}])
        for state in self.backends.values():
            if state.problems:
                continue
            for source, (count, first, shares) in state.shares.items():
                entry = counts[source]
                entry[0] += count
                entry[1] = first if entry[1] is None else min(entry[1], first)
                _add_shares(entry[2], shares)
        if not counts:
            return "", {}
        source = min(counts, key=lambda s: (-counts[s][0], counts[s][1]))
        placed = sorted(counts[source][2].items(), key=lambda kv: kv[1][0])  # rows' order
        return source, {r: (comm, total) for r, (_, comm, total) in placed if total > 0}
