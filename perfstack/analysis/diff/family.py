"""The family of metrics one diff judges over repeated runs, and the false-alarm rate it holds:
Holm's weighted step-down across them, the workload's figure first (docs/statistics.md)."""

from __future__ import annotations

from typing import Any

from perfstack.analysis.diff.changes import MetricChange
from perfstack.records import datarecord

#: The chance that one diff calls any metric changed when none changed (Holm's correction
#: across the metrics judged over repeated runs).
FAMILY_ALPHA = 0.05


#: The share of the family's weight the workload's own figure holds (weighted Holm): what
#: the user compares first is judged at 4.5% of the 5%, the other metrics share 0.5% until
#: it is called changed, then the whole 5% (docs/statistics.md: the figure's power, 30%
#: slower over 5 pairs of 10% per-run noise, is 82% at 0.9 and 62% at 0.5).
FIGURE_WEIGHT = 0.9


@datarecord(frozen=True)
class Family:
    """What one diff's verdicts guarantee: how many metrics were judged together, by which
    test, and the rate at which an unchanged workload has any of them called changed."""

    judged: int
    paired: bool
    alpha: float = FAMILY_ALPHA
    figure: str | None = None  # the metric holding FIGURE_WEIGHT of alpha, when one does
    figure_alpha: float | None = None

    def describe(self) -> str:
        """The one line every format prints under its metrics."""
        if not self.judged:
            return ("no metric was judged over repeated runs on both sides, so no false-alarm "
                    "rate applies (repeat the runs: --repeat 3 or more)")
        test = ("the screened paired t-test on the interleaved pairs' log ratios" if self.paired
                else "two-sample tests of the runs (t, Welch or Mann-Whitney)")
        figure = (f"; {self.figure} holds {100 * self.figure_alpha:.1f}% of it"
                  if self.figure and self.figure_alpha is not None else "")
        return (f"false alarms: {self.judged} metrics judged by {test}, with Holm's "
                f"correction: an unchanged workload has any of them called changed in at most "
                f"{100 * self.alpha:.0f}% of comparisons{figure}")

    def to_dict(self) -> dict[str, Any]:
        """The JSON form (a diff's ``family``)."""
        return {"judged": self.judged, "test": "paired" if self.paired else "two-sample",
                "alpha": self.alpha, "figure": self.figure, "figure_alpha": self.figure_alpha,
                "summary": self.describe()}


def family_wise(changes: list[MetricChange], alpha: float = FAMILY_ALPHA,
                lead: str | None = None) -> None:
    """Hold the family-wise error of one diff at ``alpha``: every metric judged by a test over
    repeated runs is one comparison of the family, and a metric the test called significant
    alone stays so only if Holm's step-down method keeps it. One ``ab`` session judges about
    a dozen metrics; at 95% each, an A/A session called one of them changed far more often
    than one time in 20 (3 in 20 measured), and the gate failed with it.

    The workload's figure (``lead``) holds FIGURE_WEIGHT of the family's weight, the others
    share the rest (weighted Holm: the same guarantee, whatever the metrics' dependence).
    Equal weights left a 3x slower workload "within noise" on a busy machine: its p ~0.01
    over five pairs was judged as one of a dozen (0.004), while it is the one comparison the
    user asked for."""
    from perfstack.analysis.stats import holm

    family = _judged(changes)
    weights = _weights(family, lead)
    kept = holm([c.pvalue for c in family if c.pvalue is not None], alpha, weights)
    for c, ok in zip(family, kept, strict=True):
        if not ok and c.verdict in ("regression", "improvement", "changed"):
            c.verdict = "within noise"
            c.reason = (f"{c.test} p={c.pvalue:.2g} alone, not significant among the "
                        f"{len(family)} metrics judged together (Holm, {alpha:.0%} family-wise)")


def family_of(changes: list[MetricChange], lead: str | None, paired: bool,
              alpha: float = FAMILY_ALPHA) -> Family:
    """What ``family_wise`` guaranteed for ``changes``: the metrics judged together, and the
    figure's share when it held one."""
    family = _judged(changes)
    weighted = _weights(family, lead) is not None
    return Family(len(family), paired, alpha, lead if weighted else None,
                  round(alpha * FIGURE_WEIGHT, 6) if weighted else None)


def _judged(changes: list[MetricChange]) -> list[MetricChange]:
    """The metrics judged by a test over repeated runs: the family."""
    return [c for c in changes if c.samples_of == "runs" and c.pvalue is not None]


def _weights(family: list[MetricChange], lead: str | None) -> list[float] | None:
    """Holm's weights: the figure FIGURE_WEIGHT, the others the rest; None (equal weights)
    when the figure is not in the family or is all of it."""
    leads = sum(1 for c in family if c.name == lead)
    others = len(family) - leads
    if not leads or not others:
        return None
    return [FIGURE_WEIGHT / leads if c.name == lead else (1 - FIGURE_WEIGHT) / others
            for c in family]
