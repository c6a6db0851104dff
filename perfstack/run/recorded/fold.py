"""A job's ranks folded as they are read: the parent holds what differs, not every rank.

``perfstack analyze`` reads each rank on a worker; what comes back is that rank's records.
:class:`JobFold` takes them as they arrive (:meth:`JobFold.add`) and keeps of each rank only
what the report needs of it: its metrics (step times, device figures), its facts, its share
of time in collectives (from its framework rows), and, from ``MANY_RANKS`` ranks on, its rows
folded into one row per key (``perfstack.report.rankfold``) and then dropped. Below
``MANY_RANKS`` ranks a job's rows stay one per rank, as they always did; the ranks read
before the job has that many are held until it does, then folded.

Folds merge (:meth:`JobFold.merge`): a worker folds the ranks it read, and the job's fold
takes each worker's in. What it gives (:meth:`JobFold.finish`) does not depend on the order
the ranks came in, nor on where they were folded: the report of a job is the same whether
its ranks were read in one process or on any number of workers.
"""

from __future__ import annotations

from collections import defaultdict
from typing import Any

from perfstack.analysis.distributed import op_seconds
from perfstack.analysis.primary import Primary
from perfstack.backend import Collected, Recorded
from perfstack.pluginmanager import BackendEntry
from perfstack.records import datarecord, field
from perfstack.report import Layer
from perfstack.report.rankfold import Position, RowFold
from perfstack.report.rankrows import MANY_RANKS
from perfstack.report.shared import Canon
from perfstack.run import assembly
from perfstack.run.recorded.reduce import UnitResult

#: rank -> (seconds in collective ops, seconds in all ops) of one source's framework rows
Shares = dict[int, tuple[float, float]]
#: rank -> (its first row's place, seconds in collective ops, seconds in all ops)
_Placed = dict[int, tuple[Position, float, float]]


@datarecord
class _Record:
    """One rank's records of one backend, its rows dropped once folded."""

    at: Position  # (unit index, record index): the order the report lists them in
    rank: int | None
    recorded: Recorded


@datarecord
class _Backend:
    """What one backend's ranks left in the fold."""

    records: list[_Record] = field(default_factory=list)
    fold: RowFold = field(default_factory=RowFold)
    #: what in its records does not fit the schema, with the record's place
    problems: list[tuple[Position, str]] = field(default_factory=list)
    #: source -> (its framework rows, the first one's place, each rank's shares)
    shares: dict[str, tuple[int, Position, _Placed]] = field(default_factory=dict)


@datarecord
class Folded:
    """The job as folded: per backend its records (rows merged from ``MANY_RANKS`` ranks),
    the facts of each rank, step times, collective shares and how rows were merged."""

    collected: dict[str, Collected]
    ranks: dict[str, list[int]]  # each backend's records' ranks, in order
    unranked: dict[str, list[int]]  # the ranks given to records whose files said none
    problems: dict[str, list[str]]
    recorded: dict[str, dict[str, Any]]  # "rankN" -> facts, for environment["recorded"]
    samples: dict[int, list[float]]  # each rank's step times
    shares: tuple[str, Shares]  # the source of the most framework rows, and its shares
    rows_across_ranks: dict[str, int] | None  # {"ranks", "merged_away"} once merged
    world: int | None


def _add_shares(into: _Placed, shares: _Placed) -> None:
    """Add each rank's seconds to ``into``, keeping the first place a rank's rows had."""
    for rank, (at, comm, total) in shares.items():
        was = into.get(rank, (at, 0.0, 0.0))
        into[rank] = (min(was[0], at), was[1] + comm, was[2] + total)


def declared_primary(backends: dict[str, BackendEntry]) -> dict[str, dict[str, str]]:
    """Each backend's primary value by row kind, as :class:`JobFold` takes it."""
    return {name: e.backend.primary_by_kind() for name, e in backends.items()
            if e.backend.primary_by_kind()}


class JobFold:
    """The running state of one job's reading."""

    def __init__(self, declared: dict[str, dict[str, str]]) -> None:
        """``declared``: each backend's primary value by row kind (``Backend.primary``),
        which says the time of each framework row (see :func:`declared_primary`)."""
        self.primary = Primary()
        self.primary.declared = dict(declared)
        self.backends: dict[str, _Backend] = {}
        self.folding = False  # rows folded (MANY_RANKS ranks with rows seen)
        self.with_rows: set[int] = set()  # ranks that had rows
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
                self._take(state, record)
        return UnitResult(result.unit, error=None, seconds=result.seconds)

    def _take(self, state: _Backend, record: _Record) -> None:
        """One ranked record: check it, note its shares, then fold or hold its rows."""
        assert record.rank is not None
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

    def _fold_held(self, states: list[_Backend] | None = None) -> None:
        """From MANY_RANKS ranks with rows on: fold the rows held so far (of ``states``:
        a fold already folding holds none of its own)."""
        self.folding = True
        for state in self.backends.values() if states is None else states:
            for record in state.records:
                if record.rank is not None and record.recorded.collected.rows:
                    self._fold(state, record)

    def merge(self, other: JobFold) -> None:
        """Take in another fold of other units (a worker's)."""
        folding = self.folding
        if other.world:
            self.world = max(self.world or 0, other.world)
        for name, theirs in other.backends.items():
            for record in theirs.records:
                self._share(record.recorded)
            mine = self.backends.get(name)
            if mine is None:
                self.backends[name] = theirs
                continue
            mine.records += theirs.records
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

    def _fold(self, state: _Backend, record: _Record) -> None:
        assert record.rank is not None
        for layer, rows in record.recorded.collected.rows.items():
            for i, row in enumerate(rows):
                state.fold.add(layer, row, record.rank, (*record.at, i))
        record.recorded.collected.rows = {}

    def _shares(self, state: _Backend, record: _Record) -> None:
        """The rank's seconds in collective ops and in all ops, per source of its framework
        rows, each op by its primary value (``perfstack.analysis.distributed``)."""
        assert record.rank is not None
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
                    self._take(state, record)
        every = {r.rank for s in self.backends.values() for r in s.records}
        multi = len(every) > 1
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
                assembly.merge_rank(out, record.recorded.collected, record.rank, prefix=multi)
                if record.recorded.environment:
                    recorded.setdefault(f"rank{record.rank}", {}).update(
                        record.recorded.environment)
                steps = next((m for m in record.recorded.collected.metrics
                              if m.samples_of == "steps" and m.unit == "s" and m.samples), None)
                if steps is not None and (record.rank not in samples
                                          or record.at < samples[record.rank][0]):
                    samples[record.rank] = (record.at, [float(t) for t in steps.samples or ()])
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
            samples={r: t for r, (_, t) in sorted(samples.items(), key=lambda kv: kv[1][0])},
            shares=shares,
            rows_across_ranks={"ranks": len(self.with_rows), "merged_away": merged_in - merged_out}
            if self.folding and merged_in > merged_out else None,
            world=self.world)

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
