"""What else the machine was doing during a run: the CPU time other programs used, and the
time the hypervisor took away (steal).

The probe (``perfstack.machine.probe``) says how slow the machine ran perfstack's own fixed work; it
cannot say why. On a shared machine the usual why is another program: two CPU-bound processes
on 2 CPUs, or OpenMP threads spinning against one, made a torch loop 10x slower here, and a
history that keeps such a run as a data point hides a real change behind it. So every run
records, from the kernel's counters (``/proc/stat``, all CPUs) and perfstack's own
accounting (``os.times``: perfstack and every child it reaped, the workload included), how
many CPUs *other* programs kept busy on average while it ran. ``trend`` and ``gate`` set a run
aside as *disturbed* when that is more than ``DISTURBED_CPUS``, and say so.

Standard library only; Linux (elsewhere nothing is recorded, and nothing is set aside).
A profiler that runs beside the workload in its own process and is reaped after the run (a
sampler) counts as "other" in that run: the history's figures come from the baseline runs,
which have none.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from typing import Any

from perfstack.records import datarecord

#: A run during which other programs kept this many CPUs busy on average, or the hypervisor
#: took this share of the machine's CPU time, is disturbed.
DISTURBED_CPUS = 0.5
DISTURBED_STEAL = 0.10


@datarecord(frozen=True)
class Snapshot:
    """The machine's and perfstack's CPU accounting at one moment."""

    busy_s: float  # every CPU's non-idle time since boot
    steal_s: float
    total_s: float  # every CPU's time since boot, idle included
    ours_s: float  # perfstack's own CPU time and its reaped children's
    cpus: int


def _proc_stat() -> tuple[float, float, float] | None:
    """Return (busy, steal, total) seconds of all CPUs since boot, or None."""
    try:
        with open("/proc/stat", encoding="ascii") as fh:
            first = fh.readline().split()
    except OSError:
        return None
    if not first or first[0] != "cpu":
        return None
    try:
        ticks = [int(x) for x in first[1:]]
    except ValueError:
        return None
    hz = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100
    # user nice system idle iowait irq softirq steal [guest guest_nice: inside user, nice]
    fields = (ticks + [0] * 8)[:8]
    idle = fields[3] + fields[4]
    steal = fields[7]
    total = sum(fields)
    return (total - idle - steal) / hz, steal / hz, total / hz


def snapshot() -> Snapshot | None:
    """Return the accounting now, or None where the kernel does not give it."""
    found = _proc_stat()
    if found is None:
        return None
    t = os.times()
    return Snapshot(found[0], found[1], found[2],
                    t.user + t.system + t.children_user + t.children_system,
                    os.cpu_count() or 1)


def between(start: Snapshot | None, end: Snapshot | None,
            wall_s: float | None) -> dict[str, Any] | None:
    """Return what the rest of the machine did between two snapshots around a run of
    ``wall_s`` seconds: ``others_cpus`` (CPUs kept busy by other programs, on average),
    ``steal`` (the share of all CPUs' time the hypervisor took) and ``cpus``; None without
    both snapshots or a duration."""
    if start is None or end is None or not wall_s or wall_s <= 0:
        return None
    others = max(0.0, (end.busy_s - start.busy_s) - (end.ours_s - start.ours_s))
    total = end.total_s - start.total_s
    steal = (end.steal_s - start.steal_s) / total if total > 0 else 0.0
    return {"others_cpus": round(others / wall_s, 3), "steal": round(max(0.0, steal), 4),
            "cpus": end.cpus}


def disturbed(load: dict[str, Any] | None) -> str | None:
    """Return why a run was disturbed (one phrase), or None when it was not or is unknown."""
    if not load:
        return None
    others, steal = load.get("others_cpus"), load.get("steal")
    if isinstance(others, (int, float)) and others > DISTURBED_CPUS:
        return f"other programs kept {others:.1f} CPUs busy"
    if isinstance(steal, (int, float)) and steal > DISTURBED_STEAL:
        return f"the hypervisor took {steal:.0%} of the CPUs' time"
    return None


def most_others(loads: Iterable[dict[str, Any] | None]) -> float:
    """Return the most CPUs other programs kept busy in any of these runs (0 for none)."""
    found = [load.get("others_cpus") for load in loads if load]
    return max((float(x) for x in found if isinstance(x, (int, float))), default=0.0)
