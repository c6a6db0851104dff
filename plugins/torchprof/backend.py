"""The ``torch`` backend itself: torch.profiler inside the workload's process (its options, the
ranks it profiles, the trace it writes), and the rows, metrics and kernel lines read back."""

from __future__ import annotations

import importlib.util
import json
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, ClassVar

from perfstack.plugin.backend import (
    Availability,
    Backend,
    Collected,
    InProcessHook,
    Launch,
    Option,
    Outcome,
    Recorded,
    RunContext,
)
from perfstack.report import Finding, Layer
from perfstack.runfolder import ranks

if TYPE_CHECKING:
    from .compiledlines import KernelLines
    from .trace import TraceAggregate


INPROC = "perfstack_plugins.torchprof.inproc:start"


def _ranks_problem(spec: str) -> str | None:
    """Why ``spec`` is not a ranks spec, or None (perfstack's one parser of it)."""
    try:
        ranks.parse(spec)
    except ValueError as exc:
        return str(exc).removeprefix("--ranks ")
    return None


class TorchBackend(Backend):
    """torch.profiler, CPU activity plus CUDA when a GPU is present."""

    name = "torch"
    layers = (Layer.FRAMEWORK, Layer.KERNEL, Layer.PYTHON, Layer.MODULE, Layer.MEMORY,
              Layer.COMPILE)
    needs_import = "torch"
    capture = "perfstack_plugins.torchprof.ondemand:start"  # perfstack capture's N steps
    description = "torch.profiler: ops with shapes, FLOPs and memory; CUDA kernels; Perfetto trace"
    openers = ((".pt.trace.json", "ui.perfetto.dev or TensorBoard"),
               (".pt.trace.json.gz", "ui.perfetto.dev"),
               (".pickle", "pytorch.org/memory_viz (torch's CUDA memory viewer)"))
    advice: ClassVar[dict[str, str]] = {
        "op-callers": "run the torch backend with --torch-stack to record the calling functions"}
    options = (
        Option("skip_first", "steps to skip before the schedule starts", 1, int, minimum=0),
        Option("wait", "idle steps in each cycle of the schedule", 0, int, minimum=0),
        Option("warmup", "warm-up steps (profiled, discarded) in each cycle", 1, int, minimum=0),
        Option("active", "recorded steps in each cycle", 3, int, minimum=1),
        Option("repeat", "cycles of the schedule (0: until the end)", 1, int, minimum=0),
        Option("no_shapes", "do not record input shapes (lower overhead, no FLOPs)", flag=True),
        Option("memory", "record allocations (profile_memory) with Python stacks, and what "
               "held torch's memory at its peak by category (parameters, gradients, optimizer "
               "state, activations...); on a GPU, the caching allocator's history and "
               "what held the device if it runs out; slow", flag=True),
        Option("stack", "record Python stacks (with_stack): Python rows and op links; slow",
               flag=True),
        Option("no_flops", "do not count FLOPs", flag=True),
        Option("no_kernel_lines", "do not ask inductor where its kernels come from (the "
               "compiled kernels' user lines; it makes this run compile what the baseline "
               "found in inductor's cache)", flag=True),
        Option("ranks", "under torch.distributed, the ranks to profile: 0, all, or 0,3", "0",
               check=_ranks_problem),
    )

    def check(self) -> Availability:
        """Available when torch can be imported (found without importing it)."""
        if importlib.util.find_spec("torch") is None:
            return Availability.no("torch is not installed",
                                   "pip install torch (a CPU build: pip install torch==2.13.0)")
        return Availability.yes()

    def launch(self, ctx: RunContext) -> Launch:
        """Start the profiler in the workload process with this run's options."""
        o = ctx.options
        schedule = {"skip_first": o.get("skip_first", 1), "wait": o.get("wait", 0),
                    "warmup": o.get("warmup", 1), "active": o.get("active", 3),
                    "repeat": o.get("repeat", 1)}
        if ctx.steps is not None:  # --steps: record exactly the measured steps
            # The in-process schedule asks for step j's action as step j-1 ends (x = j - 2
            # in torch's schedule): the profiler warms up in the last warm-up step (K) and
            # records K+1..K+N. (With K-1 skipped, it warmed up in step K+1 and a run ended
            # at K+N held N-1 steps.) With one warm-up step the first is the prelude.
            k = ctx.steps.warmup
            schedule = {"skip_first": max(k - 2, 0), "wait": 0, "warmup": 1 if k >= 2 else 0,
                        "active": ctx.steps.measured, "repeat": 1}
        settings = {
            **schedule, "record_shapes": not o.get("no_shapes") or bool(o.get("memory")),
            # torch's memory categories need shapes and stacks beside the allocations.
            "profile_memory": bool(o.get("memory")),
            "with_stack": bool(o.get("stack") or o.get("memory")),
            "ranks": o.get("ranks", "0"),
            "kernel_lines": not o.get("no_kernel_lines"),
        }
        return Launch(inprocess=[InProcessHook(INPROC, settings)])

    def recognizes(self, path: Path) -> bool:
        """A torch.profiler (Kineto) Chrome trace: ``.json`` or ``.json.gz`` whose top level
        holds a ``traceEvents`` array. (From its header alone: the events' reader and the
        trace's aggregation, msgspec and numpy, are not what claiming a job's files needs.)"""
        from .header import trace_header

        return path.name.endswith((".json", ".json.gz")) and trace_header(path) is not None

    def analyze(self, files: Sequence[Path]) -> list[Recorded]:
        """Read traces recorded elsewhere: one record per process (``analysis_units``), its
        profiling cycles read together."""
        from .recorded import read

        return [read(unit) for unit in self.analysis_units(files)]

    def load_reader(self) -> None:
        """Import the trace's reader and aggregation (numpy among them): forked, the
        workers that read a job's ranks begin with them."""
        import importlib

        for module in ("recorded", "rows", "trace"):
            importlib.import_module(f"{__package__}.{module}")

    def analysis_units(self, files: Sequence[Path]) -> list[list[Path]]:
        """Each process's traces: a rank's (from ``distributedInfo``, else the file name) in
        one folder under one Kineto worker name; ValueError when two processes claim a rank."""
        from .recorded import units

        return units(files)

    def collect(self, ctx: RunContext, outcome: Outcome | None) -> Collected:
        """Parse the traces the profiler wrote into rows and metrics."""
        from .inproc import SIDECAR, TRACE_SUFFIX, trace_index
        from .rows import summarize
        from .trace import TraceAggregate

        folder = ctx.artifact_dir
        sidecar = folder / SIDECAR
        info = json.loads(sidecar.read_text("utf-8")) if sidecar.is_file() else {}
        traces = sorted(folder.glob(f"*{TRACE_SUFFIX}"), key=lambda p: trace_index(p.name))
        if not traces:
            if info.get("rank_not_profiled") is not None:
                why = (f"rank {info['rank_not_profiled']} is not profiled "
                       "(--torch-ranks selects the ranks)")
            elif info:
                why = "the profiler wrote no trace"
            else:
                why = "the profiler never finished (the run ended before it could save)"
            return Collected(empty=why)
        agg = TraceAggregate()
        for path in traces:
            agg.add_file(path)
        rows, metrics, notes = summarize(agg, with_flops=not ctx.options.get("no_flops"),
                                         stepped=info.get("steps", 1) > 0)
        lines = _kernel_lines(agg, folder)
        if lines.rows:
            rows[Layer.COMPILE] = lines.rows
        metrics += lines.metrics
        notes += lines.notes
        if info.get("devices"):
            notes.append("GPU: " + ", ".join(info["devices"]))
        if not info:
            notes.append("partial: the profiler did not finish cleanly")
        artifacts: dict[str, Path] = {
            ("trace" if i == 0 else f"trace-{i}"): p for i, p in enumerate(traces)}
        findings: list[Finding] = []
        if ctx.options.get("memory"):
            from .inproc import CUDA_SNAPSHOT
            from .memrows import memory_categories

            if (folder / CUDA_SNAPSHOT).is_file():
                artifacts["cuda memory snapshot"] = folder / CUDA_SNAPSHOT

            mem_rows, mem_metrics, findings, mem_notes = memory_categories(folder)
            if mem_rows:
                rows[Layer.MEMORY] = mem_rows
            metrics += mem_metrics
            notes += mem_notes
        return Collected(rows=rows, metrics=metrics, artifacts=artifacts, notes=notes,
                         findings=findings)


def _kernel_lines(agg: TraceAggregate, folder: Path) -> KernelLines:
    """The compiled kernels' time per user line, from the trace and this run's compile
    records (the compile backend's rider writes them in every run)."""
    from ..compiler.capture import COMPILE_FILE
    from ..compiler.provenance import candidates
    from .compiledlines import kernel_lines

    try:
        data = json.loads((folder / COMPILE_FILE).read_text("utf-8"))
    except (OSError, ValueError):
        data = {}
    return kernel_lines(agg, candidates(data) if isinstance(data, dict) else [])
