"""The paired test ``perfstack ab`` judges a metric by: Student's t on the log ratios of the
interleaved pairs, screened by Grubbs' test for one pair disturbed far beyond the others, and
referred to its own null distribution.

Why this test (docs/statistics.md says more):

- Run-to-run noise is multiplicative (a busy machine slows a whole run by a factor), so the
  log of each pair's ratio is close to normal and the paired t-test on it is exact; with 3 to
  5 pairs no rank or permutation test can reach 5% at all (the smallest two-sided p-value of a
  sign-flip test on 5 pairs is 1/16).
- One run 3x its siblings (a shared machine's slow moment) must not hide a change every other
  pair shows. Grubbs' test (1969) asks whether the most extreme pair is an outlier of a normal
  sample; at level ``GRUBBS_ALPHA`` it is left out and the others are t-tested. That choice
  makes the t statistic larger than Student's (the pairs kept are the closest together): left
  as it was (a modified z-score rule, then Student's critical values), a per-run noise of 30%
  made one A/A session in six "changed". So the screened test's p-value is referred to its
  own null distribution, simulated once for 5 to 30 pairs (``pairednull``, written by
  scripts/paired_null_table.py): a parametric bootstrap (Beran's prepivoting), exact up to its
  simulation error under the normal model, whatever the noise's size.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from perfstack.analysis.pvalues import t_pvalue
from perfstack.records import datarecord

#: Fewer pairs than this are never screened: Grubbs' test needs them, and a t-test on the
#: two or three pairs left would say nothing.
SCREEN_FROM = 5


@datarecord(frozen=True)
class PairedTest:
    """What the screened paired test found."""

    t: float  # Student's t of the pairs kept
    df: int
    pvalue: float  # the calibrated two-sided p-value: what is compared with the level
    left_out: int | None  # the index of the pair left out as an outlier, if one was
    outlier_pvalue: float | None  # Grubbs' p-value of the most extreme pair (5 pairs on)


def _mean_spread(values: Sequence[float]) -> tuple[float, float]:
    """The mean and the sample standard deviation of ``values`` (at least 2)."""
    mean = math.fsum(values) / len(values)
    return mean, math.sqrt(math.fsum((v - mean) ** 2 for v in values) / (len(values) - 1))


def _t(values: Sequence[float]) -> tuple[float, float]:
    """Student's one-sample t of ``values`` against 0, and its two-sided p-value."""
    n = len(values)
    mean, spread = _mean_spread(values)
    if spread == 0:
        t = 0.0 if mean == 0 else math.copysign(math.inf, mean)
    else:
        t = mean / (spread / math.sqrt(n))
    return t, t_pvalue(t, n - 1)


def grubbs(values: Sequence[float]) -> tuple[float, int] | None:
    """Grubbs' two-sided test for one outlier: the p-value that the value farthest from the
    mean is one (n times Student's two-sided tail at the test's t, n - 2 degrees of freedom:
    exact where it matters, an upper bound elsewhere) and its index; None with fewer than 3
    values or none apart."""
    n = len(values)
    if n < 3:
        return None
    mean, spread = _mean_spread(values)
    if spread == 0:
        return None
    worst = max(range(n), key=lambda i: abs(values[i] - mean))
    return grubbs_tail(abs(values[worst] - mean) / spread, n), worst


def grubbs_tail(g: float, n: int) -> float:
    """Grubbs' two-sided p-value of the statistic ``g`` (the largest distance from the mean,
    in standard deviations) among ``n`` values: n times Student's two-sided tail at
    sqrt(n (n - 2) g^2 / ((n - 1)^2 - n g^2)), n - 2 degrees of freedom."""
    room = (n - 1) ** 2 - n * g * g
    if room <= 0:  # as far as n values allow: the tail is 0
        return 0.0
    t = math.sqrt(n * (n - 2) * g * g / room)
    return min(1.0, n * t_pvalue(t, n - 2))


def calibrated(naive: float, pairs: int) -> float:
    """The chance, under the null, that the screened test's own p-value is at most ``naive``
    (log-log interpolation in the simulated table; rows past the last use the last, which
    overstates their p-values a little; below the table's smallest level, its value there)."""
    from perfstack.analysis.pairednull import LEVELS, NULL

    if pairs < SCREEN_FROM or naive >= 1.0:
        return min(1.0, naive)
    row = NULL[min(pairs, max(NULL))]
    if naive <= LEVELS[-1]:
        return row[-1]
    # LEVELS fall from 1: find the two levels around naive
    hi = next(i for i in range(1, len(LEVELS)) if LEVELS[i] <= naive)
    lo_level, hi_level = LEVELS[hi - 1], LEVELS[hi]
    share = (math.log(naive) - math.log(hi_level)) / (math.log(lo_level) - math.log(hi_level))
    value = math.exp(math.log(row[hi]) + share * (math.log(row[hi - 1]) - math.log(row[hi])))
    return min(1.0, max(value, naive))


def paired_test(diffs: Sequence[float]) -> PairedTest:
    """The screened paired t-test of ``diffs`` (each pair's log ratio, or its difference) against
    no change: at least 2 diffs. From ``SCREEN_FROM`` pairs on, the pair Grubbs' test finds an
    outlier at ``GRUBBS_ALPHA`` is left out; the p-value is the calibrated one."""
    from perfstack.analysis.pairednull import GRUBBS_ALPHA

    n = len(diffs)
    if n < 2:
        raise ValueError("a paired test needs at least 2 pairs")
    outlier = grubbs(diffs) if n >= SCREEN_FROM else None
    left_out = outlier[1] if outlier is not None and outlier[0] <= GRUBBS_ALPHA else None
    kept = [d for i, d in enumerate(diffs) if i != left_out]
    t, naive = _t(kept)
    return PairedTest(t=t, df=len(kept) - 1, pvalue=calibrated(naive, n),
                      left_out=left_out, outlier_pvalue=outlier[0] if outlier else None)
