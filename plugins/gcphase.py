"""CPython's garbage collector by phase: during imports, or in the workload's own run.

perf record sees how much CPU time the collector takes, but not when. A collection during
``import torch`` is start-up: nothing in the workload's loop can make it cheaper, and advice to
call ``gc.freeze()`` around the hot loop would not help. So the perftop backend also runs
:func:`start` inside the workload: a ``gc.callbacks`` entry that times every collection
(``time.perf_counter``) and files it under "imports" when an import is on the stack at that
moment (a frame of ``importlib._bootstrap``), else under "run". The GC finding is judged on the
collector's share outside imports.

Only the standard library is imported by :func:`start`: it runs in the workload.
"""

from __future__ import annotations

import json
import os
import sys
import time
from collections.abc import Callable
from pathlib import Path
from types import FrameType
from typing import Any

from perfstack.report import Better, Finding, Layer, Metric, Report

#: What :func:`start` writes into the run's folder.
RESULT = "gc-phases.json"
#: Share of the CPU time (%) in CPython's garbage collector, outside imports, from which it is
#: a finding.
GC_SHARE = 10.0
#: CPython's collector, by symbol (3.8 to 3.13).
GC_SYMBOLS = ("gc_collect_main", "gc_collect_with_callback", "gc_collect_region",
              "gc_collect_full", "gc_collect_young", "gc_collect_increment",
              "collect_with_callback", "deduce_unreachable", "move_unreachable",
              "subtract_refs", "update_refs", "visit_reachable", "visit_decref",
              "gc_collect_impl")
#: How far up the stack an import is looked for (an import's frames sit below the caller's).
_DEPTH = 400


def _importing(frame: FrameType | None) -> bool:
    """Whether an import is in progress on this stack."""
    for _ in range(_DEPTH):
        if frame is None:
            return False
        if frame.f_code.co_filename.startswith("<frozen importlib._bootstrap"):
            return True
        frame = frame.f_back
    return False


def start(options: dict[str, Any], folder: str) -> Callable[[], None]:
    """Time every collection from now on, by phase; return the function that writes them."""
    import gc

    phases = {"imports": [0, 0.0], "run": [0, 0.0]}
    started: list[float] = []

    def callback(phase: str, info: dict[str, Any]) -> None:
        if phase == "start":
            started.append(time.perf_counter())
        elif started:
            spent = time.perf_counter() - started.pop()
            entry = phases["imports" if _importing(sys._getframe(1)) else "run"]
            entry[0] += 1
            entry[1] += spent

    gc.callbacks.append(callback)

    def finish() -> None:
        if callback in gc.callbacks:
            gc.callbacks.remove(callback)
        tmp = os.path.join(folder, RESULT + ".tmp")
        with open(tmp, "w", encoding="utf-8") as fh:
            json.dump({name: {"collections": n, "seconds": s} for name, (n, s) in phases.items()},
                      fh)
        os.replace(tmp, os.path.join(folder, RESULT))

    return finish


def metrics(folder: Path, source: str) -> tuple[list[Metric], list[str]]:
    """The collector's time by phase from a run's :data:`RESULT`, and a note when it is missing
    or unreadable (the run ended before the bootstrap could write it)."""
    try:
        data = json.loads((folder / RESULT).read_text("utf-8"))
        imports, run = (float(data[k]["seconds"]) for k in ("imports", "run"))
        counts = sum(int(data[k]["collections"]) for k in ("imports", "run"))
    except (OSError, ValueError, KeyError, TypeError):
        return [], ["garbage collection by phase unknown: the run wrote no gc-phases.json"]
    return [
        Metric("gc_time_run", run, "s", "python", source, Better.LOWER, detail=True,
               description="CPython's garbage collections outside imports (gc.callbacks)"),
        Metric("gc_time_imports", imports, "s", "python", source, Better.LOWER, detail=True,
               description="CPython's garbage collections during imports, part of start-up "
                           "(gc.callbacks)"),
    ], [f"{counts} garbage collections timed by gc.callbacks: {imports:.3f} s during imports, "
        f"{run:.3f} s outside them"]


def _seconds(report: Report, name: str, source: str) -> float | None:
    found = next((m for m in report.metrics if m.name == name and m.source == source), None)
    if found is None or not isinstance(found.value, (int, float)):
        return None
    return float(found.value)


def finding(report: Report, source: str) -> list[Finding]:
    """Flag a collector that takes over :data:`GC_SHARE` of perf record's CPU samples outside
    imports. Without the phase figures (an older report) the whole share is judged."""
    rows = [r for r in report.layers.get(Layer.KERNEL, [])
            if r.source == source and r.attrs.get("kind") == "symbol"
            and any(sym in r.name.split(" (")[0] for sym in GC_SYMBOLS)]
    share = sum(float(r.values["share"].value or 0.0) for r in rows if "share" in r.values)
    imports, run = (_seconds(report, n, source) for n in ("gc_time_imports", "gc_time_run"))
    split = (imports, run) if imports is not None and run is not None and imports + run > 0 \
        else None
    outside = share * split[1] / (split[0] + split[1]) if split else share
    if outside < GC_SHARE:
        return []
    top = sorted(rows, key=lambda r: -float(r.values["share"].value or 0.0))[:3]
    evidence = [f"CPython's cyclic garbage collector: {share:.1f}% of perf record's CPU "
                "samples (all threads)"]
    if split:
        evidence.append(f"timed by gc.callbacks: {split[1]:.3f} s outside imports, "
                        f"{split[0]:.3f} s during imports (start-up)")
    evidence += [f"{r.name}: {float(r.values['share'].value or 0):.1f}%" for r in top]
    where = " outside imports" if split else ""
    return [Finding(
        rule="python.gc", title=f"garbage collection takes {outside:.0f}% of the CPU time{where}",
        layer="python", severity="warning", evidence=evidence,
        action=("call gc.freeze() once the long-lived objects (the model, the data) exist, "
                "raise the thresholds with gc.set_threshold, or disable it around the hot "
                "loop; fewer reference cycles (closures, parent pointers) lower its work"),
        source=source)]
