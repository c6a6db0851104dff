"""The ``memray`` backend itself: its run under memray's tracker (in process), the capture it
reads, the flame graph it draws."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path
from typing import ClassVar

from perfstack.plugin.backend import (
    Availability,
    Backend,
    Collected,
    InProcessHook,
    Launch,
    Option,
    Outcome,
    RunContext,
)
from perfstack.report import Layer

from .capture import read
from .inproc import CAPTURE, SIDECAR
from .summary import module_hooks, step_ends, summarize

INPROC = "perfstack_plugins.memray.inproc:start"


#: memray's flame graph of the capture (``--memray-flamegraph``), and how long it may take.
FLAMEGRAPH = "memray-flamegraph.html"


FLAMEGRAPH_TIMEOUT_S = 300


class MemrayBackend(Backend):
    """memray: every allocation with its Python (and native) stack; the memory layer."""

    name = "memray"
    layers = (Layer.MEMORY,)
    primary: ClassVar[str] = "at_peak"
    publishes = ("peak_heap", "heap_growth_per_step", "temporary_allocations")
    openers = ((".bin", "python -m memray flamegraph FILE (or stats, tree, table)"),
               ("flamegraph.html", "a browser (its scripts load from a CDN)"))
    description = "memray: the heap's peak and growth by Python function, temporaries, leaks"
    options = (
        Option("no_native", "leave native (C/C++) frames out of the capture (lower "
               "overhead; the capture's flame graph then stops at Python)", flag=True),
        Option("interval_ms", "milliseconds between memray's samples of the heap and the "
               "resident memory (a step's low point needs two: memray's own default, 10 ms, "
               "is longer than many training steps)", 2, int, minimum=1, maximum=10_000),
        Option("flamegraph", "also write memray's own flame graph of the capture "
               "(memray-flamegraph.html; its scripts load from a CDN; 10-20 s for a run that "
               "imports torch)", flag=True),
        Option("temporary_threshold", "an allocation freed within this many further "
               "allocations is temporary (memray's threshold)", 1, int, minimum=1,
               maximum=1000),
    )

    def check(self) -> Availability:
        """Available when memray is installed (found without importing it)."""
        if importlib.util.find_spec("memray") is None:
            return Availability.no("memray is not installed", "pip install memray")
        return Availability.yes()

    def launch(self, ctx: RunContext) -> Launch:
        """Start memray's tracker in the workload process."""
        settings = {"native": not ctx.options.get("no_native"),
                    "interval_ms": int(ctx.options.get("interval_ms") or 2)}
        return Launch(inprocess=[InProcessHook(INPROC, settings)])

    def collect(self, ctx: RunContext, outcome: Outcome | None) -> Collected:
        """Read memray's capture into the memory layer, metrics and findings."""
        path = ctx.artifact_dir / CAPTURE
        if not path.is_file() or path.stat().st_size == 0:
            if outcome is not None and not outcome.record.exit.clean:
                return Collected(notes=["memray wrote no capture: the workload ended first"])
            raise RuntimeError("memray wrote no capture")
        ends, explicit = step_ends(ctx.artifact_dir / SIDECAR)
        capture = read(path, ctx.workload.home(), ends,
                       threshold=int(ctx.options.get("temporary_threshold") or 1))
        collected = summarize(capture, len(ends), explicit, ctx.workload.home(),
                              int(ctx.options.get("interval_ms") or 2),
                              module_hooks(ctx.artifact_dir / SIDECAR))
        collected.artifacts["capture"] = path
        if ctx.options.get("flamegraph"):
            graph, why = _flamegraph(path)
            if graph is not None:
                collected.artifacts["flame graph"] = graph
            else:
                collected.notes.append(f"memray's flame graph was not written: {why}")
        if outcome is not None and not outcome.record.exit.clean:
            collected.notes.append("the workload did not end cleanly: the capture holds what "
                                   "ran until then")
        return collected


def _flamegraph(capture: Path) -> tuple[Path | None, str]:
    """Write memray's own flame graph beside the capture (``memray flamegraph``); return it,
    or None and why."""
    out = capture.with_name(FLAMEGRAPH)
    try:
        proc = subprocess.run([sys.executable, "-m", "memray", "flamegraph", "-f", "-o",
                               str(out), str(capture)], capture_output=True, text=True,
                              timeout=FLAMEGRAPH_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        return None, f"memray took more than {FLAMEGRAPH_TIMEOUT_S} s"
    if proc.returncode != 0 or not out.is_file():
        said = (proc.stderr or proc.stdout).strip().splitlines()
        return None, said[-1] if said else f"memray exited {proc.returncode}"
    return out, ""
