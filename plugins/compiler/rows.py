"""The compile layer's rows and metrics from the runs' compile records (``records``)."""

from __future__ import annotations

import statistics
from collections import Counter
from typing import Any

from perfstack.plugin.backend import Collected, StepWindow
from perfstack.report import Better, Layer, Metric, Quantity, Row

from .records import Compile, CompileRun, Frame, GraphBreak, in_steps

SOURCE = "dynamo"
#: Characters of torch's explanation of a graph break kept in the row.
DETAIL_CHARS = 800


def _sum(compiles: list[Compile], attr: str) -> float | None:
    values = [getattr(c, attr) for c in compiles if getattr(c, attr) is not None]
    return sum(values) if values else None


def _seconds(value: float | None, why: str) -> Quantity:
    return Quantity(value, "s") if value is not None else Quantity(None, "s", why)


def frame_key(function: str, file: str, line: int) -> str:
    """A compiled frame's key: 'function (file:line)', as the Python layer keys a function."""
    return f"{function} ({file}:{line})"


def frame_row(frame: Frame, alike: bool = False) -> Row:
    """One compiled frame: its compiles, their time by phase, why it compiled again.
    ``alike``: another frame has its name, file and line (functions made by exec from one
    source): its key then says dynamo's id of it too."""
    c = frame.compiles
    not_inductor = ("not recorded: inductor found its graphs in its cache, and built none"
                    if any(x.cached for x in c) else
                    "not measured: the backend compiler is not inductor")
    values = {
        "compile_time": Quantity(frame.seconds, "s"),
        "compiles": Quantity(len(c), "count"),
        "recompiles": Quantity(len(frame.recompiles), "count"),
        "dynamo_time": _seconds(_sum(c, "dynamo_s"), "not recorded by this torch"),
        "backend_time": _seconds(_sum(c, "backend_s"), "not recorded by this torch"),
        "inductor_time": _seconds(_sum(c, "inductor_s"), not_inductor),
        "codegen_time": _seconds(_sum(c, "codegen_s"), not_inductor),
        "kernel_build_time": _seconds(_sum(c, "kernels_build_s"), not_inductor),
        "backward_time": _seconds(_sum(c, "backward_s"), "no backward graph was compiled"),
    }
    attrs: dict[str, Any] = {
        "kind": "frame", "function": frame.name, "file": frame.file, "line": frame.line,
        "compile_ids": [x.compile_id for x in c],
        "recompile_reasons": [x.recompile_reason for x in frame.recompiles],
        "graph_ops": [x.graph_ops for x in c],
    }
    if frame.resumes:
        attrs["resumes"] = frame.resumes
    failed = [x.failed for x in c if x.failed]
    if failed:
        attrs["failed"] = failed
    key = frame_key(frame.name, frame.file, frame.line)
    if alike and frame.frame_id is not None:
        key += f" #{frame.frame_id}"
        attrs["frame_id"] = frame.frame_id
    return Row(key, frame.name, SOURCE, values, attrs)


def break_row(gb: GraphBreak) -> Row:
    """One graph break: where in the user's code, why, torch's hints."""
    where = frame_key(gb.function, gb.file, gb.line)
    return Row(f"break: {gb.reason} at {gb.file}:{gb.line}", f"graph break: {gb.reason}",
               SOURCE, {"met": Quantity(gb.met, "count")},
               {"kind": "graph-break", "reason": gb.reason, "hints": gb.hints,
                "detail": gb.detail[:DETAIL_CHARS], "function": gb.function,
                "file": gb.file, "line": gb.line},
               {Layer.PYTHON.value: [where]})


def _metric(name: str, value: float | int | None, unit: str, description: str,
            samples: list[float] | None = None, better: Better = Better.LOWER,
            detail: bool = False) -> Metric:
    return Metric(name, value, unit, Layer.COMPILE, SOURCE, better, samples=samples,
                  description=description, detail=detail)


def collected(runs: list[CompileRun], run: CompileRun, torch_seconds: float | None,
              first_mark: float | None, step_times: list[float],
              steps: StepWindow | None, first: CompileRun | None = None,
              first_step: int = 1) -> Collected:
    """The compile layer of a session: rows of ``run`` (the baseline's median run by compile
    time), metrics over ``runs`` (every baseline run's compile records). ``step_times``
    begin with step ``first_step`` of the workload (``RunFolder.first_timed_step``): the
    steps that compiled are named by their number in it."""
    places = Counter((f.name, f.file, f.line) for f in run.frames)
    rows = [frame_row(f, places[(f.name, f.file, f.line)] > 1)
            for f in sorted(run.frames, key=lambda f: -f.seconds)]
    rows += [break_row(b) for b in run.breaks]
    totals = [r.seconds for r in runs]
    metrics = [
        _metric("compile_time", statistics.median(totals), "s",
                "seconds torch.compile spent compiling in a run (every frame's compiles, "
                "dynamo's tracing and the backend compiler, backward graphs included): "
                "dynamo's own records, the median of the baseline runs", samples=totals),
        _metric("compile_frames", len(run.frames), "count",
                "frames torch.compile compiled (the resume functions after graph breaks "
                "included)", better=Better.NEITHER),
        _metric("compile_recompiles", run.recompiles, "count",
                "compiles of a frame after its first (a guard failed: a new shape, dtype or "
                "Python value)"),
        _metric("compile_graph_breaks", len(run.breaks), "count",
                "places in the user's code where dynamo broke the graph"),
    ]
    if run.unique_graphs is not None:
        metrics.append(_metric("compile_graphs", run.unique_graphs, "count",
                               "graphs dynamo captured (counters['stats']['unique_graphs'])",
                               better=Better.NEITHER, detail=True))
    notes = []
    if torch_seconds is not None:
        notes.append(f"torch's compile_times() gives {torch_seconds:.2f} s for the same run "
                     f"(dynamo's records: {run.seconds:.2f} s)")
    per_step = in_steps(run, first_mark, step_times)
    if per_step:
        warm = steps.warmup if steps is not None else 0
        measured = per_step[warm:]
        metrics.append(_metric(
            "compile_in_steps", sum(measured), "s",
            "compile seconds that began inside the measured steps (under --steps, after its "
            "warm-up steps); a step that compiled is slower for it", detail=True))
        compiled_steps = [i + first_step for i, s in enumerate(per_step) if s > 0]
        if compiled_steps:
            notes.append("steps that compiled: " + ", ".join(map(str, compiled_steps[:12]))
                         + (" ..." if len(compiled_steps) > 12 else ""))
    if run.truncated:
        notes.append("torch kept only its last compile records: earlier compiles are missing")
    graphs = run.cache_hits + run.cache_misses
    if graphs:
        notes.append(f"inductor's FX graph cache: {run.cache_hits} of {graphs} graphs found in "
                     "it in the median baseline run" + (" (a warm cache: a first run compiles "
                     "more)" if run.cache_hits else ""))
    if first is not None and first.cache_misses and first.seconds > statistics.median(totals):
        metrics.append(_metric(
            "compile_time_cold", first.seconds, "s",
            "seconds the session's first run spent compiling, most graphs compiled afresh "
            "(inductor's caches cold for them): what a first run on a new machine pays",
            detail=True))
        notes.append(f"the first run compiled {first.cache_misses} graph(s) afresh: "
                     f"{first.seconds:.2f} s (compile_time_cold); the baseline runs after it "
                     "found them in inductor's cache")
    return Collected(rows={Layer.COMPILE: rows}, metrics=metrics, notes=notes)
