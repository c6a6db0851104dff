"""The ``perfetto`` format: one merged Chrome-trace JSON that Perfetto's UI and chrome://tracing
open (``perfstack show report.json --format perfetto -o trace.json``).

Each backend's run is its own process group, aligned at that run's workload start (t = 0):

- torch.profiler: its ops, kernels and annotations as they are in its trace, shifted from the
  trace's clock (``baseTimeNanoseconds`` + ts) to the workload's start (``workload.json``);
- py-spy: the sampled Python stacks as nested slices per thread. py-spy's profile carries no
  timestamps: samples are laid end to end from the moment py-spy was started, so idle gaps are
  closed up and the slices show order and duration, not wall-clock position;
- NVML: power, utilisation and memory as counter tracks over the sampler's time.

perf stat totals have no time axis, so they go into the trace's metadata, not onto a track.
"""

from __future__ import annotations

import json
import zlib
from pathlib import Path
from typing import Any

from perfstack import hookimpl
from perfstack.render import Renderer, RenderOptions
from perfstack.report import Layer, Report
from perfstack.run.rundir import read_started

from .artifacts import artifact, read_nvml, read_speedscope

PIDS = {"torch": 1, "pyspy": 2, "nvml": 3}
NVML_COUNTERS = (("power_w", "GPU power (W)"), ("util_gpu", "GPU utilisation (%)"),
                 ("util_mem", "GPU memory bandwidth utilisation (%)"),
                 ("mem_used_b", "GPU memory used (B)"))


def _start_ns(folder: Path) -> int | None:
    started = read_started(folder)  # the run folder's reader: its layout is the core's
    return started[1] if started else None


def _meta(pid: int, name: str, sort: int) -> list[dict[str, Any]]:
    return [{"ph": "M", "name": "process_name", "pid": pid, "tid": 0, "args": {"name": name}},
            {"ph": "M", "name": "process_sort_index", "pid": pid, "tid": 0,
             "args": {"sort_index": sort}}]


def torch_events(path: Path, pid: int) -> list[dict[str, Any]]:
    """torch.profiler's events, re-timed to µs since the workload started."""
    data = json.loads(path.read_text("utf-8", errors="replace"))
    events = data.get("traceEvents", []) if isinstance(data, dict) else data
    base_us = float(data.get("baseTimeNanoseconds", 0)) / 1e3 if isinstance(data, dict) else 0.0
    start = _start_ns(path.parent)
    shift = base_us - (start / 1e3 if start is not None else 0.0)
    if start is None:  # no anchor: start the trace at its own first event
        first = min((float(e["ts"]) for e in events if isinstance(e, dict) and "ts" in e),
                    default=0.0)
        shift = -first
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
    return out


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
    """NVML samples as counter tracks, one per GPU and field."""
    _, samples = read_nvml(path)
    out = []
    for s in samples:
        for field, title in NVML_COUNTERS:
            if s.get(field) is not None:
                out.append({"ph": "C", "pid": pid, "tid": 0, "ts": float(s["t"]) * 1e6,
                            "name": f"GPU {s.get('gpu')} {title}",
                            "args": {"value": float(s[field])}})
    return out


def merged_trace(report: Report, base: Path | None) -> dict[str, Any]:
    """Return the merged Chrome trace of every backend run this report's artifacts hold."""
    events: list[dict[str, Any]] = []
    included = []
    sources = (("torch", "trace", "torch.profiler: ops and kernels", torch_events),
               ("pyspy", "speedscope", "py-spy: sampled Python stacks (samples end to end)",
                pyspy_events),
               ("nvml", "timeline", "NVML: GPU counters", nvml_events))
    for sort, (backend, label, title, read) in enumerate(sources):
        path = artifact(report, base, backend, label)
        if path is None:
            continue
        pid = PIDS[backend]
        try:
            got = read(path, pid)
        except (OSError, ValueError, KeyError):
            continue
        events += _meta(pid, f"{backend} run: {title}", sort)
        events += got
        included.append(backend)
    counters = {r.key: r.values.get("value") for r in report.layers.get(Layer.HARDWARE, [])
                if r.source == "perf"}
    return {
        "traceEvents": events,
        "displayTimeUnit": "ms",
        "metadata": {
            "tool": f"perfstack {report.run.perfstack_version}",
            "command": " ".join(report.run.command),
            "aligned_at": "each backend's run starts at t=0, when its workload started",
            "backends": included,
            "perf_stat_totals": {k: (q.value if q is not None else None)
                                 for k, q in counters.items()},
        },
    }


class PerfettoRenderer(Renderer):
    """The merged Chrome-trace JSON."""

    name = "perfetto"
    description = "one Chrome-trace JSON of every backend's run, for Perfetto's UI"
    output_file_extension = ".json"

    def render(self, report: Report, options: RenderOptions) -> str:
        """Return the merged trace as JSON text."""
        return json.dumps(merged_trace(report, options.report_dir), separators=(",", ":")) + "\n"


@hookimpl
def perfstack_renderers() -> list[Renderer]:
    """Provide the perfetto renderer."""
    return [PerfettoRenderer()]
