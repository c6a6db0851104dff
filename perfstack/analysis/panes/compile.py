"""What torch.compile did, as one view: its compiled frames with their compiles and time by
phase, its graph breaks at the user's lines, and how much of the steps ran compiled.

Read from the compile layer's rows (``attrs["kind"]``: ``frame``, ``graph-break``,
``compiled-line``: the compiled kernels' time at one user line) and the metrics the backends
give by convention (``compile_time``, ``compile_in_steps``, ``compiled_share``,
``generated_kernels_share``, ``compiled_kernel_time``, ``compiled_kernel_lines_share``), so
the core names no backend. Numbers only: the renderers word them.
"""

from __future__ import annotations

import os
from collections import Counter

from perfstack.analysis.origin import origin, workload_dir
from perfstack.analysis.views.layers import display_name
from perfstack.records import datarecord, field
from perfstack.report import Layer, Report, Row

#: Frames and breaks listed (the JSON holds them all).
SHOWN = 8


@datarecord
class FrameLine:
    """One compiled frame."""

    label: str  # 'forward (compiled.py:48)'; a resume function says whose break it follows
    compiles: int
    seconds: float | None  # every compile of it, backward graphs included
    dynamo_s: float | None  # dynamo's own tracing
    backend_s: float | None  # the backend compiler (AOTAutograd, inductor) on the forward
    backward_s: float | None  # the backward graph's compile, at its first backward
    again: str | None  # the first guard that failed (why it compiled again), or None
    failed: bool  # a compile of it failed: it runs eagerly


@datarecord
class BreakLine:
    """One graph break at the user's line."""

    where: str  # 'compiled.py:51 in forward'
    reason: str  # the first line of torch's reason
    hint: str | None  # torch's own first hint
    #: how often the profiled steps crossed it (the compiled code after it ran: its resume
    #: function's compiled regions in the torch trace), or None where no trace says
    crossed: int | None = None


@datarecord
class LineCost:
    """One of the user's lines, as the compiled kernels that fuse it cost it."""

    where: str  # 'compiled.py:49'
    code: str  # the source line ('' where unknown)
    seconds: float  # its kernels' time (device or CPU), a kernel fusing n lines giving 1/n
    share: float | None  # % of the compiled kernels' time
    kernels: list[str]  # its kernels, the costliest first
    kernel_count: int  # every kernel of it, the listed and the others


@datarecord
class CompileView:
    """torch.compile's part of the report."""

    source: str
    seconds: float | None  # compile_time: a run's compiling, the baseline's median
    runs: int  # the baseline runs it is the median of
    in_steps: float | None  # compile seconds that began inside the measured steps
    compiled_share: float | None  # % of the profiled steps' time inside compiled graphs
    generated_share: float | None  # % of the device time in inductor's kernels
    cold: float | None = None  # the session's first run's compile, its caches cold
    #: the time budget's compile part in seconds (the main thread in torch.compile: its
    #: import at the first call and its waits too, which compile_time leaves out), its source
    held: tuple[float, str] | None = None
    frames: list[FrameLine] = field(default_factory=list)
    breaks: list[BreakLine] = field(default_factory=list)
    more_frames: int = 0
    more_breaks: int = 0
    #: every compile of every frame, the listed and the others
    compiles: int = 0
    #: frames that compiled again, and that fell back to eager, the listed and the others
    recompiled: int = 0
    failed: int = 0
    #: how many graph breaks each reason has, the listed and the others
    break_counts: dict[str, int] = field(default_factory=dict)
    #: the compiled kernels' time by the user's line they fuse, the costliest first
    lines: list[LineCost] = field(default_factory=list)
    more_lines: int = 0
    #: the compiled kernels' time in the profiled steps (s), the % of it traced to lines,
    #: and whose clock: 'device' or 'cpu'
    kernel_time: float | None = None
    lines_share: float | None = None
    clock: str | None = None


def _value(row: Row, name: str) -> float | None:
    q = row.values.get(name)
    return float(q.value) if q is not None and q.value is not None else None


def _where(row: Row, home: str | None) -> str:
    file, line = str(row.attrs.get("file") or "?"), row.attrs.get("line")
    path = origin(file, home).path if os.path.isabs(file) else file
    return f"{path}:{line}" if isinstance(line, int) else path


def _frame(row: Row, home: str | None) -> FrameLine:
    label = display_name(row, home)
    if row.attrs.get("frame_id") is not None:  # one of several frames of this name and line
        label += f" #{row.attrs['frame_id']}"
    reasons = [str(r) for r in row.attrs.get("recompile_reasons") or []]
    return FrameLine(label, int(_value(row, "compiles") or 0), _value(row, "compile_time"),
                     _value(row, "dynamo_time"), _value(row, "backend_time"),
                     _value(row, "backward_time"),
                     reasons[0].split(": ", 1)[-1] if reasons else None,
                     bool(row.attrs.get("failed")))


#: torch names the call of a compiled graph 'Torch-Compiled Region: 1/1' (its compile id).
REGION = "Torch-Compiled Region: "


def _crossed(report: Report, frames: list[Row], row: Row) -> int | None:
    """Calls, in the profiled steps, of the compiled code that resumes after a graph break:
    the break was crossed as often."""
    regions = {r.name[len(REGION):]: int(_value(r, "calls") or 0)
               for r in report.layers.get(Layer.FRAMEWORK, []) if r.name.startswith(REGION)}
    resume = next((f for f in frames if f.attrs.get("resumes") == row.attrs.get("function")
                   and f.attrs.get("line") == row.attrs.get("line")), None)
    if not regions or resume is None:
        return None
    return sum(regions.get(str(cid), 0) for cid in resume.attrs.get("compile_ids") or [])


def _metric(report: Report, name: str) -> tuple[float | None, int]:
    m = report.metric(name)
    if m is None or m.value is None:
        return None, 0
    return float(m.value), len(m.samples or [])


def _held(report: Report) -> tuple[float, str] | None:
    """The time budget's compile part (``budget.compile``) in seconds of the baseline's
    wall time, and who measured it; None where unmeasured."""
    share, wall = report.metric("budget.compile"), report.metric("wall_time")
    if share is None or share.value is None or wall is None or wall.value is None:
        return None
    return float(share.value) / 100 * float(wall.value), share.source


def _line(row: Row, home: str | None) -> LineCost:
    kernels = [str(k.get("name")) for k in row.attrs.get("kernels") or []
               if isinstance(k, dict)]
    return LineCost(_where(row, home),
                    str(row.attrs.get("code") or ""), _value(row, "time") or 0.0,
                    _value(row, "share"), kernels,
                    int(row.attrs.get("kernel_count") or len(kernels)))


def compile_view(report: Report, top: int = SHOWN) -> CompileView | None:
    """The view of what torch.compile did, or None where the report holds nothing of it."""
    rows = report.layers.get(Layer.COMPILE, [])
    frames = [r for r in rows if r.attrs.get("kind") == "frame"]
    breaks = [r for r in rows if r.attrs.get("kind") == "graph-break"]
    lines = sorted((r for r in rows if r.attrs.get("kind") == "compiled-line"),
                   key=lambda r: -(_value(r, "time") or 0.0))
    seconds, runs = _metric(report, "compile_time")
    share, _ = _metric(report, "compiled_share")
    if not frames and share is None and not lines:
        return None
    home = workload_dir(report)
    frames.sort(key=lambda r: -(_value(r, "compile_time") or 0.0))
    hints = [[str(h) for h in r.attrs.get("hints") or []] for r in breaks]
    return CompileView(
        source=frames[0].source if frames else "", seconds=seconds, runs=runs,
        in_steps=_metric(report, "compile_in_steps")[0], compiled_share=share,
        generated_share=_metric(report, "generated_kernels_share")[0],
        cold=_metric(report, "compile_time_cold")[0], held=_held(report),
        frames=[_frame(r, home) for r in frames[:top]],
        breaks=[BreakLine(f"{_where(r, home)} in {r.attrs.get('function')}",
                          str(r.attrs.get("reason") or r.name), h[0] if h else None,
                          _crossed(report, frames, r))
                for r, h in list(zip(breaks, hints, strict=True))[:top]],
        more_frames=max(0, len(frames) - top), more_breaks=max(0, len(breaks) - top),
        compiles=sum(int(_value(r, "compiles") or 0) for r in frames),
        recompiled=sum(1 for r in frames if r.attrs.get("recompile_reasons")),
        failed=sum(1 for r in frames if r.attrs.get("failed")),
        break_counts=dict(Counter(str(r.attrs.get("reason") or r.name) for r in breaks)),
        lines=[_line(r, home) for r in lines[:top]], more_lines=max(0, len(lines) - top),
        kernel_time=_metric(report, "compiled_kernel_time")[0],
        lines_share=_metric(report, "compiled_kernel_lines_share")[0],
        clock=str(lines[0].attrs.get("time_of")) if lines else None)


def view(report: Report, top: int, full: bool) -> CompileView | None:
    """The pane's figures (its registered entry, ``perfstack.analysis.panes.PANES``)."""
    return compile_view(report)
