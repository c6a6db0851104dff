"""The report's run-level figures from plain data, and the report assembled from them: no
processes, no files.

What the driver computes from the runs it made — the baseline's wall time and instruction
counts as metrics, what the workload reported itself, a backend's overhead, its status from
how its run ended, one rank's records merged into the job's, records that do not fit the
schema, processes a run left behind — as pure functions of plain values, tested with plain
data (tests/test_assembly.py).
"""

from __future__ import annotations

import statistics
from collections.abc import Callable, Iterable, Sequence
from typing import TYPE_CHECKING, Any

from perfstack.analysis.rules import contention, roofline
from perfstack.analysis.stats import summarize
from perfstack.plugin.backend import Collected
from perfstack.report import (
    BackendResult,
    Better,
    Finding,
    Layer,
    Metric,
    Overhead,
    Report,
    RunInfo,
    Status,
    order_findings,
)
from perfstack.report.files import schema_errors
from perfstack.report.job.rankrows import merge_across_ranks

if TYPE_CHECKING:
    from perfstack.plugin.manager import BackendEntry


def status_of(exit_status: str, clean: bool) -> Status:
    """A backend's status from how its run of the workload ended."""
    if exit_status == "timeout":
        return Status.TIMEOUT
    if exit_status == "interrupted":
        return Status.INTERRUPTED
    return Status.OK if clean else Status.CRASHED


def wall_metric(walls: Sequence[float]) -> Metric:
    """The baseline's wall time: the median of its clean runs, every run a sample."""
    if not walls:
        return Metric("wall_time", None, "s", "run", "baseline", Better.LOWER,
                      reason="no baseline run finished cleanly")
    return Metric("wall_time", summarize(list(walls)).median, "s", "run", "baseline",
                  Better.LOWER, samples=list(walls))


def instruction_metric(counts: Sequence[int | float | None]) -> list[Metric]:
    """The baseline's instruction counts, when the machine counted them in every clean run."""
    if not counts or any(c is None for c in counts):
        return []
    values = [float(c) for c in counts if c is not None]
    return [Metric("instructions", summarize(values).median, "count", "hardware", "baseline",
                   Better.LOWER, samples=values)]


def step_metric(runs: Sequence[Sequence[float]], warmup: int = 0,
                measured: int | None = None) -> list[Metric]:
    """The unprofiled step time: the median over the clean baseline runs' steps (one list of
    step durations per run), every step a sample. Under ``--steps`` (``measured`` given) each
    list starts at the script's start, and the measured steps are those after the ``warmup``
    ones; without it the durations are between consecutive steps. Nothing when no run marked
    a step that could be timed."""
    end = warmup + measured if measured is not None else None
    times = [float(t) for run in runs for t in run[warmup:end] if t > 0]
    if not times:
        return []
    return [Metric("step_time", statistics.median(times), "s", "run", "baseline", Better.LOWER,
                   samples=times[:1000], samples_of="steps",
                   description=f"median of {len(times)} steps of the baseline runs (no "
                               "profiler), warm-up steps excluded")]


def teardown_metric(teardowns: Sequence[float]) -> list[Metric]:
    """The baseline runs' teardown: seconds from the script's return to the process's end,
    one sample per run; nothing where no run said when its script returned."""
    if not teardowns:
        return []
    return [Metric("teardown_time", statistics.median(teardowns), "s", "run", "baseline",
                   Better.LOWER, samples=list(teardowns), detail=True,
                   description="seconds from the workload's script returning to its process's "
                   "end (atexit handlers, threads and worker pools joined, the interpreter's "
                   "exit), the median of the baseline runs")]


def resident_metric(per_step: Sequence[int]) -> list[Metric]:
    """The process's resident memory after each step of one baseline run (the median one),
    the last as the value; nothing when the kernel did not say."""
    if not per_step:
        return []
    step = max(1, len(per_step) // 1000)  # a long run: every n-th step, at most 1,000
    return [Metric("step_resident", per_step[-1], "B", "run", "baseline", Better.LOWER,
                   samples=[float(v) for v in per_step[::step]], samples_of="steps",
                   detail=True,
                   description="the process's resident memory just after each step of the "
                   "baseline run with the median wall time (no profiler): the samples are "
                   "the steps in order, the value the last (the most is max_rss's to say)")]


def workload_metrics(runs: Sequence[Sequence[dict[str, Any]]]) -> list[Metric]:
    """What the workload reported with perfstack.report_metric: one list of entries per clean
    baseline run (a metric reported twice in one run: the last wins), one sample per run."""
    series: dict[str, list[dict[str, Any]]] = {}
    for entries in runs:
        last: dict[str, dict[str, Any]] = {}
        for entry in entries:
            last[entry["name"]] = entry
        for name, entry in last.items():
            series.setdefault(name, []).append(entry)
    metrics = []
    for name, entries in series.items():
        values = [e["value"] for e in entries]
        better = entries[-1]["better"]
        printed = entries[-1].get("printed")
        metrics.append(Metric(name, statistics.median(values), entries[-1]["unit"], "run",
                              "workload", Better(better) if better in ("higher", "lower")
                              else Better.NEITHER, samples=values,
                              description=f"as the workload printed it ('{printed}')"
                              if isinstance(printed, str) else None))
    return metrics


def overhead(walls: Sequence[float], wall_s: float | None,
             clean: bool) -> tuple[Overhead | None, str | None]:
    """A backend's run against the clean baseline runs' wall times, or why there is none."""
    if not walls:
        return None, "no baseline run finished cleanly to compare with"
    if not clean or wall_s is None:
        return None, "the workload did not finish cleanly under this backend"
    base = summarize(list(walls))
    return Overhead(wall_s / base.median, base.median, base.stdev, base.n), None


def step_overhead(baseline_steps: Sequence[Sequence[float]], run_steps: Sequence[float],
                  warmup: int, measured: int, clean: bool) -> tuple[Overhead | None, str | None]:
    """Under ``--steps``: a backend's measured steps against the clean baseline runs' (each a
    list of step durations; the measured ones are those after the ``warmup`` steps)."""
    base = [t for steps in baseline_steps for t in steps[warmup:warmup + measured]]
    own = list(run_steps[warmup:warmup + measured])
    if not base:
        return None, "no baseline run reached its measured steps to compare with"
    if not clean or not own:
        return None, "the workload did not reach its measured steps under this backend"
    ref = summarize(base)
    return Overhead(statistics.median(own) / ref.median, ref.median, ref.stdev, ref.n,
                    basis="step"), None


def merge_rank(merged: Collected, part: Collected, rank: int, prefix: bool) -> None:
    """Add one rank's records to ``merged``; with several ranks, keys and names say the rank."""
    def key(k: str) -> str:
        return f"rank{rank}:{k}" if prefix else k

    for layer, rows in part.rows.items():
        for row in rows:
            row.attrs["rank"] = rank
            if prefix:
                row.key, row.name = key(row.key), f"[rank {rank}] {row.name}"
                row.links = {k: [key(v) for v in vs] for k, vs in row.links.items()}
        merged.rows.setdefault(layer, []).extend(rows)
    for metric in part.metrics:
        if prefix:
            metric.name = f"{metric.name}[rank{rank}]"
        merged.metrics.append(metric)
    for finding in part.findings:
        if prefix:
            finding.title = f"[rank {rank}] {finding.title}"
        merged.findings.append(finding)
    for label, path in part.artifacts.items():
        merged.artifacts[f"{label}.rank{rank}" if prefix else label] = path
    merged.notes += [f"rank {rank}: {note}" if prefix else note for note in part.notes]


def malformed(collected: Collected) -> list[str]:
    """What in a backend's records does not fit the report's schema (nothing of it is kept)."""
    problems = []
    for layer, rows in collected.rows.items():
        if not isinstance(layer, Layer):
            problems.append(f"rows under {layer!r}, which is not a perfstack.Layer")
            continue
        for row in rows:
            problems += [f"{layer.value} row {row.key!r}: {p}"
                         for p in schema_errors(row.to_dict(), "row")]
    for metric in collected.metrics:
        problems += [f"metric {metric.name!r}: {p}"
                     for p in schema_errors(metric.to_dict(), "metric")]
    for finding in collected.findings:
        problems += [f"finding {finding.rule!r}: {p}"
                     for p in schema_errors(finding.to_dict(), "finding")]
    return problems


def left_running(stopped: Sequence[tuple[str, Sequence[str]]]) -> list[Finding]:
    """A finding naming the processes runs left behind, which perfstack stopped: (run id,
    ['pid N: command', ...]) per run."""
    if not stopped:
        return []
    count = sum(len(procs) for _, procs in stopped)
    return [Finding(
        rule="run.left-running",
        title=f"the workload left {count} process{'es' if count != 1 else ''} running "
              "after it ended; perfstack stopped them",
        layer="run", severity="warning",
        evidence=[f"{run}: {proc}" for run, procs in stopped for proc in procs][:20],
        action="wait for (or stop) the processes the workload starts before it exits; a "
               "child in a session of its own outlives its parent",
        source="perfstack")]


def result_of(entry: BackendEntry, status: Status, **fields: Any) -> BackendResult:
    """Return a backend's entry of the report: its name, layers, package and declared primary
    value, with ``status`` and the other ``fields``."""
    return BackendResult(name=entry.backend.name, status=status,
                         layers=[layer.value for layer in entry.backend.layers],
                         package=entry.package, primary=entry.backend.primary_by_kind(),
                         **fields)


#: The figures across a job's ranks, from the report of every rank (metrics, findings).
AcrossRanks = Callable[[Report], tuple[list[Metric], list[Finding]]]


def build_report(run: RunInfo, environment: dict[str, Any], results: list[BackendResult],
                 collected: Iterable[Collected], findings: Callable[[Report], list[Finding]],
                 *, lead_metrics: Sequence[Metric] = (), across_ranks: AcrossRanks | None = None,
                 more_findings: Sequence[Finding] = ()) -> Report:
    """The report, assembled the one way ``run`` and ``analyze`` both use: every backend's
    rows, metrics and findings; then the run's own figures first among the metrics; the
    figures across ranks; the findings of the rules (``findings``, the plugins' rules over
    the whole report) and ``more_findings``; the findings in the order every format shows."""
    report = Report(run=run, environment=environment, backends=results)
    for one in collected:
        for layer, rows in one.rows.items():
            report.layers[layer].extend(rows)
        report.metrics.extend(one.metrics)
        report.findings.extend(one.findings)
    report.metrics[:0] = list(lead_metrics)
    if across_ranks is not None:
        metrics, found = across_ranks(report)
        report.metrics.extend(metrics)
        report.findings.extend(found)
        ranks = len({r.attrs["rank"] for rows in report.layers.values() for r in rows
                     if isinstance(r.attrs.get("rank"), int)})
        merged = merge_across_ranks(report)  # after the figures that read each rank's rows
        if merged:
            report.environment["rows_across_ranks"] = {"ranks": ranks, "merged_away": merged}
    metrics, found = roofline.annotate(report)
    report.metrics.extend(metrics)
    report.findings.extend(found)
    report.findings.extend(findings(report))
    report.findings.extend(more_findings)
    contention.qualify(report)
    report.findings[:] = order_findings(report.findings)
    return report
