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
