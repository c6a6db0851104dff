"""perfstack ab's paired test, on plain data: one run disturbed far beyond the others (seen
here: a baseline run 3x its siblings on a shared machine) must not hide a consistent change in
every other pair, ordinary spread is seldom trimmed, and the test calls an unchanged metric
changed in its own 5% of sessions."""

from __future__ import annotations

import random

from perfstack.analysis.pairedtest import grubbs_tail, paired_test
from perfstack.analysis.stats import compare_paired


def test_a_disturbed_pair_is_left_out_and_said() -> None:
    # Recorded in a real perfstack ab session of drift_work.py vs drift_work_more.py.
    base = [2.123, 1.804, 2.356, 6.519, 2.295]
    new = [2.861, 2.718, 2.952, 2.779, 3.173]
    result = compare_paired(base, new)
    assert result.significant is True and 0.25 < result.change < 0.45, result
    assert "1 left out as an outlier" in result.reason


def test_ordinary_spread_is_seldom_trimmed() -> None:
    """Grubbs' screen at its level: normal noise has a pair left out in about 0.5% of
    sessions (its GRUBBS_ALPHA), and the calibrated test calls about its own 5% changed."""
    from perfstack.analysis.pairednull import GRUBBS_ALPHA

    rng = random.Random(7)
    trimmed = calls = 0
    sessions = 2000
    for _ in range(sessions):
        base = [2 + rng.gauss(0, 0.05) for _ in range(7)]
        new = [2 + rng.gauss(0, 0.05) for _ in range(7)]
        result = compare_paired(base, new)
        trimmed += "left out" in result.reason
        calls += bool(result.significant)
    assert trimmed <= 3 * GRUBBS_ALPHA * sessions, trimmed
    assert calls <= 0.065 * sessions, calls  # 5% within its Monte Carlo error (2 SE)


def test_grubbs_tail_at_its_published_critical_values() -> None:
    """Grubbs' two-sided 5% critical values (NIST's table: 1.715 for 5 values, 2.290 for 10,
    2.709 for 20) have a tail of 5%; the farthest a value can lie among n has a tail of 0."""
    for n, g in ((5, 1.715), (10, 2.290), (20, 2.709)):
        assert abs(grubbs_tail(g, n) - 0.05) < 0.002, (n, grubbs_tail(g, n))
    assert grubbs_tail((5 - 1) / 5 ** 0.5, 5) == 0.0


def test_the_calibrated_p_value_is_uniform_under_the_null() -> None:
    """The table (simulated with numpy by scripts/paired_null_table.py) checked against the
    pure-Python test on fresh simulations: with 5 and 8 pairs of normal log ratios the
    calibrated p-value is at most 5% and 1% that often (within 3 Monte Carlo SE), where the
    screened test's own p-value is at most 5% about 1.1x as often."""
    for pairs, seed in ((5, 11), (8, 12)):
        rng = random.Random(seed)
        sims = 12_000
        found = [paired_test([rng.gauss(0, 1) for _ in range(pairs)]) for _ in range(sims)]
        for level in (0.05, 0.01):
            share = sum(f.pvalue <= level for f in found) / sims
            se = (level * (1 - level) / sims) ** 0.5
            assert abs(share - level) <= 3 * se, (pairs, level, share)


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
