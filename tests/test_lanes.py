"""The suite's CPU lanes (tests/lanes.py): a test holds a CPU no other test holds; one that asks
for every CPU waits for the tests running, and no test starts while it waits; a worker takes
the CPU it last had first; a run shared by the workers is made once (tests/shared.py).

Each "worker" here is a Lanes of its own over the same lock files (flock locks belong to an
open file, so two in one process contend as two processes do), with pinning off."""

from __future__ import annotations

import threading
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.lanes import Lanes
from tests.shared import made_once_in, shares_module_fixtures

#: Long enough for a take that can succeed to have succeeded many times over (they poll every
#: 20 ms); a wrong take is never missed by waiting longer, only a right one by waiting less.
SETTLE_S = 0.3
#: How long a take that must succeed may take on a loaded machine.
PATIENCE_S = 30.0


def _in_thread(action: Callable[[], None]) -> threading.Event:
    """Run ``action`` in a thread; the event is set once it returns."""
    done = threading.Event()

    def run() -> None:
        action()
        done.set()

    threading.Thread(target=run, daemon=True).start()
    return done


def test_a_test_holds_a_cpu_no_other_test_holds(tmp_path: Path) -> None:
    a, b, c = (Lanes(tmp_path, [0, 1], pin=False) for _ in range(3))
    a.take_one()
    b.take_one()
    assert set(a.held) | set(b.held) == {0, 1} and not set(a.held) & set(b.held)
    third = _in_thread(c.take_one)
    assert not third.wait(SETTLE_S) and not c.held  # both CPUs are held: it waits
    first = next(iter(a.held))
    a.release()
    assert third.wait(PATIENCE_S) and set(c.held) == {first}
    b.release()
    c.release()


def test_every_cpu_waits_for_the_running_test_and_no_test_starts_meanwhile(
        tmp_path: Path) -> None:
    a, b, c = (Lanes(tmp_path, [0, 1], pin=False) for _ in range(3))
    a.take_one()
    alone = _in_thread(b.take_all)
    assert not alone.wait(SETTLE_S) and not b.held  # a's test is running
    late = _in_thread(c.take_one)
    # One CPU is free, but a test waits for every CPU: c does not take it.
    assert not late.wait(SETTLE_S) and not c.held
    a.release()
    assert alone.wait(PATIENCE_S) and set(b.held) == {0, 1}
    assert not late.wait(SETTLE_S) and not c.held
    b.release()
    assert late.wait(PATIENCE_S) and len(c.held) == 1
    c.release()


def test_a_worker_takes_the_cpu_it_last_had_first(tmp_path: Path) -> None:
    a = Lanes(tmp_path, [0, 1], pin=False)
    other = Lanes(tmp_path, [0, 1], pin=False)
    other.take_one()  # CPU 0
    a.take_one()  # CPU 1
    other.release()
    a.release()
    a.take_one()
    assert set(a.held) == {1}, "the module's processes started on CPU 1 stay beside it"
    a.release()


def test_a_shared_run_is_made_once_and_a_failed_one_is_tried_again(tmp_path: Path) -> None:
    made: list[Path] = []

    def make(folder: Path) -> str:
        made.append(folder)
        (folder / "report.json").write_text("{}")
        return str(folder / "report.json")

    def fail(folder: Path) -> str:
        (folder / "half").write_text("")
        raise RuntimeError("the run failed")

    with pytest.raises(RuntimeError):
        made_once_in(tmp_path, "tiny", fail)
    first = made_once_in(tmp_path, "tiny", make)
    again = made_once_in(tmp_path, "tiny", make)
    assert first == again and len(made) == 1
    assert not (made[0] / "half").exists()  # the failed try's leavings were removed


def test_modules_with_a_module_scoped_fixture_are_kept_whole(tmp_path: Path) -> None:
    shared = tmp_path / "test_shared.py"
    shared.write_text('@pytest.fixture(scope="module")\ndef run(): ...\n')
    alone = tmp_path / "test_alone.py"
    alone.write_text('@pytest.fixture\ndef run(): ...\n@pytest.fixture(scope="session")\n'
                     'def s(): ...\n')
    assert shares_module_fixtures(shared) and not shares_module_fixtures(alone)
    assert shares_module_fixtures(Path(__file__).parent / "test_memory.py")
