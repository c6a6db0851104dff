"""Whether the runs can be judged: a machine busy with other programs (and OpenMP threads that
spin), a baseline too noisy to judge overheads and differences, a backend that slowed the
workload so much its timings are suspect."""

from __future__ import annotations

from perfstack.analysis.stats import summarize
from perfstack.machine import load as machineload
from perfstack.report import Finding, Overhead, Report, RunRecord, Status
from perfstack.report.units import fmt_seconds, pct

#: Baseline relative standard deviation above which differences are hard to see.
NOISE_LIMIT = 0.05


#: A backend run this many times slower than the baseline distorts what it measures.
OVERHEAD_LIMIT = 1.5


def noise(report: Report) -> list[Finding]:
    """The baseline runs' spread, when it is too wide to judge overheads and differences."""
    wall = report.metric("wall_time")
    if wall is None or not wall.samples:
        return []
    samples = wall.samples
    if len(samples) == 1:
        return [Finding(
            rule="run.single-baseline", title="one baseline run: its noise is unknown",
            layer="run", severity="info",
            evidence=[f"baseline wall time {samples[0]:.3f} s, n=1"],
            action="use --repeat 3 or more so overheads and diffs can be judged against noise",
            source="perfstack")]
    spread = summarize(samples).relative_stdev
    if spread is None or spread <= NOISE_LIMIT:
        return []
    return [Finding(
        rule="run.noisy-baseline", title=f"the baseline varies by {spread:.0%} between runs",
        layer="run", severity="warning",
        evidence=[f"wall times: {', '.join(f'{x:.3f}' for x in samples)} s"],
        action=("differences smaller than this are noise: close other programs, run "
                "'python -m pyperf system tune', or raise --repeat"),
        source="perfstack")]


def _overhead_evidence(name: str, wall_s: float | None, o: Overhead) -> str:
    if o.basis == "step":
        own = o.ratio * o.baseline_median_s
        return (f"{name}'s measured steps: median {fmt_seconds(own)} a step vs the baseline "
                f"runs' {fmt_seconds(o.baseline_median_s)} (n={o.baseline_n} steps, --steps)")
    wall = f"{wall_s:.3f} s" if wall_s is not None else "?"
    return (f"{name} run {wall} vs baseline median {o.baseline_median_s:.3f} s "
            f"(n={o.baseline_n})")


def _disturbed_runs(report: Report) -> list[tuple[RunRecord, str]]:
    """The runs other programs disturbed (``perfstack.machine.load``), with why."""
    out = []
    for r in report.run.runs:
        why = machineload.disturbed(r.machine_load)
        if why is not None:
            out.append((r, why))
    return out


def _openmp_spin(report: Report) -> list[str]:
    """What the OpenMP pool took, from the time budget (its part of the native time) or, with
    no wall-time budget, from the CPU-time split alone; nothing when unmeasured."""
    from perfstack.analysis.views.budget import time_budget

    line = next((ln for ln in time_budget(report).lines if ln.part == "openmp"), None)
    if line is not None and line.seconds is not None and line.share:
        return [f"torch's OpenMP threads spun or waited {pct(line.share)} of the wall time "
                f"({line.source})"]
    split = report.metric("split.openmp")
    if split is not None and isinstance(split.value, (int, float)) and split.value:
        return [f"torch's OpenMP threads spinning or waiting took {pct(float(split.value))} of "
                f"the CPU time outside the interpreter ({split.source})"]
    return []


def busy(report: Report) -> list[Finding]:
    """The machine was busy with other programs during some runs: said first, since every
    figure of those runs is partly the other programs' (a CPU-bound process beside a torch
    loop made its OpenMP threads spin for CPUs they could not get)."""
    hit = _disturbed_runs(report)
    if not hit:
        return []
    measured = sum(1 for r in report.run.runs if r.machine_load)
    worst = machineload.most_others(r.machine_load for r, _ in hit)
    evidence = [f"{r.id}: {why}" for r, why in hit[:6]]
    evidence += _openmp_spin(report)
    return [Finding(
        rule="run.busy-machine",
        title=(f"the machine was busy: other programs kept up to {worst:.1f} CPUs busy during "
               f"{len(hit)} of {measured} runs"),
        layer="run", severity="critical", evidence=evidence,
        action=("the figures of those runs are not the workload's alone: run it again on a "
                "quiet machine; where other programs must share it, OMP_NUM_THREADS=1 keeps "
                "torch's OpenMP threads from spinning against them, and 'perfstack ab' "
                "interleaves two versions so both see the same load"),
        source="perfstack")]


def overheads(report: Report) -> list[Finding]:
    """Backends that slowed the workload beyond OVERHEAD_LIMIT (never for a run other programs
    disturbed: its slowdown is theirs)."""
    out = []
    disturbed = {r.id for r, _ in _disturbed_runs(report)}
    baselines = [r for r in report.run.runs if r.role == "baseline" and r.machine_load]
    if baselines and 2 * sum(r.id in disturbed for r in baselines) >= len(baselines):
        return []  # the baseline is not the workload's alone: no overhead can be stated
    for b in report.backends:
        if b.status not in (Status.OK, Status.PARTIAL) or b.overhead is None:
            continue
        if b.run in disturbed:
            continue  # slowed by other programs, not by the profiler
        if b.overhead.ratio > OVERHEAD_LIMIT:
            out.append(Finding(
                rule="run.high-overhead",
                title=f"{b.name} slowed the workload {b.overhead.ratio:.2f}x",
                layer="run", severity="warning",
                evidence=[_overhead_evidence(b.name, b.wall_s, b.overhead)],
                action=(f"read {b.name}'s absolute times with care; compare shares within it, "
                        "or lower its sampling rate or detail"),
                source="perfstack"))
    return out
