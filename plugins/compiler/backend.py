"""The ``compile`` backend: what torch.compile did to the time, from torch's own records.

Dynamo records every compile it makes (which frame, how long by phase, why it compiled
again) and every graph break (its reason and the user's line). An in-process hook
(``capture``, this backend's rider) saves those records at the end of every run of the
workload, the baseline's included, so this backend needs no run of its own: it reads the
baseline runs, where no profiler slowed the compiler down, and costs nothing. A workload
that never imports dynamo gets nothing written and an ``empty`` status.

Rows (compile layer): one per compiled frame (the user's function and line, or the resume
function dynamo made after a graph break) with its compiles and their time by phase, and one
per graph break with its reason, torch's hints and the user's file:line. Metrics:
``compile_time`` (every run's, as samples), ``compile_frames``, ``compile_recompiles``,
``compile_graph_breaks``, ``compile_graphs``.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import ClassVar

from perfstack import hookimpl
from perfstack.plugin.backend import (
    Availability,
    Backend,
    Collected,
    InProcessHook,
    Outcome,
    RunContext,
)
from perfstack.report import Finding, Layer, Report
from perfstack.runfolder import rundir

from .capture import COMPILE_FILE
from .records import CompileRun, read, torch_total

SOURCE = "dynamo"
RIDER = "perfstack_plugins.compiler.capture:start"


def _read_run(folder: Path) -> tuple[CompileRun, dict[str, object]] | None:
    """One run's compile records, or None where the workload never imported dynamo (or
    the file is unreadable)."""
    path = rundir.RunFolder(folder).rank(None).path / COMPILE_FILE
    try:
        data = json.loads(path.read_text("utf-8"))
        return read(data), data
    except (OSError, ValueError, TypeError, AttributeError):
        return None


class CompileBackend(Backend):
    """torch.compile's own record of its compiles, read from the baseline runs."""

    name = "dynamo"
    layers = (Layer.COMPILE,)
    description = ("torch.compile: compiled frames, graph breaks with their lines, "
                   "recompiles with their cause, compile time by phase")
    own_run = False
    quick = True  # reads the baseline runs: no cost of its own
    rides = True  # beside any --plugins: a compiled workload's layer is never missing
    publishes = ("compile_",)
    #: a frame's compile time, a graph break's count: what diff compares and tables rank by
    primary: ClassVar[dict[str, str]] = {"frame": "compile_time", "graph-break": "met"}

    def check(self) -> Availability:
        """Available wherever torch can be found (it is not imported here)."""
        import importlib.util

        if importlib.util.find_spec("torch") is None:
            return Availability.no("torch is not installed", "pip install torch")
        return Availability.yes()

    def rider(self) -> InProcessHook:
        """Save dynamo's records at the end of every run (nothing when it was not used)."""
        return InProcessHook(RIDER)

    def collect(self, ctx: RunContext, outcome: Outcome | None) -> Collected:
        """Rows and metrics from the baseline runs' records (the median run's rows)."""
        from .rows import collected

        found = [(o, r) for o in ctx.baseline if (r := _read_run(o.artifact_dir)) is not None]
        if not found:
            return Collected(empty="the workload did not use torch.compile (dynamo was "
                                   "never imported)")
        runs = [r for _, (r, _) in found]
        if not any(r.frames for r in runs):
            return Collected(empty="torch.compile compiled nothing in the baseline runs")
        middle = sorted(range(len(runs)), key=lambda i: runs[i].seconds)[len(runs) // 2]
        outcome_of, (run, data) = found[middle]
        folder = rundir.RunFolder(outcome_of.artifact_dir)
        # The session's first run (a warm-up's, else the first baseline's) is the one that
        # found inductor's caches as a new process of this workload does
        first = next((r for o in [*ctx.warmups[:1], *ctx.baseline[:1]]
                      if (r := _read_run(o.artifact_dir)) is not None), None)
        found_layer = collected(runs, run, torch_total(data), folder.first_mark(),
                                folder.step_times(), ctx.steps, first[0] if first else None,
                                folder.first_timed_step())
        if not outcome_of.record.exit.clean:  # a snapshot written while it ran
            found_layer.notes.append(
                f"the run it is read from ended with {outcome_of.record.exit.describe()}: its "
                "compiles until the last snapshot of them (every few seconds)")
        dropped = data.get("graph_breaks_dropped")
        if isinstance(dropped, int) and dropped:
            found_layer.notes.append(f"{dropped} more graph breaks met while compiling were "
                                     "counted, not kept whole")
        return found_layer


@hookimpl
def perfstack_backends() -> list[Backend]:
    """Provide the compile backend."""
    return [CompileBackend()]


@hookimpl
def perfstack_findings(report: Report) -> list[Finding]:
    """Graph breaks, recompiles and fallbacks to eager, each with its line and the fix."""
    from .findings import findings

    return findings(report)
