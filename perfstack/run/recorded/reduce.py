"""Reading a job's recorded files where a worker can, and only the records travelling back.

Each backend splits the files it recognized into units read independently, one per rank or
process (``Backend.analysis_units``); each unit is read by one ``Backend.analyze`` call
through an executor (``perfstack.run.recorded.executors``): in this process, a local pool, or a Dask
cluster. What comes back is the unit's records (rows, metrics, step times), never its events.

One unit never sinks the others: a unit whose files cannot be read (``ValueError``), whose
reader raised, or whose worker died is marked with why, and the rest is read. A local pool
that breaks (a worker killed: the out-of-memory killer, a crash in a native reader) is
replaced and the units it had not finished are read again, then one worker each, so that
the unit that kills its worker is the only one lost. Ctrl-C cancels what has not started;
what was read makes the partial report.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from concurrent.futures import Executor, Future, as_completed
from concurrent.futures.process import BrokenProcessPool
from dataclasses import dataclass, field
from pathlib import Path

from perfstack.backend import Backend, Recorded
from perfstack.calls import call
from perfstack.run.recorded.executors import stop_children


@dataclass(frozen=True)
class Unit:
    """Files of one backend read together: one rank's or process's."""

    backend: str
    files: tuple[Path, ...]


@dataclass
class UnitResult:
    """A unit's records, or why it has none."""

    unit: Unit
    records: list[Recorded] = field(default_factory=list)
    error: str | None = None  # one line: why the unit was not read
    bad_input: bool = False  # its files cannot be read (not a reader's bug)
    traceback: str | None = None
    seconds: float = 0.0  # reading it, where it was read


@dataclass
class Reduced:
    """Every unit's result, in the units' order, and whether Ctrl-C stopped the reading."""

    results: list[UnitResult]
    interrupted: bool = False
    retried: int = 0  # units read again after their worker pool broke
    wall_s: float = 0.0  # from the first unit submitted to the last one back


#: Told (done, total, seconds so far) after each unit.
Progress = Callable[[int, int, float], None]


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


def _lost(unit: Unit, exc: BaseException) -> UnitResult:
    what = type(exc).__name__
    said = f"{what}: {str(exc).splitlines()[0]}" if str(exc) else what
    return UnitResult(unit, error=f"the worker reading it died ({said})"[:300])


def reduce_units(units: Sequence[Unit], backends: dict[str, Backend], ex: Executor | None,
                 progress: Progress | None = None, workers: int = 1,
                 fresh_pool: Callable[[int], Executor] | None = None,
                 on_read: Callable[[int, UnitResult], UnitResult] | None = None) -> Reduced:
    """Read every unit through ``ex`` (None: in this process, one after another), which
    has ``workers`` workers; ``fresh_pool(n)`` makes a local pool of n workers to replace
    one that broke. ``on_read(i, result)`` takes each unit's result as it comes (in any
    order) and returns what to keep of it: the job's fold keeps its records, and the unit's
    result is kept without them, so that this process never holds every rank's records."""
    begin = time.perf_counter()
    results: dict[int, UnitResult] = {}

    def done(i: int, result: UnitResult) -> None:
        results[i] = on_read(i, result) if on_read is not None else result
        if progress is not None:
            progress(len(results), len(units), time.perf_counter() - begin)

    out = Reduced([])
    try:
        if ex is None:
            for i, unit in enumerate(units):
                done(i, read_unit(backends[unit.backend], unit))
        else:
            broken = _through(ex, list(enumerate(units)), backends, done)
            if broken and fresh_pool is not None:  # a fresh pool, then one worker each
                out.retried = len(broken)
                with fresh_pool(max(1, min(len(broken), workers))) as fresh:
                    broken = _through(fresh, broken, backends, done)
                broken = [(i, unit) for i, unit in broken if _alone(fresh_pool, i, unit,
                                                                      backends, done)]
            for i, unit in broken:
                done(i, _lost(unit, BrokenProcessPool("its worker process died")))
    except KeyboardInterrupt:
        out.interrupted = True
        if ex is not None:
            cancel_now(ex)
            stop_children()
    out.results = [results[i] for i in sorted(results)]
    out.wall_s = time.perf_counter() - begin
    return out


def cancel_now(ex: Executor) -> None:
    """Stop an executor without waiting, its work not started cancelled: a local pool takes
    ``cancel_futures``; Dask's executor has no such argument and cancels its futures when
    not told to wait."""
    try:
        ex.shutdown(wait=False, cancel_futures=True)
    except TypeError:
        ex.shutdown(wait=False)


def _alone(fresh_pool: Callable[[int], Executor], i: int, unit: Unit,
           backends: dict[str, Backend], done: Callable[[int, UnitResult], None]) -> bool:
    """Read one unit in a pool of its own; whether its worker died again."""
    with fresh_pool(1) as alone:
        return bool(_through(alone, [(i, unit)], backends, done))


#: While no result comes, how often the executor's workers are looked at (``health``).
CHECK_S = 1.0


def _through(ex: Executor, todo: list[tuple[int, Unit]], backends: dict[str, Backend],
             done: Callable[[int, UnitResult], None]) -> list[tuple[int, Unit]]:
    """Read ``todo`` through ``ex``; return the units a broken local pool did not finish.
    Every wait is bounded: while no result comes, the executor's ``health()`` (where it has
    one) is asked every CHECK_S whether its workers can still finish; when it says why not,
    the units left are marked with that and given up."""
    futures: dict[Future[UnitResult], tuple[int, Unit]] = {
        ex.submit(read_unit, backends[unit.backend], unit): (i, unit) for i, unit in todo}
    health: Callable[[], str | None] | None = getattr(ex, "health", None)
    broken: list[tuple[int, Unit]] = []
    while futures:
        try:
            for future in as_completed(list(futures), timeout=CHECK_S):
                # Let go of each future as its result comes: a Dask worker keeps a result in
                # its memory for as long as a future of it is held, so that holding them all
                # would grow every worker with the number of ranks instead of one rank's.
                i, unit = futures.pop(future)
                try:
                    done(i, future.result())
                except BrokenProcessPool:
                    broken.append((i, unit))
                except Exception as exc:  # a Dask worker that died (KilledWorker), a lost
                    # connection: when the workers cannot finish, the rest is given up too
                    why = health() if health is not None else None
                    done(i, UnitResult(unit, error=why) if why else _lost(unit, exc))
                    if why is not None:
                        _give_up(futures, why, done)
                        break
                del future
        except TimeoutError:
            why = health() if health is not None else None
            if why is not None:
                _give_up(futures, why, done)
    return sorted(broken, key=lambda t: t[0])


def _give_up(futures: dict[Future[UnitResult], tuple[int, Unit]], why: str,
             done: Callable[[int, UnitResult], None]) -> None:
    """Mark every unit left with ``why`` (its workers cannot finish it) and cancel it."""
    for future, (i, unit) in list(futures.items()):
        future.cancel()
        done(i, UnitResult(unit, error=why))
    futures.clear()
