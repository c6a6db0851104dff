"""The words of the compile view (``perfstack.analysis.panes.compile``), shared by every
format."""

from __future__ import annotations

from perfstack.analysis.panes.compile import CompileView
from perfstack.report.units import fmt_seconds, pct

#: The compile section's title, in every format.
COMPILE_TITLE = "torch.compile: what it compiled, where it broke, what it cost"
#: From this many frames that compiled again (or failed) they are said in one line.
GROUPED = 3
#: The columns of the frames table after the frame.
COMPILE_COLUMNS = ("compiles", "compile time", "tracing", "backend", "backward")
#: The columns of the lines table (the compiled kernels' time by user line) after the line.
LINE_COLUMNS = ("time", "share", "kernels")


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
    if v.held is not None and (v.seconds is None or v.held[0] > v.seconds):
        # the frames' compiles (dynamo's own count) leave out the compiler's import at the
        # first call and what it waited for: the budget's part holds them
        lines.append(f"With the compiler's import at the first call and what it waited for, "
                     f"torch.compile held the main thread {fmt_seconds(v.held[0])} of the "
                     f"wall time (the time budget's compile part, from {v.held[1]}).")
    if v.cold is not None:
        lines.append(f"The first run, inductor's caches cold, compiled for "
                     f"{fmt_seconds(v.cold)}: what a first run on a new machine pays.")
    if v.compiled_share is not None:
        device = (f"; inductor's kernels {pct(v.generated_share)} of the device time"
                  if v.generated_share is not None else "")
        lines.append(f"{pct(v.compiled_share)} of the profiled steps' time ran inside "
                     f"compiled graphs, the rest eagerly{device}.")
    again = [f for f in v.frames if f.again]
    if v.recompiled > GROUPED:  # many frames alike: one line each, the first named
        lines.append(f"{v.recompiled} frames compiled again ({again[0].label}: "
                     f"{again[0].again}).")
    else:
        lines += [f"{f.label} compiled again: {f.again}." for f in again]
    failed = [f for f in v.frames if f.failed]
    if v.failed > GROUPED:
        lines.append(f"{v.failed} frames had a compile fail, and run eagerly ("
                     + ", ".join(f.label for f in failed[:3]) + ", ...).")
    else:
        lines += [f"{f.label}: a compile failed, and it runs eagerly." for f in failed]
    reasons: dict[str, list[int]] = {}
    for i, b in enumerate(v.breaks):
        reasons.setdefault(b.reason, []).append(i)
    more = v.more_breaks
    for reason, at in reasons.items():
        count = v.break_counts.get(reason, len(at))
        if count > GROUPED:  # one reason at many places: one line
            first = v.breaks[at[0]]
            lines.append(f"{count} graph breaks, each: {reason}"
                         + (f" (torch: {first.hint})" if first.hint else "") + "; at "
                         + ", ".join(v.breaks[i].where for i in at[:GROUPED]) + ", ...")
            more -= count - len(at)  # said here, not among the more
            continue
        for i in at:
            b = v.breaks[i]
            crossed = (f", crossed {b.crossed} time{'' if b.crossed == 1 else 's'} in the "
                       "profiled steps" if b.crossed else "")
            lines.append(f"Graph break at {b.where}{crossed}: {b.reason}"
                         + (f" (torch: {b.hint})" if b.hint else "") + ".")
    if more > 0:
        lines.append(f"{more} more graph break(s) in the compile layer (--full).")
    return lines


def compile_cells(v: CompileView) -> list[list[str]]:
    """The frames table's rows."""
    return [[f.label, str(f.compiles), _s(f.seconds), _s(f.dynamo_s), _s(f.backend_s),
             _s(f.backward_s)] for f in v.frames]


def lines_sentence(v: CompileView) -> str | None:
    """What the lines table says, in one sentence: whose clock, how much is traced."""
    if not v.lines or v.kernel_time is None:
        return None
    clock = "device" if v.clock == "device" else "CPU"
    traced = (f"; {pct(v.lines_share)} of it traced to your lines by inductor's provenance"
              if v.lines_share is not None else "")
    return (f"Your lines in compiled code: the generated kernels ran {fmt_seconds(v.kernel_time)}"
            f" of {clock} time in the profiled steps{traced} (a kernel fusing n lines gives "
            "each 1/n).")


def line_cells(v: CompileView) -> list[list[str]]:
    """The lines table's rows: where (and the code), what it cost, how many kernels."""
    return [[f"{line.where}  {line.code}" if line.code else line.where, _s(line.seconds),
             pct(line.share) if line.share is not None else "—", str(line.kernel_count)]
            for line in v.lines]


def line_kernels(v: CompileView) -> list[str]:
    """Each listed line's kernels, the costliest first, as one text (formats with room)."""
    return [", ".join(line.kernels) + (f" and {line.kernel_count - len(line.kernels)} more"
                                       if line.kernel_count > len(line.kernels) else "")
            for line in v.lines]
