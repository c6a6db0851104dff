"""Summary statistics of repeated measurements, computed by pyperf (the reference).

pyperf's Benchmark gives median, mean, standard deviation and percentiles with the same
definitions as ``python -m pyperf stats``; we do not reimplement them.
"""

from __future__ import annotations

from collections.abc import Sequence

from perfstack.analysis.pvalues import t_pvalue, z_pvalue
from perfstack.records import datarecord


@datarecord(frozen=True)
class Summary:
    """Median, spread and count of a series of positive values."""

    n: int
    median: float
    mean: float
    stdev: float | None  # None for a single value: its spread is unknown, not zero
    minimum: float
    maximum: float

    @property
    def relative_stdev(self) -> float | None:
        """Return stdev / mean, or None when the spread is unknown."""
        if self.stdev is None or self.mean == 0:
            return None
        return self.stdev / self.mean


def median(values: Sequence[float]) -> float:
    """The median of ``values`` (at least one), as ``statistics.median`` defines it (the
    middle value, or the mean of the two middle ones), without importing ``statistics``
    (with ``fractions`` and ``decimal``) into the start of ``show``."""
    ordered = sorted(values)
    if not ordered:
        raise ValueError("the median of no values")
    middle = len(ordered) // 2
    return ordered[middle] if len(ordered) % 2 else (ordered[middle - 1] + ordered[middle]) / 2


#: Values this large in magnitude are scaled down before they are summed or squared: a sum
#: of a few of them, or a square of one, would overflow (a report may hold any finite value).
_HUGE = 2.0 ** 480


def scale_of(*samples: Sequence[float]) -> float:
    """A power of two that brings every value of ``samples`` under ``_HUGE`` when divided by
    it (exactly: only the exponent changes), 1.0 when they are all under it already.
    Everything computed here is a ratio, a test statistic or a location and spread that
    scale with the values, so dividing first and multiplying back never overflows."""
    import math

    top = max((abs(v) for values in samples for v in values), default=0.0)
    if not top < _HUGE or not math.isfinite(top):
        if not math.isfinite(top):
            raise ValueError("an infinite or NaN value is unknown, not a number")
        return 2.0 ** (math.frexp(top)[1] - 1 - 480)
    return 1.0


def summarize(values: Sequence[float], name: str = "values") -> Summary:
    """Return the summary of ``values`` (at least one, all positive), as pyperf's
    ``Benchmark`` computes it (``statistics.median``, ``mean`` and ``stdev``), without
    importing pyperf, nor ``statistics`` (with ``fractions`` and ``decimal``): ``show``
    prints it for every report. The mean and the standard deviation are summed with
    ``math.fsum`` (``statistics`` sums exactly, in fractions): they agree to a few units in
    the last place, far below any figure printed or compared."""
    import math

    if not values:
        raise ValueError("summarize() needs at least one value")
    if any(not v > 0 for v in values):
        raise ValueError(f"{name}: every value must be positive")
    n = len(values)
    k = scale_of(values)
    scaled = [v / k for v in values] if k != 1.0 else values
    mean = math.fsum(scaled) / n
    return Summary(
        n=n,
        median=median(values),
        mean=mean * k,
        stdev=k * math.sqrt(math.fsum((v - mean) ** 2 for v in scaled) / (n - 1)) if n > 1
        else None,
        minimum=min(values),
        maximum=max(values),
    )


#: Below this relative change of the medians, a difference is never called significant.
MIN_EFFECT = 0.02


@datarecord(frozen=True)
class Comparison:
    """Whether ``new`` differs from ``base`` by more than the noise, and how that was decided."""

    change: float  # relative change of the medians: new / base - 1
    significant: bool | None  # None: cannot be judged (a single sample on a side)
    test: str  # "t-test (pyperf)", "Welch t-test", "Mann-Whitney U", or "none"
    statistic: float | None
    reason: str  # one line a reader can quote
    #: the test's two-sided p-value (None without a test): what a family-wise correction
    #: across several metrics (``holm``) ranks
    pvalue: float | None = None


def holm(pvalues: Sequence[float], alpha: float = 0.05,
         weights: Sequence[float] | None = None) -> list[bool]:
    """Return, for each p-value, whether it is significant once the family-wise error rate
    over all of them is held at ``alpha`` (Holm's step-down method: the smallest p-value is
    compared with alpha/m, the next with alpha/(m-1), ..., stopping at the first that fails).
    Uniformly more powerful than Bonferroni, with the same guarantee.

    With ``weights`` (positive; Holm's weighted form, 1979), the hypothesis with the smallest
    p/weight is compared with alpha * its weight / the weights still in play, and so on: the
    family-wise error is still at most ``alpha``, and a hypothesis given more weight (the
    workload's own figure) needs less evidence, the others more, until it is rejected."""
    m = len(pvalues)
    w = list(weights) if weights is not None else [1.0] * m
    order = sorted(range(m), key=lambda i: pvalues[i] / w[i])
    out = [False] * m
    left = sum(w)
    for i in order:
        if pvalues[i] > alpha * w[i] / left:
            break
        out[i] = True
        left -= w[i]
    return out


def _welch(a: Sequence[float], b: Sequence[float]) -> tuple[float, float, float]:
    """Return Welch's t, its 95% critical value and its degrees of freedom."""
    import statistics

    from pyperf._utils import tdist95conf_level

    va, vb = statistics.variance(a) / len(a), statistics.variance(b) / len(b)
    if va + vb == 0:
        return (0.0 if statistics.mean(a) == statistics.mean(b) else float("inf")), 1.96, 1.0
    t = (statistics.mean(b) - statistics.mean(a)) / (va + vb) ** 0.5
    df = (va + vb) ** 2 / ((va ** 2 / (len(a) - 1) if len(a) > 1 else 0)
                           + (vb ** 2 / (len(b) - 1) if len(b) > 1 else 0) or 1e-300)
    return t, tdist95conf_level(max(1, df)), max(1.0, df)


def _mann_whitney(a: Sequence[float], b: Sequence[float]) -> float:
    """Return the normal-approximation z of the Mann-Whitney U test (ties averaged)."""
    import math

    pooled = sorted([(v, 0) for v in a] + [(v, 1) for v in b])
    ranks = [0.0] * len(pooled)
    i = 0
    while i < len(pooled):
        j = i
        while j + 1 < len(pooled) and pooled[j + 1][0] == pooled[i][0]:
            j += 1
        for k in range(i, j + 1):
            ranks[k] = (i + j) / 2 + 1
        i = j + 1
    n1, n2 = len(a), len(b)
    r1 = sum(r for r, (_, side) in zip(ranks, pooled, strict=True) if side == 0)
    u1 = r1 - n1 * (n1 + 1) / 2
    mean = n1 * n2 / 2
    sd = math.sqrt(n1 * n2 * (n1 + n2 + 1) / 12)
    return (mean - u1) / sd if sd else 0.0


def _skewed(values: Sequence[float]) -> bool:
    import statistics

    if len(values) < 8:
        return False
    mean, sd = statistics.mean(values), statistics.stdev(values)
    if sd == 0:
        return False
    skew = sum(((v - mean) / sd) ** 3 for v in values) / len(values)
    return abs(skew) > 1.0


def compare(base: Sequence[float], new: Sequence[float],
            min_effect: float = MIN_EFFECT) -> Comparison:
    """Decide whether ``new`` differs from ``base`` beyond noise.

    pyperf's two-sample t-test (95%, two-tailed) is the reference when both sides have the
    same number of samples; Welch's t-test otherwise; the Mann-Whitney U test (normal
    approximation, 95%) when either side is skewed and has at least 8 samples. A change below
    ``min_effect`` is never significant, whatever the test says: with pyperf's test the change
    of the means, as ``pyperf compare_to --min-speed`` measures it, else that of the medians.
    """
    import statistics

    if not base or not new:
        raise ValueError("compare() needs samples on both sides")
    k = scale_of(base, new)  # the change and the tests are the same on scaled values
    if k != 1.0:
        base, new = [v / k for v in base], [v / k for v in new]
    mb, mn = statistics.median(base), statistics.median(new)
    change = (mn / mb - 1) if mb else (0.0 if mn == mb else float("inf"))
    if len(base) < 2 or len(new) < 2:
        return Comparison(change, None, "none", None,
                          f"one sample on a side (n={len(base)} vs {len(new)}): the noise is "
                          "unknown, so the change cannot be judged; repeat the runs")
    if _skewed(base) or _skewed(new):
        z = _mann_whitney(base, new)
        test, stat, passed = "Mann-Whitney U", z, abs(z) >= 1.96
        pvalue = z_pvalue(z)
    elif len(base) == len(new):
        from pyperf._utils import is_significant

        try:
            passed, t = is_significant(list(new), list(base))
        except ZeroDivisionError:  # no spread on either side
            passed, t = mb != mn, float("inf") if mb != mn else 0.0
        test, stat = "t-test (pyperf)", t
        pvalue = t_pvalue(t, len(base) + len(new) - 2)
    else:
        t, critical, df = _welch(base, new)
        test, stat, passed = "Welch t-test", t, abs(t) >= critical
        pvalue = t_pvalue(t, df)
    effect = abs(change)
    if test == "t-test (pyperf)":
        # As pyperf compare_to --min-speed measures it: the ratio of the means, either way.
        ma, mz = statistics.fmean(base), statistics.fmean(new)
        if ma > 0 and mz > 0:
            effect = max(mz / ma, ma / mz) - 1
    if passed and effect < min_effect:
        return Comparison(change, False, test, stat,
                          f"{test} says different, but {100 * effect:.1f}% is below the "
                          f"{100 * min_effect:.0f}% minimum effect", pvalue)
    if passed:
        return Comparison(change, True, test, stat,
                          f"{test}: significant at 95% (n={len(base)} vs {len(new)})", pvalue)
    return Comparison(change, False, test, stat,
                      f"within noise ({test}, n={len(base)} vs {len(new)})", pvalue)


#: Below this change, a paired (interleaved A/B) difference is never significant.
PAIRED_MIN_EFFECT = 0.02


def compare_paired(base: Sequence[float], new: Sequence[float],
                   min_effect: float = PAIRED_MIN_EFFECT) -> Comparison:
    """Decide whether ``new`` differs from ``base`` when their i-th samples were taken side by
    side (``perfstack ab``): a paired t-test (95%, two-tailed) on the log of each pair's ratio,
    so machine drift that hit both runs of a pair cancels, with one pair disturbed far beyond
    the others left out and the p-value referred to the screened test's own null distribution
    (``pairedtest``). ``change`` is the geometric mean of the ratios of the pairs kept minus
    one. Values that are not all positive are compared as differences.

    The machine's probe is not used as a covariate here: tried as one (analysis of covariance
    on the log probe), it turned one A/A comparison in 20 into a "change" on this VM, where the
    plain paired test called none of 60 (docs/performance.md).
    """
    import math

    from perfstack.analysis.pairedtest import paired_test  # (not at show's start)

    if len(base) != len(new):
        raise ValueError("compare_paired() needs as many samples on both sides")
    k = scale_of(base, new)  # the change and the test are the same on scaled values
    if k != 1.0:
        base, new = [v / k for v in base], [v / k for v in new]
    n = len(base)
    if n < 2:
        return Comparison(0.0 if n == 0 else (new[0] / base[0] - 1 if base[0] else 0.0), None,
                          "none", None, f"{n} pair(s): the noise is unknown, so the change "
                          "cannot be judged; repeat the runs")
    test = "paired t-test"
    ratios = all(v > 0 for v in (*base, *new))  # diffs are log ratios, else differences
    if ratios:
        diffs = [math.log(b / a) for a, b in zip(base, new, strict=True)]
    else:
        diffs = [b - a for a, b in zip(base, new, strict=True)]
    found = paired_test(diffs)
    pairs = f"{n} interleaved pairs"
    if found.left_out is not None:
        keep = [i for i in range(n) if i != found.left_out]
        base, new, diffs = ([side[i] for i in keep] for side in (base, new, diffs))
        pairs += (f", 1 left out as an outlier (a run disturbed far beyond the others: "
                  f"Grubbs' test p={found.outlier_pvalue:.2g})")
    change = _paired_change(diffs, base, new, ratios)
    t, pvalue = found.t, found.pvalue
    passed = pvalue <= 0.05
    if passed and abs(change) < min_effect:
        return Comparison(change, False, test, t,
                          f"{test} says different, but {100 * abs(change):.1f}% is below the "
                          f"{100 * min_effect:.0f}% minimum effect ({pairs})", pvalue)
    if passed:
        return Comparison(change, True, test, t, f"{test}: significant at 95% ({pairs})",
                          pvalue)
    return Comparison(change, False, test, t, f"within noise ({test}, {pairs})", pvalue)


def _paired_change(diffs: Sequence[float], base: Sequence[float], new: Sequence[float],
                   ratios: bool) -> float:
    """The change a paired comparison states: the geometric mean of the pairs' ratios minus
    one; for values that are not all positive (a count that is 0 in some runs), the ratio of
    the two sides' medians minus one, the figures every table shows beside it (0 when both
    are 0), else of their means: for values of 0 or more it never falls below -100% (the
    mean difference over the base's median did: 368 -> 80 read -167%)."""
    import math
    import statistics

    if ratios:
        return math.exp(statistics.fmean(diffs)) - 1
    median_base, median_new = statistics.median(base), statistics.median(new)
    if median_base > 0 and median_new >= 0:
        return median_new / median_base - 1
    if median_base == median_new:
        return 0.0
    mean_base, mean_new = statistics.fmean(base), statistics.fmean(new)
    if mean_base > 0 and mean_new >= 0:
        return mean_new / mean_base - 1
    scale = abs(mean_base) or abs(statistics.median(base)) or 1.0
    return statistics.fmean(diffs) / scale
