"""The words of the compile view (``perfstack.analysis.views.compile``), shared by every
format."""

from __future__ import annotations

from perfstack.analysis.views.compile import CompileView
from perfstack.report.units import fmt_seconds, pct

#: The compile section's title, in every format.
COMPILE_TITLE = "torch.compile: what it compiled, where it broke, what it cost"
#: The columns of the frames table after the frame.
COMPILE_COLUMNS = ("compiles", "compile time", "tracing", "backend", "backward")


def _s(value: float | None) -> str:
    return fmt_seconds(value) if value is not None else "—"


def compile_lines(v: CompileView) -> list[str]:
    """What the section says in sentences: the compile time, how much of the steps ran
    compiled, the recompiles and the fallbacks; each graph break with its line and hint."""
    lines = []
    if v.seconds is not None:
        over = f" (the median of {v.runs} baseline runs)" if v.runs > 1 else ""
        inside = (f", {fmt_seconds(v.in_steps)} of it during the steps"
                  if v.in_steps else "")
        lines.append(f"Compiling took {fmt_seconds(v.seconds)} a run{over}: "
                     f"{len(v.frames) + v.more_frames} frame(s), {v.compiles} compile(s)"
                     f"{inside}.")
    if v.cold is not None:
        lines.append(f"The first run, inductor's caches cold, compiled for "
                     f"{fmt_seconds(v.cold)}: what a first run on a new machine pays.")
    if v.compiled_share is not None:
        device = (f"; inductor's kernels {pct(v.generated_share)} of the device time"
                  if v.generated_share is not None else "")
        lines.append(f"{pct(v.compiled_share)} of the profiled steps' time ran inside "
                     f"compiled graphs, the rest eagerly{device}.")
    for f in v.frames:
        if f.again:
            lines.append(f"{f.label} compiled again: {f.again}.")
        if f.failed:
            lines.append(f"{f.label}: a compile failed, and it runs eagerly.")
    for b in v.breaks:
        crossed = (f", crossed {b.crossed} time{'' if b.crossed == 1 else 's'} in the "
                   "profiled steps" if b.crossed else "")
        lines.append(f"Graph break at {b.where}{crossed}: {b.reason}"
                     + (f" (torch: {b.hint})" if b.hint else "") + ".")
    if v.more_breaks:
        lines.append(f"{v.more_breaks} more graph break(s) in the compile layer (--full).")
    return lines


def compile_cells(v: CompileView) -> list[list[str]]:
    """The frames table's rows."""
    return [[f.label, str(f.compiles), _s(f.seconds), _s(f.dynamo_s), _s(f.backend_s),
             _s(f.backward_s)] for f in v.frames]
