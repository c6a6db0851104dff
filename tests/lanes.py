"""CPU lanes: the suite's two pytest-xdist workers each run their test on a CPU of its own.

Two profiled runs must never share this machine's CPUs: torch's OpenMP threads spin, and two
jobs whose thread pools both span the CPUs slowed one torch window 50 times. So each test holds
one CPU (a lock file per CPU, shared by the workers) and pins itself and every process it starts
to that CPU (``os.sched_setaffinity``; children inherit it, and OpenMP sizes its pool to it):
the two tests that run at once never run on each other's CPU. A test about more than one CPU
(a pool of workers that must be two, a thread sweep, a sampler's rate beside its workload) is
marked ``@pytest.mark.cpus(0)`` ("every CPU") and runs alone with all of them. Without xdist
(``-n 0``), or on one CPU, nothing is pinned or locked.

The locks are ``flock``s, so a worker that dies lets go of its CPU. A test that wants every
CPU says so first (a shared lock on ``want-all``), and no test takes a CPU while one waits, so
it waits for the tests running now only.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import time
from collections.abc import Generator, Iterator
from pathlib import Path
from typing import IO

import pytest

from tests.shared import temp_factory

#: How often a test waiting for a CPU looks again (seconds).
POLL_S = 0.02
#: Where each test's lane is logged, when set: a JSON line per test (its worker, CPUs, the
#: seconds it waited for them and held them), read by bench/suite_time.py.
LOG_VARIABLE = "PERFSTACK_LANES_LOG"


class Lanes:
    """This worker's hold on the machine's CPUs: none, one, or all of them."""

    def __init__(self, folder: Path, cpus: list[int], pin: bool = True) -> None:
        self.folder = folder
        self.cpus = cpus
        self.pin = pin  # False: locks only (tests/test_lanes.py)
        self.held: dict[int, IO[bytes]] = {}
        #: The CPU this worker's last test ran on: asked for first, so that what a module's
        #: first test started (a Dask cluster, a database server) and its later tests share
        #: a CPU when they can.
        self.last: int | None = None

    def _open(self, name: str) -> IO[bytes]:
        return open(self.folder / name, "ab")

    def _try(self, cpu: int) -> bool:
        f = self._open(f"cpu-{cpu}")
        try:
            fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            f.close()
            return False
        self.held[cpu] = f
        return True

    @contextlib.contextmanager
    def _gate(self) -> Iterator[None]:
        with self._open("gate") as gate:
            fcntl.flock(gate, fcntl.LOCK_EX)
            yield

    def _nobody_waits_for_all(self) -> bool:
        with self._open("want-all") as want:
            try:
                fcntl.flock(want, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                return False
            return True

    def take_one(self) -> None:
        """Wait for a free CPU (and for no test waiting for all of them); pin to it."""
        while True:
            with self._gate():
                order = sorted(self.cpus, key=lambda c: c != self.last)
                if self._nobody_waits_for_all() and any(self._try(c) for c in order):
                    break
            time.sleep(POLL_S)
        self._pin(set(self.held))
        self.last = next(iter(self.held))

    def take_all(self) -> None:
        """Wait for every CPU (no other test starts meanwhile); run on all of them."""
        with self._open("want-all") as want:
            fcntl.flock(want, fcntl.LOCK_SH)
            while True:
                with self._gate():
                    if all(self._try(c) for c in self.cpus if c not in self.held):
                        break
                    self.release()
                time.sleep(POLL_S)
        self._pin(set(self.cpus))

    def release(self) -> None:
        """Let go of every CPU held; the process may run anywhere again."""
        for f in self.held.values():
            f.close()
        self.held.clear()
        self._pin(set(self.cpus))

    def _pin(self, cpus: set[int]) -> None:
        if self.pin:
            os.sched_setaffinity(0, cpus)


_lanes: Lanes | None = None


def cpus_wanted(item: pytest.Item) -> int:
    """The CPUs a test asks for: 1 unless marked ``cpus(0)`` (every CPU)."""
    mark = item.get_closest_marker("cpus")
    return 1 if mark is None else int(mark.args[0])


@contextlib.contextmanager
def one_cpu(config: pytest.Config) -> Iterator[None]:
    """Run the block on a CPU of its own, as a test runs (outside any test: a shared run made
    before the first)."""
    lanes = _worker_lanes(config)
    if lanes is None:
        yield
        return
    lanes.take_one()
    try:
        yield
    finally:
        lanes.release()


def pytest_configure(config: pytest.Config) -> None:
    """Register the mark."""
    config.addinivalue_line("markers", "cpus(n): the CPUs a test needs; 0: every CPU, alone")


def _worker_lanes(config: pytest.Config) -> Lanes | None:
    """This xdist worker's lanes (made when first needed), or None when there are no lanes
    to keep: no xdist worker, or one CPU."""
    global _lanes
    cpus = sorted(os.sched_getaffinity(0))
    if _lanes is None and os.environ.get("PYTEST_XDIST_WORKER") and len(cpus) > 1:
        folder = temp_factory(config).getbasetemp().parent / "cpu-lanes"
        folder.mkdir(exist_ok=True)
        _lanes = Lanes(folder, cpus)
    return _lanes


@pytest.hookimpl(wrapper=True)
def pytest_runtest_protocol(item: pytest.Item,
                            nextitem: pytest.Item | None) -> Generator[None, object, object]:
    """Hold the test's CPUs through its set-up, call and teardown."""
    lanes = _worker_lanes(item.config)
    if lanes is None:
        return (yield)
    asked = time.monotonic()
    if cpus_wanted(item) == 1:
        lanes.take_one()
    else:
        lanes.take_all()
    began = time.monotonic()
    try:
        return (yield)
    finally:
        held = sorted(lanes.held)
        lanes.release()
        _log(item, held, began - asked, time.monotonic() - began)


def _log(item: pytest.Item, cpus: list[int], waited: float, held: float) -> None:
    """Append the test's lane to the log named by ``LOG_VARIABLE``, if any."""
    path = os.environ.get(LOG_VARIABLE)
    if path:
        line = {"worker": os.environ.get("PYTEST_XDIST_WORKER"), "test": item.nodeid,
                "cpus": cpus, "waited_s": round(waited, 3), "held_s": round(held, 3),
                "ended": time.time()}
        with open(path, "a", encoding="utf-8") as f:
            f.write(json.dumps(line) + "\n")
