"""The Timeline pane's data: every backend run's events on one time axis, as compact tracks.

Read from the merged trace (``perfstack_plugins.perfetto.merged_trace``: each backend's run
aligned at its workload's start, t = 0): torch.profiler's ops per CPU thread and kernels per
GPU stream, py-spy's sampled stacks per thread (samples laid end to end: order and duration,
not wall-clock position), NVML's counters. Each thread or stream is a *slice track* (its
events nested by time, ``depth``), each counter a *counter track*. Times are µs from the
earliest event.

The page draws what it is given, so the data is bounded: past :data:`MAX_SLICES` slices the
shortest are left out of the page (``min_dur`` says from what duration the page shows every
slice), written beside it in chunks a zoom reads (``timelinefiles``), and the pane says so;
the merged trace itself (``--format perfetto``) keeps them all.
"""

from __future__ import annotations

import math
from collections import defaultdict
from pathlib import Path
from typing import Any

from perfstack.records import datarecord
from perfstack.report import Report

from ..perfetto import merged_groups, trace_metadata
from ..runtracks import COMPILE_TRACK, MARK, STEPS_TRACK
from .charts import esc
from .timelinefiles import pack, write_detail

#: The most slices a page holds: its first level of detail, what the page parses before its
#: first draw (a slice costs ~9 bytes of page, packed, and ~45 of JSON to parse).
MAX_SLICES = 60_000
#: Argument values kept for a slice's details (the rest is in the trace), and their length.
KEPT_ARGS = ("Input Dims", "Input type", "External id", "correlation", "stream", "device",
             "grid", "block", "Sequence number", "held", "frame", "compile id", "why again")
ARG_CHARS = 400
#: Kineto's copies of the host's ranges on a GPU stream (``ProfilerStep#3`` spanning several
#: steps' kernels): not device work, and a stream's busy share counts only device work.
DEVICE_RANGES = "gpu_user_annotation"
#: The device's own work: each names the op that launched it.
DEVICE_EVENTS = ("kernel", "gpu_memcpy", "gpu_memset")



def _args(args: Any, launcher: str | None = None) -> str | None:
    """A slice's details: the arguments kept, and for a device event the op that launched
    it (the op of the same External id in the same run's trace)."""
    if not isinstance(args, dict):
        return None
    parts = ([f"launched by {launcher}"] if launcher else []) + [
        f"{k}: {args[k]}" for k in KEPT_ARGS if k in args]
    return "; ".join(parts)[:ARG_CHARS] or None


def _slices(events: list[dict[str, Any]]) -> dict[tuple[int, int], list[tuple[float, float,
                                                                               str, str | None]]]:
    """Each thread's slices as (start, duration, name, args): complete events as they are,
    begin/end pairs (py-spy's) closed in order."""
    out: dict[tuple[int, int], list[tuple[float, float, str, str | None]]] = defaultdict(list)
    opened: dict[tuple[int, int], list[tuple[float, str]]] = defaultdict(list)
    ops = {(e.get("pid"), e["args"]["External id"]): str(e.get("name")) for e in events
           if e.get("cat") == "cpu_op" and isinstance(e.get("args"), dict)
           and "External id" in e["args"]}
    for e in events:
        ph, key = e.get("ph"), (int(e.get("pid", 0)), int(e.get("tid", 0) or 0))
        if e.get("cat") == DEVICE_RANGES:
            continue
        if ph == "X" and isinstance(e.get("ts"), (int, float)):
            args = e.get("args")
            launcher = (ops.get((e.get("pid"), args.get("External id")))
                        if e.get("cat") in DEVICE_EVENTS and isinstance(args, dict) else None)
            out[key].append((float(e["ts"]), float(e.get("dur") or 0.0), str(e.get("name")),
                             _args(args, launcher)))
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


def _counters(events: list[dict[str, Any]]) -> dict[tuple[int, str],
                                                    list[tuple[float, float]]]:
    """Each counter's (time, value) points, by process and name."""
    counters: dict[tuple[int, str], list[tuple[float, float]]] = defaultdict(list)
    for e in events:
        if e.get("ph") == "C" and isinstance(e.get("ts"), (int, float)):
            value = next((v for v in (e.get("args") or {}).values()
                          if isinstance(v, (int, float))), None)
            if value is not None:
                counters[(int(e["pid"]), str(e.get("name")))].append((float(e["ts"]),
                                                                      float(value)))
    return counters


def _home(tracks: list[dict[str, Any]]) -> list[float] | None:
    """Where the page opens: the span of the backends' own slices (the profiled steps, the
    sampled stacks; not a run's steps or compiles, nor a peak's mark), else every slice's,
    else None (the page shows everything)."""
    spans = [(t["ts"][0], max(a + d for a, d in zip(t["ts"], t["dur"], strict=True)))
             for t in tracks if t["kind"] == "slices" and t["ts"] and not t["marks"]
             and t["name"] != COMPILE_TRACK and not t["name"].startswith(STEPS_TRACK)] or [
        (t["ts"][0], t["ts"][-1] + t["dur"][-1]) for t in tracks
        if t["kind"] == "slices" and t["ts"]]
    return [min(a for a, _ in spans), max(b for _, b in spans)] if spans else None


@datarecord
class Labels:
    """The merged trace's names for its processes and threads, and the threads of marks."""

    process: dict[int, str]
    thread: dict[tuple[int, int], str]
    marked: set[tuple[int, int]]


def _slice_tracks(slices: dict[tuple[int, int], list[tuple[float, float, str, str | None]]],
                  labels: Labels, min_dur: float, t0: float, names: dict[str, int],
                  notes: dict[str, int]) -> tuple[list[dict[str, Any]],
                                                  dict[int, list[tuple[float, float, int,
                                                                       float, str]]]]:
    """A slice track a thread, in a process's order (its steps and compiles, its threads,
    its GPU streams), each nested whole and holding its slices of ``min_dur`` or more; and
    the shorter ones, by track (the page's detail)."""
    process, thread, marked = labels.process, labels.thread, labels.marked
    tracks: list[dict[str, Any]] = []

    def rank(key: tuple[int, int]) -> tuple[int, int, int]:
        name = thread.get(key, "")
        first = 0 if name.startswith(STEPS_TRACK) else 1 if name == COMPILE_TRACK else 2
        return key[0], first + name.startswith("stream"), key[1]

    order = sorted(slices, key=rank)
    detail: dict[int, list[tuple[float, float, int, float, str]]] = {}
    for (pid, tid) in order:
        every = sorted(slices[(pid, tid)], key=lambda s: (s[0], -s[1]))
        if not every:
            continue
        depth_all, own_all = _nest(every)  # nested whole: a kept slice's depth is its own
        keep = [i for i, s in enumerate(every) if s[1] >= min_dur]
        left = [(every[i][0] - t0, every[i][1], depth_all[i], own_all[i], every[i][2])
                for i, s in enumerate(every) if s[1] < min_dur]
        if left:
            detail[len(tracks)] = left
        items = [every[i] for i in keep]
        tracks.append({
            "kind": "slices", "pid": pid, "group": process.get(pid, f"process {pid}"),
            "name": thread.get((pid, tid), f"thread {tid}"), "marks": (pid, tid) in marked,
            "ts": [round(ts - t0, 3) for ts, _, _, _ in items],
            "dur": [round(d, 3) for _, d, _, _ in items],
            "depth": [depth_all[i] for i in keep],
            "own": [round(own_all[i], 3) for i in keep],
            "name_id": [names.setdefault(n, len(names)) for _, _, n, _ in items],
            "args": {str(j): notes.setdefault(a, len(notes)) for j, (_, _, _, a)
                     in enumerate(items) if a is not None}})
    return tracks, detail


@datarecord
class Read:
    """The merged trace as the timeline keeps it: names, compact slices and counter points,
    the marked tracks, and what was read or left out (``merged_groups``' ``said``)."""

    process: dict[int, str]
    thread: dict[tuple[int, int], str]
    slices: dict[tuple[int, int], list[tuple[float, float, str, str | None]]]
    marked: set[tuple[int, int]]
    counters: dict[tuple[int, str], list[tuple[float, float]]]
    said: dict[str, list[str]]


def _read(report: Report, base: Path | None) -> Read:
    """Read the merged trace a source at a time, each kept only as its compact slices and
    points (a job's traces are never all in memory as events at once); the traces recorded
    elsewhere re-timed together, from their first event."""
    process: dict[int, str] = {}
    thread: dict[tuple[int, int], str] = {}
    slices: dict[tuple[int, int], list[tuple[float, float, str, str | None]]] = {}
    marked: set[tuple[int, int]] = set()
    counters: dict[tuple[int, str], list[tuple[float, float]]] = {}
    own_clock: list[tuple[dict[Any, Any], dict[Any, Any]]] = []  # recorded elsewhere
    first_ts: list[float] = []
    read: dict[str, list[str]] = {}

    def keep(got: dict[Any, Any], found: dict[Any, Any], shift: float = 0.0) -> None:
        for key, items in got.items():
            slices.setdefault(key, []).extend(
                [(ts - shift, d, n, a) for ts, d, n, a in items] if shift else items)
        for ckey, values in found.items():
            counters.setdefault(ckey, []).extend(
                [(ts - shift, v) for ts, v in values] if shift else values)

    for events, anchored in merged_groups(report, base, read):
        process.update({int(e["pid"]): str(e["args"]["name"]) for e in events
                        if e.get("ph") == "M" and e.get("name") == "process_name"})
        thread.update({(int(e["pid"]), int(e.get("tid") or 0)): str(e["args"]["name"])
                       for e in events if e.get("ph") == "M" and e.get("name") == "thread_name"})
        marked |= {(int(e.get("pid", 0)), int(e.get("tid", 0) or 0)) for e in events
                   if e.get("cat") == MARK}
        if anchored:
            keep(_slices(events), _counters(events))
        else:
            first_ts.append(min((e["ts"] for e in events if "ts" in e), default=math.inf))
            own_clock.append((_slices(events), _counters(events)))
        del events
    origin = min(first_ts, default=math.inf)  # one clock: theirs, from their first event
    for got, found in own_clock:
        keep(got, found, origin if origin < math.inf else 0.0)
    return Read(process, thread, slices, marked, counters, read)


def timeline(report: Report, base: Path | None,
             page_dir: Path | None = None) -> tuple[dict[str, Any] | None, str]:
    """The pane's data (None where no backend's run left events on a time axis) and a line
    saying what it holds or why there is none. With ``page_dir`` (the page's folder), the
    slices too short for the page are written beside it (``timelinefiles``)."""
    got = _read(report, base)
    process, thread, slices, marked, counters = (got.process, got.thread, got.slices,
                                                 got.marked, got.counters)
    read = got.said
    trace = {"metadata": trace_metadata(report, read)}
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
    tracks, detail = _slice_tracks(slices, Labels(process, thread, marked), min_dur, t0,
                                   names, notes)
    for (pid, name), points in sorted(counters.items()):
        points.sort()
        tracks.append({"kind": "counter", "pid": pid,
                       "group": process.get(pid, f"process {pid}"),
                       "name": name, "ts": [round(ts - t0, 3) for ts, _ in points],
                       "value": [v for _, v in points]})
    # each run's tracks together, slices first (the left-out slices follow their track)
    order_of = sorted(range(len(tracks)), key=lambda i: tracks[i]["pid"])
    moved_to = {old: new for new, old in enumerate(order_of)}
    detail = {moved_to[i]: v for i, v in detail.items()}
    tracks = [tracks[i] for i in order_of]
    for t in tracks:
        del t["pid"]
    kept = sum(len(t["ts"]) for t in tracks if t["kind"] == "slices")
    left = trace["metadata"]["left_out"]
    data = {"tracks": tracks, "detail": detail}
    beside = write_detail(data, page_dir) if page_dir is not None else 0
    where = (f"are in {data['chunk_dir']}/ beside this page, read when a zoom shows them"
             if beside else "are left out of this page (the merged trace, --format "
             "perfetto, keeps them)")
    said = (f"{kept:,} slice{'' if kept == 1 else 's'} on {len(tracks)} tracks" + (
        f"; {total - kept:,} slices shorter than {min_dur:.3g} µs {where}"
        if kept < total else "") + (
        f"; {len(left)} file(s) could not be read: " + "; ".join(left[:3]) if left else ""))
    return {"tracks": tracks, "names": list(names), "notes": list(notes),
            "min_dur": min_dur, "left_out": trace["metadata"]["left_out"],
            "home": _home(tracks),
            "chunk_dir": data.get("chunk_dir"),
            "aligned_at": trace["metadata"]["aligned_at"]}, said


def timeline_pane(said: str, data: dict[str, Any]) -> tuple[str, str]:
    """The pane's markup: its controls, the canvas's box, the details of a clicked slice and
    the figures of a selected range (the script fills them), and its data, packed
    (:func:`~.timelinefiles.pack`: a fifth of the JSON's size, so the page is read sooner) and
    read only when the pane is first shown. What a slice's trace recorded (its shapes, types
    and ids: most of the data, read only by a click) is packed apart and returned second, for
    the end of the page (after the script: read after the first draw, it is not parsed
    before it)."""
    tracks = [{k: v for k, v in t.items() if k != "args"} for t in data["tracks"]]
    drawn = {**{k: v for k, v in data.items() if k != "notes"}, "tracks": tracks}
    recorded = {"notes": data["notes"], "args": [t.get("args", {}) for t in data["tracks"]]}
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
        '<script type="application/gzip+base64" id="perfstack-timeline">'
        f"{pack(drawn)}</script>"), (
        '<script type="application/gzip+base64" id="perfstack-timeline-notes">'
        f"{pack(recorded)}</script>")
