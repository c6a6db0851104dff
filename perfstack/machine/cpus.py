"""Usable CPUs and compute threads: one definition for the oversubscription finding of a
report, the sweep's warnings and the thread counts a backend sweeps."""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

from perfstack.records import datarecord

#: Variables whose value is a number of compute threads per process. PERFSTACK_THREADS is the
#: number of Python threads a workload starts when it follows perfstack's convention (the gil
#: backend's sweep sets it); each may run torch's whole intra-op pool.
THREAD_COUNT_VARIABLES = ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS",
                          "PERFSTACK_THREADS")


def usable_cpus(environment: Mapping[str, Any] | None = None) -> int | None:
    """Return the CPUs a run may use: from a report's environment block (its CPU affinity,
    else its logical CPUs; None when it recorded neither), or, with no block, this process's
    own affinity."""
    if environment is None:
        try:
            return len(os.sched_getaffinity(0))
        except AttributeError:  # not Linux
            return os.cpu_count() or 1
    cpu = environment.get("cpu")
    if not isinstance(cpu, Mapping):
        return None
    affinity = cpu.get("affinity")
    if isinstance(affinity, list) and affinity:
        return len(affinity)
    logical = cpu.get("logical_cpus")
    return logical if isinstance(logical, int) and logical > 0 else None


@datarecord(frozen=True)
class Oversubscription:
    """More compute threads than CPUs: how many of each, and where the count came from."""

    threads: int  # all processes together
    cpus: int
    processes: int
    per_process: int
    parts: list[str]  # "OMP_NUM_THREADS=4", "torch intra-op threads 4", ...

    def describe(self) -> str:
        """One line: what makes up the count, and the CPUs."""
        return (f"{', '.join(self.parts)} x {self.processes} process"
                f"{'es' if self.processes > 1 else ''} = {self.threads} threads on "
                f"{self.cpus} usable CPUs")


def oversubscription(settings: Mapping[str, str], torch_facts: Mapping[str, Any] | None,
                     cpus: int | None, processes: int = 1) -> Oversubscription | None:
    """Return the oversubscription of ``processes`` processes, or None when the threads fit.

    Threads per process are the largest of the thread-count ``settings`` (environment
    variables) and the intra-op threads torch reported using (``torch_facts``, the
    environment's torch block); with PERFSTACK_THREADS Python threads, that times torch's
    pool."""
    if cpus is None:
        return None
    counts = {k: int(v) for k, v in settings.items()
              if k in THREAD_COUNT_VARIABLES and str(v).strip().isdigit()}
    parts = [f"{k}={v}" for k, v in counts.items()]
    intra = (torch_facts or {}).get("intra_op_threads")
    if isinstance(intra, int) and not isinstance(intra, bool):
        parts.append(f"torch intra-op threads {intra}")
    per_process = max([*counts.values(), intra if isinstance(intra, int) else 0])
    if "PERFSTACK_THREADS" in counts and isinstance(intra, int):
        per_process = counts["PERFSTACK_THREADS"] * intra
    if per_process * processes <= cpus:
        return None
    return Oversubscription(per_process * processes, cpus, processes, per_process, parts)
