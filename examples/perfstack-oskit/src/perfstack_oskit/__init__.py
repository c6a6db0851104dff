"""perfstack plugin: a command wrapper (``rusage``) and an attached sampler (``rss``)."""

from __future__ import annotations

import json
import statistics
import sys
from collections.abc import Sequence

from perfstack import hookimpl
from perfstack.backend import (
    Attachment,
    Backend,
    Collected,
    Launch,
    Option,
    Outcome,
    RunContext,
)
from perfstack.report import Better, Finding, Layer, Metric, Quantity, Report, Row

from .sampler import RssSampler

#: The hook version this plugin was written for.
PERFSTACK_HOOK_VERSION = 1

RUSAGE_FILE = "rusage.json"
RSS_FILE = "rss.json"
#: Share of the job's CPU time in the kernel from which it is a finding.
KERNEL_SHARE = 33.0


class RusageBackend(Backend):
    """The resource usage of the whole job, from a wrapper around its command."""

    name = "rusage"
    layers = (Layer.HARDWARE,)
    description = "resource usage of the job: CPU time (user, kernel), peak memory, switches"
    primary = "cpu_time"  # what diff compares and tables rank the row by
    # per_rank is not declared: the wrap wraps torchrun and every rank, so perfstack collects
    # this backend once for the whole job.

    def launch(self, ctx: RunContext) -> Launch:
        """Put the wrapper in front of the workload's command (torchrun's, under it)."""
        out = ctx.artifact_dir / RUSAGE_FILE
        return Launch(wrap=[sys.executable, "-m", "perfstack_oskit.wrapper", str(out), "--"])

    def collect(self, ctx: RunContext, outcome: Outcome | None) -> Collected:
        """Read what the wrapper wrote into one row and three metrics."""
        path = ctx.artifact_dir / RUSAGE_FILE
        if not path.is_file():
            return Collected(notes=["the wrapper wrote nothing: it was killed with the job"])
        data = json.loads(path.read_text("utf-8"))
        cpu = data["user_s"] + data["system_s"]
        values = {"cpu_time": Quantity(cpu, "s"),
                  "user_time": Quantity(data["user_s"], "s"),
                  "system_time": Quantity(data["system_s"], "s"),
                  "max_rss": Quantity(data["max_rss_bytes"], "B"),
                  "voluntary_switches": Quantity(data["voluntary_switches"], "count"),
                  "involuntary_switches": Quantity(data["involuntary_switches"], "count")}
        row = Row("job", "the whole job (every process)", self.name, values, {"kind": "job"})
        metrics = [
            Metric("job_cpu_time", cpu, "s", "hardware", self.name, Better.LOWER,
                   description="CPU time of every process of the job, user and kernel"),
            Metric("job_kernel_share", 100 * data["system_s"] / cpu if cpu else None, "%",
                   "hardware", self.name, Better.LOWER,
                   reason=None if cpu else "the job used no measurable CPU time",
                   description="of the job's CPU time spent in the kernel (system calls)"),
            Metric("job_max_rss", data["max_rss_bytes"], "B", "hardware", self.name,
                   Better.LOWER, description="largest resident memory of any one process")]
        return Collected(rows={Layer.HARDWARE: [row]}, metrics=metrics,
                         notes=["getrusage of the wrapper's children: every process the "
                                "job started, once they have all exited"],
                         artifacts={"rusage": path})


class RssBackend(Backend):
    """Resident memory of the workload process over time, sampled from /proc."""

    name = "rss"
    layers = (Layer.HARDWARE,)
    description = "resident memory of each workload process, sampled from /proc"
    primary = "peak"
    options = (
        Option("interval_ms", "milliseconds between samples", 20, int, minimum=1,
               maximum=1000),
        Option("field", "the /proc figure: VmRSS (resident now) or VmHWM (its peak so far)",
               "VmRSS", choices=("VmRSS", "VmHWM")),
    )

    def attach(self, ctx: RunContext, pid: int) -> Attachment:
        """Start sampling the workload's Python process (each rank's, under torchrun)."""
        return RssSampler(pid, ctx.artifact_dir / RSS_FILE,
                          int(ctx.options.get("interval_ms") or 20) / 1e3,
                          str(ctx.options.get("field") or "VmRSS"))

    def collect(self, ctx: RunContext, outcome: Outcome | None) -> Collected:
        """The peak and the median of the samples (per rank under torchrun: perfstack calls
        this once per rank, with that rank's folder, and labels the rows)."""
        path = ctx.artifact_dir / RSS_FILE
        if not path.is_file():
            return Collected(notes=["no samples: the process ended before the sampler started"])
        data = json.loads(path.read_text("utf-8"))
        samples = [int(s) for s in data["samples"]]
        if not samples:
            return Collected(empty="the process ended before its first sample")
        values = {"peak": Quantity(max(samples), "B"),
                  "median": Quantity(statistics.median(samples), "B"),
                  "samples": Quantity(len(samples), "count")}
        row = Row("process", f"workload process ({data['field']})", self.name, values,
                  {"kind": "process"})
        metric = Metric("rss_peak", max(samples), "B", "hardware", self.name, Better.LOWER,
                        description=f"largest sampled {data['field']} of the workload process")
        return Collected(rows={Layer.HARDWARE: [row]}, metrics=[metric],
                         notes=[f"{len(samples)} samples every {data['interval_s'] * 1e3:g} ms"],
                         artifacts={"samples": path})


@hookimpl
def perfstack_backends() -> Sequence[Backend]:
    """Provide both backends."""
    return [RusageBackend(), RssBackend()]


@hookimpl
def perfstack_findings(report: Report) -> Sequence[Finding]:
    """A job that spends more than a third of its CPU time in the kernel: read from the
    finished report (its metrics, and the rusage row for the evidence)."""
    share = next((m.value for m in report.metrics
                  if m.name == "job_kernel_share" and m.source == "rusage"), None)
    if not isinstance(share, (int, float)) or share < KERNEL_SHARE:
        return []
    row = next(r for r in report.layers[Layer.HARDWARE] if r.source == "rusage")
    system, user = row.values["system_time"].value, row.values["user_time"].value
    return [Finding(
        rule="oskit.kernel-time", layer="hardware", severity="warning",
        title=f"{share:.0f}% of the job's CPU time is in the kernel",
        evidence=[f"{system:.2f} s in the kernel, {user:.2f} s in user code (getrusage)"],
        action="look for many small reads or writes, page faults from large allocations, or "
               "threads spinning in system calls (perf record shows which)",
        source="rusage")]
