"""One change of a comparison: an environment fact's, a metric's with its verdict.

Plain records, shared by the diff (``analysis.diff``) and its lead (``analysis.lead``).
"""

from __future__ import annotations

from typing import Any

from perfstack.records import datarecord


@datarecord
class EnvChange:
    """One environment fact that differs."""

    what: str
    base: Any
    new: Any


@datarecord
class MetricChange:
    """A metric on either side, and the verdict."""

    name: str
    source: str
    layer: str
    unit: str
    better: str
    base: float | None
    new: float | None
    change: float | None  # relative: new / base - 1
    verdict: str  # regression | improvement | changed | within noise | cannot judge |
    #               appeared | vanished | unknown
    reason: str
    test: str | None = None
    statistic: float | None = None  # the test's statistic (t, or z for Mann-Whitney)
    n_base: int = 0
    n_new: int = 0
    #: "runs" when both sides' samples are independent runs; else the samples are the steps or
    #: intervals of one run per side, judged against the run-to-run noise and never gated
    samples_of: str = "runs"
    #: the change with the machine's own drift (the probes) taken out, for times and rates
    corrected_change: float | None = None
    #: the test's two-sided p-value, before the correction for the metrics judged together
    pvalue: float | None = None
