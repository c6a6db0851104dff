"""The finding rule of a workload whose own child processes (DataLoader workers, a pool) take
CPUs its torch thread pool counts on: read from the ``child_cpus_in_steps`` metric and the
environment, never from a particular backend."""

from __future__ import annotations

from perfstack.machine import cpus
from perfstack.report import Finding, Report

#: CPUs the children must keep busy, on average while the steps ran, to be a finding.
CHILDREN_BUSY = 0.5
#: How far past the usable CPUs the threads and the children may go (averages are rough).
MARGIN = 0.5


def ranks_here(report: Report) -> int:
    """How many of a job's ranks ran on this machine (each has its step time), else 1."""
    return sum(1 for m in report.metrics if m.name.startswith("step_time[rank")) or 1


def children_compete(report: Report) -> list[Finding]:
    """Torch's intra-op threads plus the CPUs the workload's child processes kept busy while
    its steps ran, beyond the usable CPUs: the OpenMP pool waits for CPUs the workers hold,
    and an op's time swings with whichever step the workers were busy in."""
    torch = report.environment.get("torch")
    intra = torch.get("intra_op_threads") if isinstance(torch, dict) else None
    usable = cpus.usable_cpus(report.environment)
    # From the first step on: a compiler the first call ran (torch.compile), or workers
    # spawned and importing torch before it, are not what competed with the steps.
    child = report.metric("child_cpus_in_steps")
    if (not isinstance(intra, int) or isinstance(intra, bool) or usable is None
            or child is None or not isinstance(child.value, (int, float))):
        return []
    # A job's ranks on this machine each keep torch's threads (their children are summed).
    ranks = ranks_here(report)
    threads = intra * ranks
    busy = float(child.value)
    # One torch thread is one more runnable thread, no pool whose threads wait for each other
    # (measured: 2 threads beside two busy workers on 2 CPUs made the ops of a step 48x
    # slower than 1 thread did, and the step 2x slower).
    if intra < 2 or busy < CHILDREN_BUSY or threads + busy <= usable + MARGIN:
        return []
    recompiled = report.metric("compile_in_steps")
    if recompiled is not None and recompiled.value:
        # torch.compile compiled again inside the steps: its compile workers were the child
        # processes then, no workers that compete step after step
        return []
    keep = max(1, (usable - round(busy)) // ranks)
    return [Finding(
        rule="threads.children-compete",
        title=(f"torch's {threads} threads and the workload's child processes compete for "
               f"{usable} CPUs"),
        layer="hardware", severity="warning",
        evidence=[f"torch intra-op threads {intra}"
                  + (f" x {ranks} ranks" if ranks > 1 else " in the workload's process")
                  + f" + about {busy:.1f} CPUs kept busy by "
                  f"{'their' if ranks > 1 else 'its'} child processes from the first "
                  f"step on (child_cpus_in_steps, from {child.source}) = "
                  f"{threads + busy:.1f} on {usable} usable CPUs"],
        action=(f"give the workload's process{'es' if ranks > 1 else ''} fewer threads "
                f"(torch.set_num_threads({keep})) or the DataLoader fewer workers; "
                "'perfstack sweep --env OMP_NUM_THREADS=...' finds the best"),
        source="perfstack")]
