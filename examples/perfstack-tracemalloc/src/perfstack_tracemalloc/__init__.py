"""perfstack plugin: Python memory allocations by source line, from tracemalloc."""

from __future__ import annotations

import json
from collections.abc import Sequence

from perfstack import hookimpl
from perfstack.backend import (
    Backend,
    Collected,
    InProcessHook,
    Launch,
    Option,
    Outcome,
    RunContext,
)
from perfstack.report import Better, Finding, Layer, Metric, Quantity, Report, Row

#: The hook version this plugin was written for (perfstack refuses it if that goes away).
PERFSTACK_HOOK_VERSION = 1

SOURCE = "tracemalloc"
RESULT_FILE = "tracemalloc.json"


class TracemallocBackend(Backend):
    """tracemalloc inside the workload: allocations by line near the peak, and the peak."""

    name = "tracemalloc"
    layers = (Layer.PYTHON,)
    description = "tracemalloc: Python allocations by line near the memory peak, and the peak"
    opt_in = True  # slows allocation-heavy code: run only when asked for
    primary = "size"  # diff compares, and tables rank, allocation sites by their bytes
    options = (
        Option("top", "allocation sites to keep", 25, int),
        Option("frames", "stack frames per allocation (more: slower)", 1, int),
    )

    def launch(self, ctx: RunContext) -> Launch:
        """Start tracemalloc in the workload process, before the script."""
        return Launch(inprocess=[InProcessHook(
            "perfstack_tracemalloc.inproc:start",
            {"top": int(ctx.options.get("top") or 25),
             "frames": int(ctx.options.get("frames") or 1)})])

    def collect(self, ctx: RunContext, outcome: Outcome | None) -> Collected:
        """Turn the snapshot file into rows and the peak metric."""
        path = ctx.artifact_dir / RESULT_FILE
        if not path.is_file():
            return Collected(notes=["tracemalloc wrote nothing: the workload ended before its "
                                    "exit handlers ran"])
        data = json.loads(path.read_text("utf-8"))
        total = sum(site["size"] for site in data["sites"]) or 1
        rows = [Row(key=f"{site['file']}:{site['line']}",
                    name=f"{site['file']}:{site['line']}", source=SOURCE,
                    values={"size": Quantity(site["size"], "B"),
                            "blocks": Quantity(site["count"], "count"),
                            "share": Quantity(100 * site["size"] / total, "%")},
                    attrs={"file": site["file"], "line": site["line"], "kind": "allocation"})
                for site in data["sites"]]
        metrics = [Metric("traced_memory_peak", data["peak"], "B", "python", SOURCE,
                          Better.LOWER),
                   Metric("traced_memory_at_exit", data["current"], "B", "python", SOURCE,
                          Better.LOWER)]
        return Collected(rows={Layer.PYTHON: rows}, metrics=metrics,
                         notes=[f"allocation sites from a snapshot holding "
                                f"{data['snapshot_size'] / 2**20:.1f} MiB (peak "
                                f"{data['peak'] / 2**20:.1f} MiB)"],
                         artifacts={"snapshot": path})


@hookimpl
def perfstack_backends() -> Sequence[Backend]:
    """Provide the tracemalloc backend."""
    return [TracemallocBackend()]


@hookimpl
def perfstack_findings(report: Report) -> Sequence[Finding]:
    """Flag a single source line that holds most of the traced memory."""
    rows = [r for r in report.layers[Layer.PYTHON] if r.source == SOURCE]
    if not rows:
        return []
    top = max(rows, key=lambda r: r.values["size"].value or 0)
    share = top.values["share"].value or 0.0
    size = top.values["size"].value or 0
    if share < 50 or size < 1 << 20:
        return []
    return [Finding(
        rule="tracemalloc.dominant-site", layer="python", severity="warning",
        title=f"one line holds {share:.0f}% of the traced memory: {top.name}",
        evidence=[f"{top.name}: {size / 2**20:.1f} MiB in "
                  f"{top.values['blocks'].value:,.0f} blocks near the memory peak "
                  "(tracemalloc)"],
        action="check whether those objects must live that long (a cache, a list that only "
               "grows), or store them more compactly (array, bytes, a tensor)",
        source=SOURCE)]
