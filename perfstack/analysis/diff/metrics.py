"""Every metric of two reports, matched by name and source and judged: a paired test for
``perfstack ab``'s sides, a two-sample test and the between-session noise for separate sessions,
the family's correction over them."""

from __future__ import annotations

from perfstack.analysis.diff.changes import MetricChange
from perfstack.analysis.diff.drift import drift_for
from perfstack.analysis.diff.family import family_wise
from perfstack.analysis.diff.judge import SMALL_TIME, Judge, one_run_threshold
from perfstack.analysis.job.perrank import RANKED, distributions, is_big
from perfstack.analysis.stats import MIN_EFFECT, compare, compare_paired
from perfstack.report import Better, Metric, Report
from perfstack.report.units import fmt_seconds


def _metric_change(a: Metric | None, b: Metric | None, judge: Judge) -> MetricChange:
    ref = b or a
    assert ref is not None
    change = MetricChange(ref.name, ref.source, ref.layer, ref.unit, ref.better.value,
                          a.value if a else None, b.value if b else None, None, "", "",
                          n_base=len(a.samples or []) if a else 0,
                          n_new=len(b.samples or []) if b else 0)
    if a is None:
        change.verdict, change.reason = "appeared", "only in the new report"
        return change
    if b is None:
        change.verdict, change.reason = "vanished", "only in the base report"
        return change
    if a.value is None or b.value is None:
        change.verdict = "unknown"
        change.reason = "; ".join(r for r in (a.reason, b.reason) if r) or "a value is unknown"
        return change
    change.change = (b.value / a.value - 1) if a.value else None
    base_samples = a.samples or [a.value]
    new_samples = b.samples or [b.value]
    one_run = a.samples_of if a.samples_of != "runs" else b.samples_of
    if (judge.paired and one_run == "runs" and a.samples and b.samples
            and len(a.samples) == len(b.samples)):
        result = compare_paired(a.samples, b.samples)
        change.change = result.change
    else:
        result = compare(base_samples, new_samples)
    change.test = result.test
    change.statistic = result.statistic
    change.pvalue = result.pvalue
    change.reason = result.reason
    significant: bool | None = result.significant
    if one_run != "runs" and a.samples and b.samples:
        # The samples share one run's conditions: their spread is not the run-to-run noise,
        # and a t-test on them would call any shift between two runs significant.
        change.samples_of = one_run
        if judge.noise is None:
            significant = None
            change.reason = (f"{one_run} of one run per side, and no repeated baseline runs to "
                             f"tell the run-to-run noise (use --repeat 3+)")
        else:
            limit = one_run_threshold(judge.noise)
            outside = change.change is not None and abs(change.change) > limit
            significant = bool(result.significant) and outside
            change.reason = (f"{one_run} of one run per side: beyond noise only above "
                             f"{100 * limit:.1f}% (3x the wall time's run-to-run noise, at "
                             f"least {100 * MIN_EFFECT * 2.5:.0f}%) and by {result.test}; "
                             f"changed at most, never a regression: one profiled run a side "
                             f"(not gated)")
            if significant and ref.better != Better.NEITHER:
                # One run a side cannot tell a change from that run's conditions (a busy
                # machine made torch's step +617% where the baseline runs said -7%): it is
                # said, never counted as a regression or an improvement.
                change.verdict = "changed"
                return change
    elif not judge.paired and significant and change.change is not None:
        beyond, change.corrected_change, why = judge.beyond_sessions(
            change.change, drift_for(ref.layer, judge.machine), ref.unit)
        moved = abs(b.value - a.value)
        if beyond and ref.unit == "s" and judge.wall_s and moved < SMALL_TIME * judge.wall_s:
            # A CPU time that moved a few ms in a run of seconds: other programs on the machine
            # (the kernel's work for them, cache misses) move it that much between sessions.
            beyond, why = False, (f"{fmt_seconds(moved)} is less than {100 * SMALL_TIME:g}% of "
                                  f"the {fmt_seconds(judge.wall_s)} run (separate sessions)")
        if not beyond:
            significant = beyond
            change.reason = f"{result.test} says different, but {why}"
    if significant is None:
        change.verdict = "cannot judge"
    elif not significant:
        change.verdict = "within noise"
    elif ref.better == Better.NEITHER:
        change.verdict = "changed"
    else:
        worse = (b.value > a.value) == (ref.better == Better.LOWER)
        change.verdict = "regression" if worse else "improvement"
    return change


def _scaled(m: Metric, factor: float) -> Metric:
    from perfstack.records import replace

    return replace(m, value=m.value * factor if m.value is not None else None,
                   samples=[v * factor for v in m.samples] if m.samples else m.samples)


def metric_changes(base: Report, new: Report, judge: Judge,
                   scale: dict[str, tuple[float, float]] | None = None,
                   lead: str | None = None) -> list[MetricChange]:
    """Return every metric of either report, matched by (name, source), judged; a metric
    named in ``scale`` is judged with its values multiplied by the factors given for the base
    and the new side (a per-step figure put per sample). Where either is a big job's, each
    per-rank figure is compared by its median, p90 and most over the ranks
    (``perfstack.analysis.job.perrank.distributions``), not rank by rank."""
    big = is_big(base) or is_big(new)  # (a big job's ranks compare as distributions)

    def index(report: Report, side: int) -> dict[tuple[str, str], Metric]:
        metrics = ([m for m in report.metrics if not RANKED.match(m.name)]
                   + distributions(report)) if big else report.metrics
        return {(m.name, m.source): _scaled(m, scale[m.name][side])
                if scale and m.name in scale else m for m in metrics}

    a, b = index(base, 0), index(new, 1)
    keys = list(dict.fromkeys([*a, *b]))
    changes = [_metric_change(a.get(k), b.get(k), judge) for k in keys]
    family_wise(changes, lead=lead)
    order = {"regression": 0, "improvement": 1, "changed": 2, "within noise": 3,
             "cannot judge": 4, "unknown": 5, "appeared": 6, "vanished": 7}
    changes.sort(key=lambda c: (order.get(c.verdict, 9), -abs(c.change or 0.0)))
    return changes



def different_work(metrics: list[MetricChange], lead: str | None) -> None:
    """Two runs of one script with other arguments did different work: a total of the run
    (its wall time, its CPU time, its page faults) is compared, not judged better or worse;
    only the workload's own figure is."""
    for m in metrics:
        if m.name != lead and m.verdict in ("regression", "improvement"):
            m.verdict = "changed"
            m.reason = (f"{m.reason}; the sides ran other arguments (different work): "
                        "compared, not judged better or worse")
