"""perfstack ab's paired test, on plain data: one run disturbed far beyond the others (seen
here: a baseline run 3x its siblings on a shared machine) must not hide a consistent change in
every other pair, and ordinary spread is never trimmed."""

from __future__ import annotations

import random

from perfstack.analysis.stats import compare_paired


def test_a_disturbed_pair_is_left_out_and_said() -> None:
    # Recorded in a real perfstack ab session of drift_work.py vs drift_work_more.py.
    base = [2.123, 1.804, 2.356, 6.519, 2.295]
    new = [2.861, 2.718, 2.952, 2.779, 3.173]
    result = compare_paired(base, new)
    assert result.significant is True and 0.25 < result.change < 0.45, result
    assert "1 left out as an outlier" in result.reason


def test_ordinary_spread_is_not_trimmed() -> None:
    rng = random.Random(7)
    calls = 0
    for _ in range(500):
        base = [2 + rng.gauss(0, 0.05) for _ in range(7)]
        new = [2 + rng.gauss(0, 0.05) for _ in range(7)]
        result = compare_paired(base, new)
        assert "left out" not in result.reason, (base, new)
        calls += bool(result.significant)
    assert calls <= 40  # about the test's own 5%, not more


def test_too_few_pairs_keep_every_pair() -> None:
    result = compare_paired([2.0, 2.1, 6.0, 2.05], [2.6, 2.7, 2.65, 2.66])
    assert "left out" not in result.reason


def test_a_third_more_work_is_always_caught_and_a_a_seldom_is() -> None:
    """The gate's statistics on simulated ab sessions (fixed seed), where the truth is known:
    5 interleaved pairs with 3% run-to-run noise and a slow drift of the machine that both
    sides share. 30% more work is caught in every session; the same work is called changed in
    about the test's own 5% of them, never far more."""
    rng = random.Random(26)
    caught = false_alarms = 0
    sessions = 400
    for _ in range(sessions):
        drift = [1 + 0.1 * rng.random() for _ in range(5)]  # the machine, pair by pair

        def side(work: float, drift: list[float] = drift) -> list[float]:
            return [work * d * (1 + rng.gauss(0, 0.03)) for d in drift]

        caught += bool(compare_paired(side(1.0), side(1.3)).significant)
        false_alarms += bool(compare_paired(side(1.0), side(1.0)).significant)
    assert caught == sessions
    assert false_alarms <= 0.08 * sessions, false_alarms
