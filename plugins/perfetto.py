"""The ``perfetto`` format: one merged Chrome-trace JSON that Perfetto's UI and chrome://tracing
open (``perfstack show report.json --format perfetto -o trace.json``).

Each backend's run is its own process group, aligned at that run's workload start (t = 0):

- torch.profiler: its ops, kernels and annotations as they are in its trace, shifted from the
  trace's clock (``baseTimeNanoseconds`` + ts) to the workload's start (``workload.json``);
- py-spy: the sampled Python stacks as nested slices per thread. py-spy's profile carries no
  timestamps: samples are laid end to end from the moment py-spy was started, so idle gaps are
  closed up and the slices show order and duration, not wall-clock position;
- NVML: power, utilisation and memory as counter tracks over the sampler's time;
- memray: the heap and resident memory over time, and the heap's peak with what held it;
- the CUDA allocator's history (``--torch-memory`` on a GPU): each device's allocated and
  reserved memory over time, the allocated peak with the lines that held it, and torch's
  own peak with what each memory category held;
- every run perfstack started: its steps, its resident memory after each step and its
  compiles (``runtracks``).

perf stat totals have no time axis, so they go into the trace's metadata, not onto a track.
"""

from __future__ import annotations

import json
import re
import zlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from perfstack import errors, hookimpl
from perfstack.analysis.origin import workload_dir
from perfstack.plugin.renderer import Renderer, RenderOptions
from perfstack.report import Layer, Report
from perfstack.runfolder.rundir import RunFolder

from .artifacts import ARTIFACT_MAX_BYTES, locate, read_nvml, read_speedscope
from .memray.curve import memray_events
from .runtracks import run_events
from .torchprof.cudacurve import cuda_memory_events
from .torchprof.gunzip import TraceError, gunzip
from .torchprof.repair import loads_trace

PIDS = {"torch": 1, "pyspy": 2, "nvml": 3, "memray": 4}
NVML_COUNTERS = (("power_w", "GPU power (W)"), ("util_gpu", "GPU utilisation (%)"),
                 ("util_mem", "GPU memory bandwidth utilisation (%)"),
                 ("mem_used_b", "GPU memory used (B)"))


def _start_ns(folder: Path) -> int | None:
    started = RunFolder(folder).started()  # the run folder's reader: its layout is the core's
    return started[1] if started else None


def _meta(pid: int, name: str, sort: int) -> list[dict[str, Any]]:
    return [{"ph": "M", "name": "process_name", "pid": pid, "tid": 0, "args": {"name": name}},
            {"ph": "M", "name": "process_sort_index", "pid": pid, "tid": 0,
             "args": {"sort_index": sort}}]


def _read_trace(path: Path) -> Any:
    """A Chrome trace's JSON (a ``.gz`` one decompressed within the bound torch's reader
    keeps; a name Kineto wrote with a bare quote read with it escaped)."""
    if path.name.endswith(".gz"):
        with gunzip(path) as fh:
            data = fh.read(ARTIFACT_MAX_BYTES + 1)
        if len(data) > ARTIFACT_MAX_BYTES:
            raise ValueError(f"{path}: decompresses to over {ARTIFACT_MAX_BYTES >> 20} MiB; "
                             "not read")
        return loads_trace(data.decode("utf-8", errors="replace"))
    return loads_trace(path.read_text("utf-8", errors="replace"))


def _torch_timed(path: Path, pid: int) -> tuple[list[dict[str, Any]], bool]:
    """torch.profiler's events in µs since the workload started, and True; for a trace with no
    workload start beside it (recorded elsewhere), on its own clock (``baseTimeNanoseconds`` +
    ts), and False."""
    data = _read_trace(path)
    events = data.get("traceEvents", []) if isinstance(data, dict) else data
    if not isinstance(events, list):
        raise ValueError(f"{path}: no traceEvents list")
    base_us = float(data.get("baseTimeNanoseconds", 0)) / 1e3 if isinstance(data, dict) else 0.0
    start = _start_ns(path.parent)
    shift = base_us - start / 1e3 if start is not None else base_us
    out = []
    for e in events:
        if not isinstance(e, dict) or (e.get("ph") == "M" and e.get("name") == "process_name"):
            continue
        e = dict(e)
        e["pid"] = pid
        if isinstance(e.get("tid"), str):
            e["tid"] = zlib.crc32(e["tid"].encode()) % 100_000
        if "ts" in e:
            e["ts"] = float(e["ts"]) + shift
        out.append(e)
    return out, start is not None


def _from_first(groups: list[list[dict[str, Any]]]) -> None:
    """Re-time traces on their own clocks from the first event of all of them, so the ranks
    of one job keep their offsets to each other."""
    origin = min((e["ts"] for g in groups for e in g if "ts" in e), default=None)
    if origin is None:
        return
    for group in groups:
        for e in group:
            if "ts" in e:
                e["ts"] -= origin


def pyspy_events(path: Path, pid: int) -> list[dict[str, Any]]:
    """py-spy's sampled stacks as nested B/E slices per thread, samples laid end to end."""
    stacks = read_speedscope(path)
    folder = path.parent
    start = _start_ns(folder)
    try:
        spawn = json.loads((folder / "pyspy-spawn.json").read_text("utf-8"))["spawn_ns"]
        t0 = max(0.0, (spawn - start) / 1e3) if start is not None else 0.0
    except (OSError, ValueError, KeyError):
        t0 = 0.0
    out: list[dict[str, Any]] = []
    for tid, (thread, samples) in enumerate(stacks.threads.items(), start=1):
        out.append({"ph": "M", "name": "thread_name", "pid": pid, "tid": tid,
                    "args": {"name": thread}})
        t, open_frames = t0, list[str]()
        for frames, seconds in samples:
            common = 0
            while (common < len(open_frames) and common < len(frames)
                   and open_frames[common] == frames[common]):
                common += 1
            for name in reversed(open_frames[common:]):
                out.append({"ph": "E", "pid": pid, "tid": tid, "ts": t, "name": name})
            for name in frames[common:]:
                out.append({"ph": "B", "pid": pid, "tid": tid, "ts": t, "name": name,
                            "cat": "py-spy"})
            open_frames = list(frames)
            t += seconds * 1e6
        for name in reversed(open_frames):
            out.append({"ph": "E", "pid": pid, "tid": tid, "ts": t, "name": name})
    return out


def nvml_events(path: Path, pid: int) -> list[dict[str, Any]]:
    """NVML samples as counter tracks, one per GPU and field, on the time axis of the run's
    workload start: the sampler's ``t`` counts from its own start (its header's
    ``start_epoch_s``; an older timeline's sampler started when the measured window opened)."""
    header, samples = read_nvml(path)
    folder = RunFolder(path.parent)
    began = header.get("start_epoch_s")
    if not isinstance(began, (int, float)):
        began = folder.window_opened()
    start = _start_ns(path.parent)
    shift = (began * 1e6 - start / 1e3) if began is not None and start is not None else 0.0
    out = []
    for s in samples:
        for field, title in NVML_COUNTERS:
            if s.get(field) is not None:
                out.append({"ph": "C", "pid": pid, "tid": 0,
                            "ts": float(s["t"]) * 1e6 + shift,
                            "name": f"GPU {s.get('gpu')} {title}",
                            "args": {"value": float(s[field])}})
    return out


#: An artifact label as a run gives it: ``trace``, a later cycle's ``trace-1``, a rank's
#: ``trace.rank3`` (or both); a merged job's later nodes' with their node: ``node1:trace.rank3``.
_LABEL = re.compile(
    r"(?:node(?P<node>\d+):)?(?P<label>[a-z]+)(?:-(?P<cycle>\d+))?(?:\.rank(?P<rank>\d+))?")


def _artifacts(report: Report, base: Path | None, backend: str, label: str,
               left_out: list[str]) -> list[tuple[str, Path]]:
    """Each of a backend's artifacts of this label that can be read, with what tells it from
    the others (", rank 1", ", cycle 2"), in rank then cycle order; why each other one cannot
    is added to ``left_out``."""
    entry = next((b for b in report.backends if b.name == backend), None)
    if entry is None:
        return []
    found = []
    for key in entry.artifacts:
        m = _LABEL.fullmatch(key)
        if m is None or m["label"] != label:
            continue
        path, why = locate(report, base, backend, key)
        if path is None:
            if why:
                left_out.append(why)
            continue
        node, rank, cycle = int(m["node"] or 0), int(m["rank"] or -1), int(m["cycle"] or 0)
        what = ((f", rank {rank}" if rank >= 0 else f", node {node}" if node else "")
                + (f", cycle {cycle + 1}" if cycle else ""))
        found.append(((node, rank, cycle), what, path))
    return [(what, path) for _, what, path in sorted(found, key=lambda f: f[0])]


#: The torch backend's label of the CUDA allocator's snapshot (``--torch-memory`` on a GPU).
CUDA_SNAPSHOT_LABEL = "cuda memory snapshot"


def _snapshots(report: Report, base: Path | None) -> list[tuple[Path | None, str | None]]:
    """Each CUDA allocator snapshot the torch backend kept, readable or why not."""
    entry = next((b for b in report.backends if b.name == "torch"), None)
    if entry is None:
        return []
    found = [locate(report, base, "torch", key) for key in entry.artifacts
             if key.startswith(CUDA_SNAPSHOT_LABEL)]
    return [(path, why) for path, why in found if path is not None or why]


def merged_groups(report: Report, base: Path | None, said: dict[str, list[str]]
                  ) -> Iterator[tuple[list[dict[str, Any]], bool]]:
    """The merged trace's events a source at a time (a run's trace, its metadata, its run's
    tracks...), each with whether it is a trace recorded elsewhere on a clock of its own
    (re-timed with the others of its kind from their first event: ``_from_first``); what
    was read and what was left out, and why, are added to ``said`` (``included``,
    ``left_out``). A reader that keeps each group only in its own compact form holds one
    trace's events at a time, not a job's."""
    included, left_out = said.setdefault("included", []), said.setdefault("left_out", [])
    sources = (("torch", "trace", "torch.profiler: ops and kernels"),
               ("pyspy", "speedscope", "py-spy: sampled Python stacks (samples end to end)"),
               ("nvml", "timeline", "NVML: GPU counters"),
               ("memray", "capture", "memray: heap and resident memory over time"))
    for sort, (backend, label, title) in enumerate(sources):
        for i, (what, path) in enumerate(_artifacts(report, base, backend, label, left_out)):
            pid = PIDS[backend] * 1000 + i
            anchored = True
            try:
                if backend == "torch":
                    got, anchored = _torch_timed(path, pid)
                elif backend == "pyspy":
                    got = pyspy_events(path, pid)
                elif backend == "memray":
                    got = memray_events(path, pid, workload_dir(report))
                else:
                    got = nvml_events(path, pid)
            except (OSError, EOFError, zlib.error, ValueError, KeyError, TraceError) as exc:
                # (a gzip cut short ends in EOFError, a corrupt one in zlib.error)
                left_out.append(f"{path}: {exc}" if str(path) not in str(exc) else str(exc))
                continue
            yield _meta(pid, f"{backend} run{what}: {title}", sort * 1000 + i), True
            yield got, anchored
            yield run_events(path.parent, pid), True  # its steps, memory and compiles
            if backend not in included:
                included.append(backend)
    for i, (snapshot, why) in enumerate(_snapshots(report, base)):
        if snapshot is None:
            left_out.append(str(why))
            continue
        pid = PIDS["torch"] * 1000 + 500 + i
        try:
            got = cuda_memory_events(snapshot, pid, ARTIFACT_MAX_BYTES)
        except (OSError, EOFError, zlib.error, ValueError) as exc:
            left_out.append(str(exc))
            continue
        yield _meta(pid, "torch run: the CUDA allocator's history", 500 + i), True
        yield got, True


def trace_metadata(report: Report, said: dict[str, list[str]]) -> dict[str, Any]:
    """The merged trace's metadata: what it holds, how it is aligned, what was left out."""
    counters = {r.key: r.values.get("value") for r in report.layers.get(Layer.HARDWARE, [])
                if r.source == "perf"}
    return {
        "tool": f"perfstack {report.run.perfstack_version}",
        "command": " ".join(report.run.command),
        "aligned_at": "each backend's run starts at t=0, when its workload started",
        "backends": said.get("included", []),
        "perf_stat_totals": {k: (q.value if q is not None else None)
                             for k, q in counters.items()},
        "left_out": said.get("left_out", []),
    }


def merged_trace(report: Report, base: Path | None) -> dict[str, Any]:
    """Return the merged Chrome trace of every backend run this report's artifacts hold: one
    process per backend run, and per rank and profiling cycle where there are several. Its
    metadata's ``left_out`` says which artifacts could not be read, and why."""
    events: list[dict[str, Any]] = []
    unanchored: list[list[dict[str, Any]]] = []  # traces recorded elsewhere: one clock
    said: dict[str, list[str]] = {}
    for got, anchored in merged_groups(report, base, said):
        events += got
        if not anchored:
            unanchored.append(got)
    _from_first(unanchored)  # each trace read once
    return {"traceEvents": events, "displayTimeUnit": "ms",
            "metadata": trace_metadata(report, said)}


class PerfettoRenderer(Renderer):
    """The merged Chrome-trace JSON."""

    name = "perfetto"
    description = "one Chrome-trace JSON of every backend's run, for Perfetto's UI"
    output_file_extension = ".json"

    def render(self, report: Report, options: RenderOptions) -> str:
        """Return the merged trace as JSON text; what it left out is said in
        ``options.notices``. A trace that would hold no event is no answer: raise
        ``InputNotFound`` (its artifacts cannot be read) or ``UsageError`` (the report names
        none), and nothing is written."""
        trace = merged_trace(report, options.report_dir)
        left_out = trace["metadata"]["left_out"]
        options.notices.extend(f"left out of the trace: {why}" for why in left_out)
        if not trace["traceEvents"]:
            if left_out:
                raise errors.InputNotFound(
                    f"the trace would hold no events: none of the report's {len(left_out)} "
                    "artifact(s) could be read (each is said above)")
            raise errors.UsageError("the trace would hold no events: the report names no "
                                    "torch, py-spy or NVML artifact (run with --plugins torch "
                                    "or pyspy)")
        return json.dumps(trace, separators=(",", ":")) + "\n"


@hookimpl
def perfstack_renderers() -> list[Renderer]:
    """Provide the perfetto renderer."""
    return [PerfettoRenderer()]
