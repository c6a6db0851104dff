"""More threads than CPUs: torch's intra-op threads, per process, against the CPUs the job has."""

from __future__ import annotations

from perfstack.analysis.rules.children import ranks_here
from perfstack.analysis.rules.time import share_of
from perfstack.machine import cpus
from perfstack.report import Finding, Report


def oversubscription(report: Report) -> list[Finding]:
    """More torch threads than the CPUs each process of the job has, with the setting that fits."""
    torch = report.environment.get("torch")
    settings = report.environment.get("threads")
    if not isinstance(torch, dict):
        return []
    ranks = ranks_here(report)
    found = cpus.oversubscription(settings if isinstance(settings, dict) else {}, torch,
                                  cpus.usable_cpus(report.environment), ranks)
    if found is None:
        return []
    evidence = [found.describe()]
    spin = share_of(report, "split.openmp")
    if spin is not None:
        evidence.append(f"the OpenMP pool spins or waits {spin[0]:.1f}% of the native CPU "
                        f"time (split.openmp, from {spin[1]})")
    return [Finding(
        rule="threads.oversubscribed",
        title=f"{found.threads} compute threads on {found.cpus} CPUs",
        layer="hardware", severity="warning", evidence=evidence,
        action=(f"set OMP_NUM_THREADS (or torch.set_num_threads) to "
                f"{max(1, found.cpus // ranks)} per process; 'perfstack sweep --env "
                "OMP_NUM_THREADS=...' finds the best"),
        source="perfstack")]
