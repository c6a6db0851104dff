"""Change points in one series: where its level stepped, how sure, and how big.

Candidates come from Apache Otava's E-Divisive means (the Hunter variant: sliding windows,
then a merge that keeps the significant points), the detector MongoDB and DataStax run over
their performance histories. Otava judges a candidate with a t-test as if its place had been
chosen in advance; it was chosen to split the series where the two sides differ most, so
that p-value is too small (on pure noise, 60 points at p < 0.001 give a change point about 5%
of the time). Each candidate is judged again here by a permutation test over the same choice:
the largest two-sample t statistic over every split of the segment, in shuffled copies
(Matteson and James's own test, vectorised, on the pooled t statistic). A step is
**significant** below ``ALPHA``, **possible** below ``SUGGEST``.

A segment too short for any arrangement of it to reach ``ALPHA`` under permutation (6 runs
and 5: one arrangement in 462) is also judged by Student's t-test on the logarithms,
Bonferroni-corrected for every split the detector could have chosen; the smaller p-value
counts (both are valid, so the false alarms at most double: none in 300 flat short series,
tests/test_gate_shared_machine.py). A 2x step in 11 quiet runs is a change, not "possible".

Sizes are relative to the level before the step, with a 95% Welch interval. The
**detectable** step of a segment is the smallest one a history this noisy and this long would
find at ``ALPHA`` with 80% power, split in its middle: it says how many more runs it takes
before "no change" means something.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Sequence
from typing import Any

from perfstack.records import datarecord

ALPHA = 0.001
SUGGEST = 0.05
PERMUTATIONS = 2000
#: Otava's first pass (its weak candidates): 10x ALPHA, as Otava's own default. A candidate
#: weaker than this is almost never under SUGGEST once the choice of its split is counted.
FIRST_PASS = 10 * ALPHA
#: Fewest values on each side of a split.
MIN_SIDE = 3
#: Otava's sliding window (its default).
WINDOW = 50
#: The permutation test looks at most this many values on each side of a step (the sizes
#: use the whole segments): the test stays local, as the detector's windows are, and a
#: 10,000-run series costs what a 200-run one does.
LOCAL = 2 * WINDOW
_Z_POWER = 0.8416  # 80% power


@datarecord(frozen=True)
class Side:
    """The values on one side of a step."""

    mean: float
    sd: float
    n: int


@datarecord(frozen=True)
class Step:
    """A step at ``index`` (the first value of the new level)."""

    index: int
    before: Side
    after: Side
    pvalue: float
    change: float  # relative to the level before
    low: float  # the 95% interval of ``change``
    high: float
    #: Where the step may be (a 99% likelihood-ratio set for its place): for a small step on
    #: noise this spans many runs, and the step is placed no more precisely than that.
    first: int = -1
    last: int = -1

    @property
    def significant(self) -> bool:
        """Return True when the step is beyond noise at ALPHA."""
        return self.pvalue < ALPHA


def _np() -> Any:
    import numpy

    return numpy


def side(values: Sequence[float]) -> Side:
    """Return the mean, standard deviation (n-1) and count of ``values``."""
    n = len(values)
    if n == 0:
        return Side(math.nan, 0.0, 0)
    x = _np().asarray(values, dtype=float)
    mean = float(x.mean())
    return Side(mean, float(x.std(ddof=1)) if n > 1 else 0.0, n)


def welch(left: Sequence[float], right: Sequence[float]) -> tuple[float, float, float]:
    """Return the difference of means (right - left), its 95% half-width and the two-sided
    p-value of Welch's t-test."""
    from scipy import special  # the t distribution's ufuncs: ~50x scipy.stats' wrappers

    a, b = side(left), side(right)
    diff = b.mean - a.mean
    var = a.sd ** 2 / a.n + b.sd ** 2 / b.n
    if var <= 0.0:
        return diff, 0.0, (1.0 if diff == 0 else 0.0)
    se = math.sqrt(var)
    df = var ** 2 / ((a.sd ** 2 / a.n) ** 2 / max(a.n - 1, 1)
                     + (b.sd ** 2 / b.n) ** 2 / max(b.n - 1, 1))
    half = float(special.stdtrit(df, 0.975)) * se
    p = float(2 * special.stdtr(df, -abs(diff) / se))
    return diff, half, p


def _split_t(rows: Any, np: Any) -> Any:
    """|t| of every split (columns: left sizes MIN_SIDE..n-MIN_SIDE) of every row, with the
    pooled variance: a split near an end, with a few values that happen to agree, then cannot
    outweigh a real step (Welch's variance per side lets it)."""
    n = rows.shape[1]
    s1 = np.cumsum(rows, axis=1)
    s2 = np.cumsum(rows * rows, axis=1)
    k = np.arange(MIN_SIDE, n - MIN_SIDE + 1)
    n1, n2 = k.astype(float), (n - k).astype(float)
    l1, l2 = s1[:, k - 1], s2[:, k - 1]
    r1, r2 = s1[:, -1:] - l1, s2[:, -1:] - l2
    m1, m2 = l1 / n1, r1 / n2
    pooled = (np.maximum(l2 - n1 * m1 * m1, 0.0) + np.maximum(r2 - n2 * m2 * m2, 0.0)) / (n - 2)
    se = np.sqrt(pooled * (1.0 / n1 + 1.0 / n2))
    with np.errstate(divide="ignore", invalid="ignore"):
        t = np.abs(m2 - m1) / se
    t[~np.isfinite(t)] = 0.0  # a constant segment: no split differs
    return t


_NULLS: dict[int, Any] = {}
_GRID = (6, 8, 10, 12, 15, 20, 25, 30, 40, 50, 60, 80, 100, 125, 150, 200)


def _null(n: int) -> Any:
    """The largest |t| over every split of ``PERMUTATIONS`` normal series, for the grid length
    at or below ``n`` (the quantiles grow with the length, so a screen with a shorter one
    never dismisses a step the permutation test would keep). Only a clear non-step is
    dismissed by it."""
    np = _np()
    size = max([g for g in _GRID if g <= n] or [_GRID[0]])
    if size not in _NULLS:
        draws = np.random.default_rng(size).standard_normal((PERMUTATIONS, size))
        _NULLS[size] = _split_t(draws, np).max(axis=1)
    return _NULLS[size]


def prepare(longest: int) -> None:
    """Draw the screens' null distributions now, for segments up to ``longest`` values (so
    that workers forked after this share them instead of drawing them each)."""
    for size in _GRID:
        if size <= min(longest, 2 * LOCAL):
            _null(size)


def permutation_p(segment: Sequence[float], index: int, seed: int = 0,
                  permutations: int = PERMUTATIONS, wanted: float = SUGGEST) -> float:
    """Return the permutation p-value of a step at ``index`` of ``segment``: how often a
    shuffled segment has a split at least as far apart (largest |t| over every split).

    The shuffles are drawn in rounds and stop as soon as the answer cannot fall below
    ``wanted``, the level the caller decides at (then the p-value returned is the estimate so
    far); a step that stays rare is tested with all ``permutations``."""
    np = _np()
    x = np.asarray(segment, dtype=float)
    n = len(x)
    if index < MIN_SIDE or n - index < MIN_SIDE:
        return 1.0
    x = (x - x.mean()) / (x.std() or 1.0)  # scale-free: the same for any unit
    observed = float(_split_t(x[None, :], np)[0, index - MIN_SIDE]) - 1e-9
    screen = _null(n)
    if observed < float(np.quantile(screen, 1 - 2 * SUGGEST)):
        return float((screen >= observed).mean())  # clearly no step: no shuffles needed
    rng = np.random.default_rng(seed)
    exceed = drawn = 0
    while drawn < permutations:
        batch = min(permutations - drawn, max(100, drawn))  # 100, 100, 200, 400, ...
        shuffled = rng.permuted(np.broadcast_to(x, (batch, n)), axis=1)
        exceed += int((_split_t(shuffled, np).max(axis=1) >= observed).sum())
        drawn += batch
        if (1 + exceed) / (1 + permutations) >= wanted:
            break  # it cannot end below ``wanted`` any more
        if drawn >= 200 and (1 + exceed) / (1 + drawn) >= 2 * wanted >= 2 * SUGGEST:
            break  # a possible step's p far above SUGGEST: the estimate says enough
    return (1 + exceed) / (1 + drawn)


def step_at(values: Sequence[float], index: int, start: int, stop: int,
            seed: int = 0, wanted: float = SUGGEST) -> Step:
    """Return the step at ``index`` between the segment's bounds [start, stop)."""
    left, right = values[start:index], values[index:stop]
    diff, half, _ = welch(left, right)
    before, after = side(left), side(right)
    base = before.mean if before.mean else math.nan
    near = max(start, index - LOCAL)
    local = values[near:min(stop, index + LOCAL)]
    if min(len(left), len(right)) < MIN_SIDE:
        p = 1.0  # one value, or two, is an outlier, not a level: never a step
    else:
        p = permutation_p(local, index - near, seed=seed + index, wanted=wanted)
        stretches, few = stretches_of(len(values)), short(len(local), index - near)
        if few or stretches > 1:
            parametric = split_p(local, index - near)
            if few:
                p = min(p, parametric)
            if stretches > 1:  # a long series: its every stretch was searched
                p = max(p, min(1.0, parametric * stretches))
    first, last = place(values[start:stop], index - start)
    low, high = (diff - half) / base, (diff + half) / base
    if all(v >= 0 for v in values[start:stop]):
        low = max(low, -1.0)  # a time or a rate of 0 or more never falls by more than all of it
    return Step(index, before, after, p, diff / base, low, high, start + first, start + last)


def short(n: int, index: int) -> bool:
    """Whether a segment of ``n`` values split at ``index`` is too short for the permutation
    test to reach ALPHA at all: even a split that separates every value of one side from the
    other's is one arrangement in comb(n, index), and 6 runs before a step and 5 after it
    (462 arrangements) can never be called significant at 0.001 that way."""
    return math.comb(n, index) < 2 / ALPHA


def split_p(segment: Sequence[float], index: int) -> float:
    """Return the p-value of a step at ``index`` of a short segment by Student's t-test with
    the pooled variance (on the logarithms of positive values: run times and rates vary by a
    factor, not an amount), Bonferroni-corrected for every split the detector could have
    chosen. Pooled, not Welch's: without a step both sides have one spread, and Welch's
    estimate from 3 values that happen to agree called a quiet history changed."""
    from scipy import special

    x = list(segment)
    if all(v > 0 for v in x):
        x = [math.log(v) for v in x]
    a, b = side(x[:index]), side(x[index:])
    df = a.n + b.n - 2
    pooled = ((a.n - 1) * a.sd ** 2 + (b.n - 1) * b.sd ** 2) / df if df > 0 else 0.0
    se = math.sqrt(pooled * (1 / a.n + 1 / b.n))
    if se == 0:
        return 1.0 if a.mean == b.mean else 0.0
    p = float(2 * special.stdtr(df, -abs(b.mean - a.mean) / se))
    splits = max(1, len(x) - 2 * MIN_SIDE + 1)
    return min(1.0, p * splits)


#: chi-squared(1) at 99%: the likelihood-ratio cut for the step's place.
_PLACE_CUT = 6.635


def place(segment: Sequence[float], index: int) -> tuple[int, int]:
    """Return the first and last split of ``segment`` whose two-level fit is within the 99%
    likelihood-ratio cut of the best one: where the step may be."""
    np = _np()
    x = np.asarray(segment, dtype=float)
    n = len(x)
    k = np.arange(MIN_SIDE, n - MIN_SIDE + 1)
    if len(k) == 0:
        return index, index
    s1, s2 = np.cumsum(x), np.cumsum(x * x)
    left = s2[k - 1] - s1[k - 1] ** 2 / k
    right = (s2[-1] - s2[k - 1]) - (s1[-1] - s1[k - 1]) ** 2 / (n - k)
    sse = left + right
    best = float(sse.min())
    var = best / max(n - 2, 1)
    if var <= 0:
        return index, index
    inside = k[(sse - best) / var <= _PLACE_CUT]
    return int(min(inside.min(), index)), int(max(inside.max(), index))


def too_small(step: Step, min_change: float) -> bool:
    """True when a step is surely smaller than ``min_change``: its whole 95% interval is. (A
    true 5% step is estimated below 5% half the time: it may still be a possible one.)"""
    return max(abs(step.low), abs(step.high)) < min_change


def stretches_of(n: int) -> float:
    """How many stretches of 2 * LOCAL values (what one local test looks at) a series of
    ``n`` values holds. Past one, a step's p-value is also Student's t-test on the logarithms
    Bonferroni-corrected for every split and every stretch (the larger p counts), so that a
    10,000-run history is no likelier than a 200-run one to show a step in pure noise: the
    permutation test alone, at 0.001 in each of the fifty stretches of 10,000 runs of noise,
    listed a short streak as a step now and then. Permutations cannot go that far below
    0.001 at their cost; the t-test can, and both must agree."""
    return max(1.0, n / (2 * LOCAL))


def _candidates(values: Sequence[float]) -> tuple[list[int], list[int]]:
    """Otava's change points (merged at ALPHA) and its weak candidates (first pass at
    FIRST_PASS), as indexes."""
    from otava.analysis import merge, split

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # scipy's precision warnings on constant windows
        weak = split(list(values), window_len=WINDOW, max_pvalue=FIRST_PASS)
        # Every significant point is kept here; the size rule is ours (``too_small``): a
        # step's estimate is compared with its interval, not alone.
        kept = merge(list(weak), list(values), max_pvalue=ALPHA, min_magnitude=0.0)
    return [int(c.index) for c in kept], [int(c.index) for c in weak]


def detect(values: Sequence[float], min_change: float,
           seed: int = 0, alpha: float = ALPHA) -> tuple[list[Step], Step | None]:
    """Return the steps of ``values`` significant at ``alpha`` (oldest first) and, in the
    segment after the last of them, the strongest possible step that is not (or None)."""
    if len(values) < 2 * MIN_SIDE:
        return [], None
    values = _np().asarray(values, dtype=float)
    kept, weak = _candidates(values)
    kept = [i for i in kept if MIN_SIDE <= i <= len(values) - MIN_SIDE]
    cache: dict[tuple[int, int, int, float], Step] = {}

    def at(i: int, start: int, stop: int, wanted: float) -> Step:
        if (i, start, stop, wanted) not in cache:
            cache[i, start, stop, wanted] = step_at(values, i, start, stop, seed, wanted)
        return cache[i, start, stop, wanted]

    while True:  # drop the weakest that the permutation test does not confirm, then again
        bounds = [0, *kept, len(values)]
        steps = [at(i, bounds[j], bounds[j + 2], ALPHA) for j, i in enumerate(kept)]
        # A listed step is significant and at least the threshold the listing names (a 4%
        # step is not one of "5% or more"); one whose interval reaches it may be possible.
        failing = [s for s in steps if s.pvalue >= alpha or abs(s.change) < min_change]
        if not failing:
            break
        kept.remove(max(failing, key=lambda s: s.pvalue).index)
    # The strongest of the first pass's other candidates after the last step, by Welch's
    # test first (cheap), then by the permutation test.
    start = kept[-1] if kept else 0
    best: tuple[float, int] | None = None
    for i in sorted(set(weak) - set(kept)):
        if i - start < MIN_SIDE or len(values) - i < MIN_SIDE:
            continue
        near = max(start, i - LOCAL)
        diff, half, p = welch(values[near:i], values[i:i + LOCAL])
        level = side(values[near:i]).mean
        if p < SUGGEST and level and (abs(diff) + half) / abs(level) >= min_change and (
                best is None or p < best[0]):
            best = (p, i)
    possible = None
    if best is not None:
        found = at(best[1], start, len(values), SUGGEST)
        possible = found if found.pvalue < SUGGEST and not too_small(found, min_change) \
            else None
    if possible is not None and possible.pvalue < alpha and abs(possible.change) >= min_change:
        # a short segment's clear step
        return [*steps, possible], None
    return steps, possible


def detectable(segment: Sequence[float]) -> float | None:
    """Return the smallest relative step a segment like this one, split in its middle, shows
    at ALPHA with 80% power (None for fewer than two values on a side, or a zero level)."""
    s = side(segment)
    if s.n < 2 * MIN_SIDE or not s.mean:
        return None
    from scipy import stats

    z = float(stats.norm.ppf(1 - ALPHA / 2)) + _Z_POWER
    return z * s.sd * math.sqrt(4.0 / s.n) / abs(s.mean)


def runs_needed(segment: Sequence[float], wanted: float) -> int | None:
    """Return how many runs a segment this noisy needs in all before a step of ``wanted``
    (relative) would be found (None where the level is zero)."""
    s = side(segment)
    if s.n < 2 or not s.mean or wanted <= 0:
        return None
    from scipy import stats

    z = float(stats.norm.ppf(1 - ALPHA / 2)) + _Z_POWER
    return max(2 * MIN_SIDE, math.ceil(4.0 * (z * s.sd / (wanted * abs(s.mean))) ** 2))
