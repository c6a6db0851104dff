"""Reading a job's recorded files where a worker can, and only the records travelling back.

Each backend splits the files it recognized into units read independently, one per rank or
process (``Backend.analysis_units``); each unit is read by one ``Backend.analyze`` call
through an executor (``perfstack.run.recorded.executors``): in this process, a local pool, or a Dask
cluster. What comes back is the unit's records (rows, metrics, step times), never its events.
Given a fold (``Fold``: the job's, ``perfstack.run.recorded.fold``), a worker reads a batch of
units and folds them where it read them; what comes back is the batch's fold, which is
merged into the job's: the same reduction on every worker and here, so that many small ranks
cost one message a batch, not one a rank, and this process never holds every rank's records.

One unit never sinks the others: a unit whose files cannot be read (``ValueError``), whose
reader raised, or whose worker died is marked with why, and the rest is read. A local pool
that breaks (a worker killed: the out-of-memory killer, a crash in a native reader) is
replaced and the units it had not finished are read again, then one worker each, so that
the unit that kills its worker is the only one lost. Ctrl-C cancels what has not started;
what was read makes the partial report.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import Executor, Future, as_completed
from concurrent.futures.process import BrokenProcessPool
from pathlib import Path
from typing import Any, NamedTuple, Protocol

from perfstack import signals
from perfstack.plugin.backend import Backend, Recorded
from perfstack.plugin.calls import call
from perfstack.records import datarecord, field
from perfstack.run.recorded import clustermerge
from perfstack.run.recorded.executors import json_bytes, stop_children


class Unit(NamedTuple):
    """Files of one backend read together: one rank's or process's (a tuple: a job of
    thousands of ranks holds one a rank)."""

    backend: str
    files: tuple[Path, ...]
    size: int | None = None  # its files' JSON in bytes (``unit_bytes``); None: not measured


@datarecord
class UnitResult:
    """A unit's records, or why it has none."""

    unit: Unit
    records: list[Recorded] = field(default_factory=list)
    error: str | None = None  # one line: why the unit was not read
    bad_input: bool = False  # its files cannot be read (not a reader's bug)
    traceback: str | None = None
    seconds: float = 0.0  # reading it, where it was read


@datarecord
class Reduced:
    """The units' results, in the units' order, and whether Ctrl-C stopped the reading. A
    unit read and folded whole (nothing left of its result but that it was read) is only
    counted: a job of thousands of ranks holds no result a rank."""

    results: list[UnitResult]  # the units not read, and those whose records were kept
    interrupted: bool = False
    retried: int = 0  # units read again after their worker pool broke
    wall_s: float = 0.0  # from the first unit submitted to the last one back
    folded: int = 0  # units read and folded whole, not in ``results``
    folded_s: float = 0.0  # their reading time, summed

    def read(self) -> int:
        """How many units were read."""
        return self.folded + sum(r.error is None for r in self.results)

    def seconds(self) -> float:
        """The units' reading time, summed, where each was read."""
        return self.folded_s + sum(r.seconds for r in self.results)


#: Told (done, total, seconds so far) after each unit.
Progress = Callable[[int, int, float], None]


class Fold(Protocol):
    """A reduction of the units' results: takes each as it is read, and another fold of
    other units (made by the same factory on a worker)."""

    def add(self, index: int, result: UnitResult) -> UnitResult:
        """Take unit ``index``'s result; return what is left to keep of it."""

    def merge(self, other: Any) -> None:
        """Take in another fold's units."""


#: A unit (its index) and the batch of them one worker reads.
Batch = list[tuple[int, "Unit"]]
#: Units a batch holds at most; the JSON a batch is filled to (a rank that size is a batch
#: of its own: its reading dwarfs a message); batches each worker gets at least (its share
#: of the job in several batches, so that a slow rank holds back only its own batch).
BATCH_UNITS = 32
BATCH_BYTES = 8 << 20
BATCHES_A_WORKER = 4
#: From this many Dask workers, their batches' folds are merged on the workers (a tree of
#: merges) and this process receives one. With fewer, this process merges each as it comes:
#: on two workers the tree was slower (1.34x one reader at 4,096 small ranks, against 1.48x)
#: and its merging worker held the job's fold (158 MiB, against 64), for no gain here (the
#: job's fold comes whole either way; merging it here took 25 ms at 1,024 ranks).
TREE_WORKERS = 8


def batches(todo: list[tuple[int, Unit]], workers: int, folded: bool) -> list[Batch]:
    """``todo`` cut into the batches workers read, in order: one unit each without a fold
    (each unit's records come back), else units until BATCH_BYTES of JSON or BATCH_UNITS,
    and no more than a worker's share over BATCHES_A_WORKER of the units, then of the units
    left (the last batches small)."""
    if not folded:
        return [[item] for item in todo]
    share = max(1, workers * BATCHES_A_WORKER)
    most = max(1, min(BATCH_UNITS, len(todo) // share))
    out: list[Batch] = []
    filled = 0
    limit = most
    for k, item in enumerate(todo):
        size = unit_bytes(item[1])
        if not out or len(out[-1]) >= limit or filled + size > BATCH_BYTES:
            out.append([])
            filled = 0
            # smaller towards the end (a share of what is left): the workers finish
            # together, none idle while another reads a whole batch alone
            limit = max(1, most // 4, min(most, -(-(len(todo) - k) // share)))
        out[-1].append(item)
        filled += size
    return out


def unit_bytes(unit: Unit) -> int:
    """A unit's JSON in bytes: as measured when the job was split, else measured now (a
    file that cannot be read counts 0: it is said where the unit is read)."""
    if unit.size is not None:
        return unit.size
    total = 0
    for path in unit.files:
        with contextlib.suppress(OSError):
            total += json_bytes(path)
    return total


def read_unit(backend: Backend, unit: Unit) -> UnitResult:
    """Read one unit (where the executor runs it); a failure is returned, not raised."""
    read = call(lambda: list(backend.analyze(list(unit.files))), "analyze")
    if isinstance(read.exception, ValueError):
        return UnitResult(unit, error=read.said() or "unreadable", bad_input=True,
                          seconds=read.duration_s)
    if read.value is None or not read.ok:  # a reader's bug marks its unit, not the job
        return UnitResult(unit, error=f"reading the files failed: {read.exception}"[:300],
                          traceback=read.error, seconds=read.duration_s)
    return UnitResult(unit, records=read.value, seconds=read.duration_s)


def read_batch(backends: dict[str, Backend], batch: Batch,
               new_fold: Callable[[], Fold] | None) -> tuple[list[tuple[int, UnitResult]],
                                                             Fold | None]:
    """Read a batch of units (where the executor runs it) and, given ``new_fold``, fold
    them there: return each unit's result as the fold leaves it, and the fold."""
    fold = new_fold() if new_fold is not None else None
    out = []
    for i, unit in batch:
        result = read_unit(backends[unit.backend], unit)
        out.append((i, fold.add(i, result) if fold is not None else result))
    return out, fold


def _lost(unit: Unit, exc: BaseException) -> UnitResult:
    what = type(exc).__name__
    said = f"{what}: {str(exc).splitlines()[0]}" if str(exc) else what
    return UnitResult(unit, error=f"the worker reading it died ({said})"[:300])


def reduce_units(units: Sequence[Unit], backends: dict[str, Backend], ex: Executor | None,
                 progress: Progress | None = None, workers: int = 1,
                 fresh_pool: Callable[[int], Executor] | None = None,
                 fold: Fold | None = None,
                 new_fold: Callable[[], Fold] | None = None,
                 tree_from: int = TREE_WORKERS) -> Reduced:
    """Read every unit through ``ex`` (None: in this process, one after another), which
    has ``workers`` workers; ``fresh_pool(n)`` makes a local pool of n workers to replace
    one that broke. Given ``fold`` (the job's) and ``new_fold`` (an empty one, made on a
    worker), every unit's result is folded as it is read, on the worker that read it, and
    each batch's fold merged into ``fold`` as it comes (on a Dask cluster of ``tree_from``
    workers or more, merged on its workers two at a time: ``perfstack.run.recorded.clustermerge``);
    the results kept are what the fold leaves of them."""
    begin = time.perf_counter()
    results: dict[int, UnitResult] = {}
    out = Reduced([])
    seen: set[int] = set()  # the units read or given up, for the progress

    def tick(indices: Iterable[int]) -> None:
        seen.update(indices)
        if progress is not None:
            progress(len(seen), len(units), time.perf_counter() - begin)

    def done(i: int, result: UnitResult) -> None:
        if result.error is None and not result.records:  # folded whole: counted
            out.folded += 1
            out.folded_s += result.seconds
        else:  # (its unit this process's, not a worker's copy of it)
            results[i] = UnitResult(units[i], result.records, result.error, result.bad_input,
                                    result.traceback, result.seconds)
        tick((i,))

    def folded(batch_out: tuple[list[tuple[int, UnitResult]], Fold | None]) -> None:
        read, part = batch_out
        if fold is not None and part is not None:
            fold.merge(part)
        for i, result in read:  # (not folded where read: folded here)
            done(i, fold.add(i, result) if fold is not None and part is None else result)

    try:
        if ex is None:
            for i, unit in enumerate(units):
                result = read_unit(backends[unit.backend], unit)
                done(i, fold.add(i, result) if fold is not None else result)
        else:
            todo = batches(list(enumerate(units)), workers, fold is not None)
            make = new_fold if fold is not None else None
            client = getattr(ex, "client", None) if workers >= tree_from else None
            if client is not None and make is not None:  # Dask: merged on its workers
                _on_tree(client, todo, backends, make, folded, done, tick,
                         getattr(ex, "health", None))
            broken = [] if client is not None and make is not None else \
                _through(ex, todo, backends, make, folded, done)
            if broken and fresh_pool is not None:  # a fresh pool, then one worker each
                out.retried = sum(map(len, broken))
                with fresh_pool(max(1, min(out.retried, workers))) as fresh:
                    broken = _through(fresh, [[u] for b in broken for u in b], backends, make,
                                      folded, done)
                broken = [b for b in broken if _alone(fresh_pool, b, backends, make, folded,
                                                      done)]
            for batch in broken:
                for i, unit in batch:
                    done(i, _lost(unit, BrokenProcessPool("its worker process died")))
    except KeyboardInterrupt:
        out.interrupted = True
        if ex is not None:
            cancel_now(ex)
            stop_children()
    out.results = [results[i] for i in sorted(results)]
    out.wall_s = time.perf_counter() - begin
    return out


def _on_tree(client: Any, todo: list[Batch], backends: dict[str, Backend],
             new_fold: Callable[[], Fold], folded: Callable[[Any], None],
             done: Callable[[int, UnitResult], None], tick: Callable[[Iterable[int]], None],
             health: Callable[[], str | None] | None) -> None:
    """Read the batches on the Dask cluster of ``client``, their folds merged there two at a
    time (``perfstack.run.recorded.clustermerge``): this process receives the job's fold once."""
    leaves = {client.submit(read_batch, {u.backend: backends[u.backend] for _, u in batch},
                            batch, new_fold, pure=False): batch for batch in todo}

    def lost(batch: Batch, why: str) -> None:
        for i, unit in batch:
            done(i, UnitResult(unit, error=why))

    clustermerge.through(client, leaves, folded, lambda batch: tick(i for i, _ in batch), lost,
                 health)


def cancel_now(ex: Executor) -> None:
    """Stop an executor without waiting, its work not started cancelled: a local pool takes
    ``cancel_futures``; Dask's executor has no such argument and cancels its futures when
    not told to wait."""
    try:
        ex.shutdown(wait=False, cancel_futures=True)
    except TypeError:
        ex.shutdown(wait=False)


def _alone(fresh_pool: Callable[[int], Executor], batch: Batch, backends: dict[str, Backend],
           new_fold: Callable[[], Fold] | None, folded: Callable[[Any], None],
           done: Callable[[int, UnitResult], None]) -> bool:
    """Read one unit in a pool of its own; whether its worker died again."""
    with fresh_pool(1) as alone:
        return bool(_through(alone, [batch], backends, new_fold, folded, done))


#: While no result comes, how often the executor's workers are looked at (``health``).
CHECK_S = 1.0


# long: one loop over the results as they come, each way a wait can end said where it ends
def _through(ex: Executor, todo: list[Batch], backends: dict[str, Backend],
             new_fold: Callable[[], Fold] | None, folded: Callable[[Any], None],
             done: Callable[[int, UnitResult], None]) -> list[Batch]:
    """Read the batches ``todo`` through ``ex``; return those a broken local pool did not
    finish. Every wait is bounded: while no result comes, the executor's ``health()`` (where
    it has one) is asked every CHECK_S whether its workers can still finish; when it says
    why not, the units left are marked with that and given up."""
    futures: dict[Future[Any], Batch] = {
        ex.submit(read_batch, {u.backend: backends[u.backend] for _, u in batch}, batch,
                  new_fold): batch for batch in todo}
    health: Callable[[], str | None] | None = getattr(ex, "health", None)
    broken: list[Batch] = []
    while futures:
        signals.check()  # a signal whose exception a finalizer swallowed: acted on
        try:
            for future in as_completed(list(futures), timeout=CHECK_S):
                signals.check()
                # Let go of each future as its result comes: a Dask worker keeps a result in
                # its memory for as long as a future of it is held, so that holding them all
                # would grow every worker with the number of ranks instead of one rank's.
                batch = futures.pop(future)
                try:
                    folded(future.result())
                except BrokenProcessPool:
                    broken.append(batch)
                except Exception as exc:  # a Dask worker that died (KilledWorker), a lost
                    # connection: when the workers cannot finish, the rest is given up too
                    why = health() if health is not None else None
                    for i, unit in batch:
                        done(i, UnitResult(unit, error=why) if why else _lost(unit, exc))
                    if why is not None:
                        _give_up(futures, why, done)
                        break
                del future
        except TimeoutError:
            why = health() if health is not None else None
            if why is not None:
                _give_up(futures, why, done)
    return sorted(broken, key=lambda b: b[0][0])


def _give_up(futures: dict[Future[Any], Batch], why: str,
             done: Callable[[int, UnitResult], None]) -> None:
    """Mark every unit left with ``why`` (its workers cannot finish it) and cancel it."""
    for future, batch in list(futures.items()):
        future.cancel()
        for i, unit in batch:
            done(i, UnitResult(unit, error=why))
    futures.clear()
