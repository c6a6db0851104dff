"""What the baseline runs (the workload with no profiler) give the report: its wall time,
instructions, step time and the workload's own figures, each backend's overhead against it,
and what the workload process saw. Functions of the finished runs' records and folders."""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from datetime import datetime
from typing import Any

from perfstack.machine.load import DISTURBED_CPUS
from perfstack.plugin.backend import Outcome, StepWindow
from perfstack.report import Finding, Metric, Overhead, Report
from perfstack.run import assembly
from perfstack.runfolder import rundir

#: Why a figure that needs the baseline is unknown when the user asked for none.
NO_BASELINE = "no baseline run (--repeat 0): unknown"


def clean_walls(baseline: Sequence[Outcome]) -> list[float]:
    """The wall times of the baseline runs that ended cleanly."""
    return [o.record.wall_s for o in baseline
            if o.record.exit.clean and o.record.wall_s is not None]


def wall_metric(baseline: Sequence[Outcome], repeat: int) -> Metric:
    """The baseline's wall time (unknown, and why, under --repeat 0)."""
    metric = assembly.wall_metric(clean_walls(baseline))
    if repeat == 0:
        metric.reason = NO_BASELINE
    return metric


def instruction_metric(baseline: Sequence[Outcome]) -> list[Metric]:
    """The baseline's instruction counts, when the machine counted them in every run."""
    return assembly.instruction_metric([
        o.record.instructions.value for o in baseline
        if o.record.exit.clean and o.record.instructions is not None])


def resident_metric(baseline: Sequence[Outcome], distributed: bool) -> list[Metric]:
    """The resident memory after each step of the median baseline run."""
    if distributed:
        return []
    clean = sorted((o for o in baseline if o.record.exit.clean and o.record.wall_s),
                   key=lambda o: o.record.wall_s or 0.0)
    if not clean:
        return []
    return assembly.resident_metric(rundir.RunFolder(clean[len(clean) // 2].artifact_dir)
                                    .step_resident())


def teardown_metric(baseline: Sequence[Outcome]) -> list[Metric]:
    """How long each clean baseline run's process went on after its script returned."""
    out = []
    for o in baseline:
        end = rundir.RunFolder(o.artifact_dir).script_end()
        if not o.record.exit.clean or end is None or o.record.wall_s is None:
            continue
        try:
            started = datetime.fromisoformat(o.record.started).timestamp()
        except (TypeError, ValueError):
            continue
        out.append(max(0.0, started + o.record.wall_s - end))
    return assembly.teardown_metric(out)


def step_metric(baseline: Sequence[Outcome], steps: StepWindow | None,
                distributed: bool) -> list[Metric]:
    """The baseline's own step time (under torchrun, each rank's: ``cross_rank``)."""
    if distributed:
        return []
    return assembly.step_metric([
        rundir.RunFolder(o.artifact_dir).step_times()
        for o in baseline if o.record.exit.clean],
        steps.warmup if steps else 0, steps.measured if steps else None)


def workload_metrics(baseline: Sequence[Outcome]) -> list[Metric]:
    """What the workload reported with perfstack.report_metric, across the baseline; where
    it reported no throughput, the throughput it printed ('throughput: 38.75 samples/s')."""
    runs = []
    for o in baseline:
        if not o.record.exit.clean:
            continue
        folder = rundir.RunFolder(o.artifact_dir)
        entries = folder.workload_metrics()
        if not any(e["name"] == "throughput" for e in entries):
            printed = folder.printed_throughput()
            if printed is not None:
                entries.append(printed)
        runs.append(entries)
    return assembly.workload_metrics(runs)


def workload_environment(baseline: Sequence[Outcome]) -> dict[str, Any]:
    """What the workload process itself saw (the torch it imported, its threads)."""
    for outcome in baseline:
        facts = rundir.RunFolder(outcome.artifact_dir).workload_env()
        if facts is not None and isinstance(facts.get("torch"), dict):
            return {"torch": facts["torch"]}
    return {}


#: A backend's run this much faster than the baseline's (a ratio under 1 - this) says the
#: baseline ran slower, not that a profiler sped the workload up.
FASTER = 0.10


def _unsteady(outcome: Outcome, baseline: Sequence[Outcome]) -> str | None:
    """Why a backend's run cannot be held against the baseline's: other programs' load was
    not the same during them (a drifting load made torch '0.36x', a profiler 'speeding the
    workload up'), or None."""
    runs = [o.record for o in baseline if o.record.exit.clean]
    mine = (outcome.record.machine_load or {}).get("others_cpus")
    theirs = [r.machine_load["others_cpus"] for r in runs if r.machine_load
              and isinstance(r.machine_load.get("others_cpus"), (int, float))]
    if not isinstance(mine, (int, float)) or not theirs:
        return None
    base = statistics.median(theirs)
    if abs(mine - base) > DISTURBED_CPUS and max(mine, base) > DISTURBED_CPUS:
        return (f"unknown (the load changed): other programs kept {base:.1f} CPUs busy "
                f"during the baseline runs, {mine:.1f} during this one")
    return None


def overhead(outcome: Outcome, baseline: Sequence[Outcome], repeat: int,
             steps: StepWindow | None) -> tuple[Overhead | None, str | None]:
    """A backend's run against the baseline (its measured steps under --steps), or why
    there is no overhead figure: none under a load that changed between them, nor where the
    run was faster than the baseline beyond its noise (no profiler speeds a workload up)."""
    if repeat == 0:
        return None, NO_BASELINE
    changed = _unsteady(outcome, baseline)
    found, why = _overhead(outcome, baseline, steps)
    if found is None:
        return found, why
    if changed is not None:
        return None, changed
    noise = (found.baseline_stdev_s or 0.0) / found.baseline_median_s
    if found.ratio < 1 - max(FASTER, 3 * noise):
        return None, (f"unknown: this run was {found.ratio:.2f}x the baseline's time, faster "
                      "than a profiler can make it: the machine's load or speed moved between "
                      "them")
    return found, None


def _overhead(outcome: Outcome, baseline: Sequence[Outcome],
              steps: StepWindow | None) -> tuple[Overhead | None, str | None]:
    """The ratio itself (run or measured steps), or why there is none."""
    walls = clean_walls(baseline)
    if steps is None:
        return assembly.overhead(walls, outcome.record.wall_s, outcome.record.exit.clean)
    base = [rundir.RunFolder(o.artifact_dir).step_times()
            for o in baseline if o.record.exit.clean]
    own = rundir.RunFolder(outcome.artifact_dir).step_times()
    return assembly.step_overhead(base, own, steps.warmup, steps.measured,
                                  outcome.record.exit.clean)


def _step_times(outcome: Outcome, rank: int) -> list[float]:
    """One rank's step times in a run, as the run folder's reader gives them (the steps
    that took no measurable time left out)."""
    return [t for t in rundir.RunFolder(outcome.artifact_dir).step_times(rank) if t > 0]


def cross_rank(report: Report, baseline: list[Outcome], world: int,
               steps: tuple[int, int] | None = None) -> tuple[list[Metric], list[Finding]]:
    """Return per-rank step-time metrics (from the baseline runs' ``perfstack.step()``
    calls), straggler metrics, communication shares and findings of a live torchrun job.
    Under ``--steps`` (``steps``: warm-up, measured) only the measured steps count: each
    rank's times then start at its script's start, imports included."""
    present = sorted({r for o in baseline for r in rundir.RunFolder(o.artifact_dir).ranks()})
    window = slice(steps[0], steps[0] + steps[1]) if steps else slice(None)
    samples = {rank: [t for o in baseline if o.record.exit.clean
                      for t in _step_times(o, rank)[window]]
               for rank in present or range(world)}
    from perfstack.analysis.job.distributed import rank_figures

    return rank_figures(report, samples, publish_steps=True)
