"""The ``resources`` backend: what the OS accounted for each run of the workload.

Wall time, user and system CPU time, CPU utilisation, peak memory (max RSS), page faults and
context switches, from ``wait4``'s rusage. The OS keeps these books anyway, so this backend
needs no run of its own: it reads the baseline repeats and reports their median, with every
repeat kept as a sample for ``diff``. Its overhead is zero by construction.
"""

from __future__ import annotations

import os
import statistics
from collections.abc import Callable, Sequence

from perfstack import hookimpl
from perfstack.plugin.backend import Availability, Backend, Collected, Outcome, RunContext
from perfstack.report import Better, Finding, Layer, Metric, Quantity, Report, Row
from perfstack.runfolder import rundir

# rusage field -> (metric name, row title, unit, better)
COUNTERS: dict[str, tuple[str, str, str, Better]] = {
    "user_s": ("cpu_user_time", "user CPU time", "s", Better.LOWER),
    # The kernel accounts system time in scheduler ticks (4 ms here): a short workload's
    # runs read 0-16 ms, a handful of ticks, and an A/A session of six such pairs was once
    # in ~15 "significantly" 136% worse. Shown and compared, never gated: what the kernel's
    # work costs is in the wall time, which is gated.
    "system_s": ("cpu_system_time", "system CPU time", "s", Better.NEITHER),
    "max_rss_bytes": ("max_rss", "peak resident memory (max RSS)", "B", Better.LOWER),
    "minor_faults": ("page_faults_minor", "minor page faults", "count", Better.LOWER),
    "major_faults": ("page_faults_major", "major page faults (I/O)", "count", Better.LOWER),
    # Waits are the workload's (locks, I/O, sleeps), but also its thread pools yielding when
    # other programs hold the CPUs: under a competing load the count rose by more than the
    # gate's 5% with the same work (tests/test_ab.py). Shown and compared, never gated: the
    # time they cost is in the time metrics, which are corrected for the machine's drift.
    "voluntary_switches": ("context_switches_voluntary",
                           "voluntary context switches (waits)", "count", Better.NEITHER),
    # Preemptions count the other programs that wanted the CPUs as much as the workload.
    "involuntary_switches": ("context_switches_involuntary",
                             "involuntary context switches (preempted)", "count",
                             Better.NEITHER),
    # Block I/O is mostly the page cache's and writeback's doing, for the whole machine: shown
    # and compared, never gated.
    "block_in": ("block_input_ops", "block input operations", "count", Better.NEITHER),
    "block_out": ("block_output_ops", "block output operations", "count", Better.NEITHER),
}


class ResourcesBackend(Backend):
    """OS resource accounting of the baseline runs (hardware layer)."""

    name = "resources"
    layers = (Layer.HARDWARE,)
    description = "CPU time, utilisation, max RSS, faults and context switches from the OS"
    own_run = False
    quick = True  # reads the baseline run: no cost of its own

    def check(self) -> Availability:
        """Available wherever the OS offers wait4 (Linux, macOS, the BSDs)."""
        if not hasattr(os, "wait4"):
            return Availability.no("this OS has no wait4() resource accounting",
                                   "run perfstack on Linux or macOS")
        return Availability.yes()

    def collect(self, ctx: RunContext, outcome: Outcome | None) -> Collected:
        """Return one hardware row and one metric per counter, medians over the baseline."""
        runs = [o.record for o in ctx.baseline if o.record.rusage and o.record.wall_s]
        if not runs:
            return Collected(notes=["no baseline run was measured"])
        out = Collected()
        notes = []
        if any(not r.exit.clean for r in runs):
            notes.append("includes runs that did not finish cleanly: their counts are partial")
        series: dict[str, list[float]] = {k: [r.rusage[k] for r in runs] for k in COUNTERS}
        series["cpu_utilisation"] = [
            (r.rusage["user_s"] + r.rusage["system_s"]) / r.wall_s for r in runs if r.wall_s
        ]
        rows = []
        for field, (metric, title, unit, better) in COUNTERS.items():
            rows.append(_row(field, title, unit, series[field], metric))
            out.metrics.append(_metric(metric, unit, better, series[field]))
        rows.append(_row("cpu_utilisation", "CPUs busy on average ((user + system) / wall)",
                         "cpus", series["cpu_utilisation"], "cpu_utilisation"))
        out.metrics.append(_metric("cpu_utilisation", "cpus", Better.NEITHER,
                                   series["cpu_utilisation"]))
        folders = [rundir.RunFolder(o.artifact_dir) for o in ctx.baseline
                   if o.record.rusage and o.record.wall_s]
        for field, metric, title, unit, read in (
                ("children_cpu_s", "child_cpu_time",
                 "CPU time of the workload's child processes", "s",
                 rundir.RunFolder.children_cpu),
                ("children_busy_in_steps", "child_cpus_in_steps",
                 "CPUs its child processes kept busy from its first step on", "cpus",
                 rundir.RunFolder.children_busy_in_steps)):
            # Inside user and system time already: the part the workload's children used
            # (under torchrun, every rank's on this node).
            values = [v for f in folders if (v := _every_rank(f, read)) is not None]
            if values and len(values) == len(runs):
                rows.append(_row(field, title, unit, values, metric))
                out.metrics.append(_metric(metric, unit, Better.NEITHER, values))
        out.rows[Layer.HARDWARE] = rows
        out.notes = notes
        return out


def _every_rank(folder: rundir.RunFolder,
                read: Callable[[rundir.RunFolder], float | None]) -> float | None:
    """A figure of the workload's process, summed over its ranks under torchrun; None where
    one of them did not say."""
    ranks = folder.ranks()
    if not ranks:
        return read(folder)
    values = [read(folder.rank(r)) for r in ranks]
    return None if any(v is None for v in values) else sum(v or 0.0 for v in values)


def _row(key: str, title: str, unit: str, values: Sequence[float], metric: str) -> Row:
    # The row restates a metric (the same medians): diff gives it the metric's verdict.
    return Row(
        key=f"rusage.{key}",
        name=title,
        source="resources",
        values={
            "median": Quantity(statistics.median(values), unit),
            "min": Quantity(min(values), unit),
            "max": Quantity(max(values), unit),
        },
        attrs={"runs": len(values), "metric": metric},
    )


#: The metrics a reader sees by default; the rest are details (``show --full``).
HEADLINE = ("cpu_user_time", "cpu_system_time", "max_rss", "cpu_utilisation")


def _metric(name: str, unit: str, better: Better, values: Sequence[float]) -> Metric:
    return Metric(name, statistics.median(values), unit, "hardware", "resources", better,
                  samples=list(values), detail=name not in HEADLINE)


@hookimpl
def perfstack_backends() -> list[Backend]:
    """Provide the resources backend."""
    return [ResourcesBackend()]


#: Minor page faults per second of wall time from which the process churns its memory: each
#: costs the kernel a microsecond or more, so 100k/s is over 10% of a CPU.
MINOR_FAULT_RATE = 100_000.0
#: Major page faults (read from disk) per second that make a run I/O-bound on paging.
MAJOR_FAULT_RATE = 20.0


@hookimpl
def perfstack_findings(report: Report) -> list[Finding]:
    """Flag a high page-fault rate over the baseline runs."""
    wall = report.metric("wall_time")
    if wall is None or not wall.value:
        return []
    found = []
    minor, major = report.metric("page_faults_minor"), report.metric("page_faults_major")
    if minor is not None and minor.value is not None:
        rate = minor.value / wall.value
        if rate >= MINOR_FAULT_RATE:
            found.append(Finding(
                rule="memory.page-faults",
                title=f"high page-fault rate: {rate / 1e3:.0f}k minor faults per second",
                layer="hardware", severity="warning",
                evidence=[f"{minor.value:,.0f} minor page faults in a {wall.value:.2f} s run "
                          f"(baseline median, from {minor.source})"],
                action=("memory is returned to the OS and touched again: keep tensors and "
                        "buffers alive across steps, or use a caching allocator (jemalloc, "
                        "tcmalloc via LD_PRELOAD) or MALLOC_TRIM_THRESHOLD_/MALLOC_MMAP_"
                        "THRESHOLD_ for glibc"),
                source="resources"))
    if major is not None and major.value is not None:
        rate = major.value / wall.value
        if rate >= MAJOR_FAULT_RATE:
            found.append(Finding(
                rule="memory.major-faults",
                title=f"{rate:.0f} major page faults per second: the run waits on paging",
                layer="hardware", severity="warning",
                evidence=[f"{major.value:,.0f} major page faults in {wall.value:.2f} s"],
                action="the working set does not fit in memory, or files are read by mmap "
                       "cold: add memory, shrink the batch, or preload the data",
                source="resources"))
    return found
