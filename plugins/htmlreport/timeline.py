"""The Timeline pane's data: every backend run's events on one time axis, as compact tracks.

Read from the merged trace (``perfstack_plugins.perfetto.merged_trace``: each backend's run
aligned at its workload's start, t = 0): torch.profiler's ops per CPU thread and kernels per
GPU stream, py-spy's sampled stacks per thread (samples laid end to end: order and duration,
not wall-clock position), NVML's counters. Each thread or stream is a *slice track* (its
events nested by time, ``depth``), each counter a *counter track*. Times are µs from the
earliest event.

The page draws what it is given, so the data is bounded: past :data:`MAX_SLICES` slices the
shortest are left out (``min_dur`` says from what duration the page shows every slice) and
the pane says so; the merged trace itself (``--format perfetto``) keeps them all.
"""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path
from typing import Any

from perfstack.report import Report

from ..perfetto import merged_trace
from .charts import esc

#: The most slices a page holds (a slice costs ~40 bytes of page data).
MAX_SLICES = 200_000
#: Argument values kept for a slice's details (the rest is in the trace), and their length.
KEPT_ARGS = ("Input Dims", "Input type", "External id", "correlation", "stream", "device",
             "grid", "block", "Sequence number", "held", "frame", "compile id", "why again")
ARG_CHARS = 400
#: Kineto's copies of the host's ranges on a GPU stream (``ProfilerStep#3`` spanning several
#: steps' kernels): not device work, and a stream's busy share counts only device work.
DEVICE_RANGES = "gpu_user_annotation"
#: Tracks every run has (its steps, its compiles): where the page opens is the backends' own.
RUN_TRACKS = ("torch.compile",)


def _args(args: Any) -> str | None:
    if not isinstance(args, dict):
        return None
    parts = [f"{k}: {args[k]}" for k in KEPT_ARGS if k in args]
    return "; ".join(parts)[:ARG_CHARS] or None


def _slices(events: list[dict[str, Any]]) -> dict[tuple[int, int], list[tuple[float, float,
                                                                               str, str | None]]]:
    """Each thread's slices as (start, duration, name, args): complete events as they are,
    begin/end pairs (py-spy's) closed in order."""
    out: dict[tuple[int, int], list[tuple[float, float, str, str | None]]] = defaultdict(list)
    opened: dict[tuple[int, int], list[tuple[float, str]]] = defaultdict(list)
    for e in events:
        ph, key = e.get("ph"), (int(e.get("pid", 0)), int(e.get("tid", 0) or 0))
        if e.get("cat") == DEVICE_RANGES:
            continue
        if ph == "X" and isinstance(e.get("ts"), (int, float)):
            out[key].append((float(e["ts"]), float(e.get("dur") or 0.0), str(e.get("name")),
                             _args(e.get("args"))))
        elif ph == "B":
            opened[key].append((float(e["ts"]), str(e.get("name"))))
        elif ph == "E" and opened[key]:
            ts, name = opened[key].pop()
            out[key].append((ts, float(e["ts"]) - ts, name, None))
    return out


def _nest(items: list[tuple[float, float, str, str | None]]) -> tuple[list[int], list[float]]:
    """Each slice's depth and own time (its duration less its children's), in the order
    given (sorted by start, the longest first)."""
    depth, own = [0] * len(items), [d for _, d, _, _ in items]
    stack: list[int] = []
    for i, (ts, dur, _, _) in enumerate(items):
        while stack and ts >= items[stack[-1]][0] + items[stack[-1]][1] - 1e-3:
            stack.pop()
        if stack:
            depth[i] = len(stack)
            own[stack[-1]] -= dur
        stack.append(i)
    return depth, [max(0.0, o) for o in own]


def timeline(report: Report, base: Path | None) -> tuple[dict[str, Any] | None, str]:
    """The pane's data (None where no backend's run left events on a time axis) and a line
    saying what it holds or why there is none."""
    trace = merged_trace(report, base)
    events = trace["traceEvents"]
    process = {int(e["pid"]): str(e["args"]["name"]) for e in events
               if e.get("ph") == "M" and e.get("name") == "process_name"}
    thread = {(int(e["pid"]), int(e.get("tid") or 0)): str(e["args"]["name"]) for e in events
              if e.get("ph") == "M" and e.get("name") == "thread_name"}
    slices = _slices(events)
    counters: dict[tuple[int, str], list[tuple[float, float]]] = defaultdict(list)
    for e in events:
        if e.get("ph") == "C" and isinstance(e.get("ts"), (int, float)):
            value = next((v for v in (e.get("args") or {}).values()
                          if isinstance(v, (int, float))), None)
            if value is not None:
                counters[(int(e["pid"]), str(e.get("name")))].append((float(e["ts"]),
                                                                      float(value)))
    total = sum(len(v) for v in slices.values())
    if not total and not counters:
        left = trace["metadata"]["left_out"]
        return None, ("no backend's run left events on a time axis (the tracing and "
                      "sampling backends do: perfstack plugins lists them)"
                      + (": " + "; ".join(left) if left else ""))
    min_dur = 0.0
    if total > MAX_SLICES:  # the longest slices, MAX_SLICES of them
        durations = sorted((d for v in slices.values() for _, d, _, _ in v), reverse=True)
        min_dur = durations[MAX_SLICES - 1]
    starts = [ts for v in slices.values() for ts, _, _, _ in v]
    starts += [ts for v in counters.values() for ts, _ in v]
    t0 = min(starts)
    names: dict[str, int] = {}
    notes: dict[str, int] = {}
    tracks: list[dict[str, Any]] = []
    # a process's steps and compiles first, then its threads, then its GPU streams
    def rank(key: tuple[int, int]) -> tuple[int, int, int]:
        name = thread.get(key, "")
        first = 0 if name.startswith("steps") else 1 if name == "torch.compile" else 2
        return key[0], first + name.startswith("stream"), key[1]

    order = sorted(slices, key=rank)
    for (pid, tid) in order:
        items = slices[(pid, tid)]
        items = sorted((s for s in items if s[1] >= min_dur), key=lambda s: (s[0], -s[1]))
        if not items:
            continue
        depth, own = _nest(items)
        tracks.append({
            "kind": "slices", "pid": pid, "group": process.get(pid, f"process {pid}"),
            "name": thread.get((pid, tid), f"thread {tid}"),
            "ts": [round(ts - t0, 3) for ts, _, _, _ in items],
            "dur": [round(d, 3) for _, d, _, _ in items], "depth": depth,
            "own": [round(o, 3) for o in own],
            "name_id": [names.setdefault(n, len(names)) for _, _, n, _ in items],
            "args": {str(i): notes.setdefault(a, len(notes)) for i, (_, _, _, a)
                     in enumerate(items) if a is not None}})
    for (pid, name), points in sorted(counters.items()):
        points.sort()
        tracks.append({"kind": "counter", "pid": pid,
                       "group": process.get(pid, f"process {pid}"),
                       "name": name, "ts": [round(ts - t0, 3) for ts, _ in points],
                       "value": [v for _, v in points]})
    tracks.sort(key=lambda t: t.pop("pid"))  # each run's tracks together, slices first
    kept = sum(len(t["ts"]) for t in tracks if t["kind"] == "slices")
    # where the page opens: the slices' span (the profiled steps), else everything
    spans = [(t["ts"][0], max(a + d for a, d in zip(t["ts"], t["dur"], strict=True)))
             for t in tracks if t["kind"] == "slices" and t["name"] not in RUN_TRACKS
             and not t["name"].startswith("steps")] or [
        (t["ts"][0], t["ts"][-1] + t["dur"][-1]) for t in tracks if t["kind"] == "slices"]
    home = [min(a for a, _ in spans), max(b for _, b in spans)] if spans else None
    left = trace["metadata"]["left_out"]
    said = (f"{kept:,} slice{'' if kept == 1 else 's'} on {len(tracks)} tracks" + (
        f"; {total - kept:,} slices shorter than {min_dur:.3g} µs left out at this size (the "
        "merged trace, --format perfetto, keeps them)" if kept < total else "") + (
        f"; {len(left)} file(s) could not be read: " + "; ".join(left[:3]) if left else ""))
    return {"tracks": tracks, "names": list(names), "notes": list(notes),
            "min_dur": min_dur, "left_out": trace["metadata"]["left_out"], "home": home,
            "aligned_at": trace["metadata"]["aligned_at"]}, said


def timeline_pane(said: str, data_json: str) -> str:
    """The pane's markup: its controls, the canvas's box, the details of a clicked slice and
    the figures of a selected range (the script fills them), and its data (``data_json``,
    escaped for a script element), read only when the pane is first shown."""
    return (
        "<h2>Timeline</h2>"
        f'<p class="muted" id="timeline-said">{esc(said)}. Each backend\'s run starts at 0, '
        "when its workload started (each is its own run of the workload); sampled stacks, "
        "which carry no time of their own, are laid end to end. Wheel or w/s zoom at the "
        "pointer, drag or a/d pan, shift-drag selects a range, a click shows a slice, 0 goes "
        "back to the profiled span, 9 shows every run whole.</p>"
        '<div class="controls"><input type="search" id="timeline-search" '
        'placeholder="highlight slices by name" aria-label="highlight slices by name">'
        '<button type="button" id="timeline-reset">reset</button> '
        '<label id="timeline-lineup-box"><input type="checkbox" id="timeline-lineup"> line '
        'the runs up at step <input type="number" id="timeline-step" min="1" value="1" '
        'aria-label="the step to line the runs up at"></label> '
        '<span class="count" id="timeline-status"></span></div>'
        '<div id="timeline-box"></div>'
        '<dl id="timeline-details"></dl><div id="timeline-selection"></div>'
        f'<script type="application/json" id="perfstack-timeline">{data_json}</script>')
