"""A backend run's own marks as trace events, on the time axis of its workload's start (t = 0,
in µs, as the merged trace aligns every run): the steps the workload marked, its resident
memory after each step, and each torch.compile compile it made.

Every run perfstack starts keeps them in its folder, whichever backend ran: the step marks
(``workload-steps.json``: the first step's start on the wall clock, each step's duration as
the device ran it where CUDA stamped both ends, and on the host's clock), the resident memory
just after each step, and dynamo's compile records (``compile.json``, with each compile's
start on the wall clock). So the merged trace and the Timeline pane show, for each run, when
its steps ran, how its memory rose step over step (a rising floor is a leak), and where it
compiled, beside what its backend recorded.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from perfstack.runfolder.rundir import RunFolder

from .compiler.capture import COMPILE_FILE
from .compiler.records import read as read_compiles

#: Thread ids of the tracks added to a run's process (above any real thread id seen).
STEPS_TID, HOST_STEPS_TID, COMPILE_TID = 9_000_001, 9_000_002, 9_000_003
#: The resident-memory counter's name.
RSS = "RSS after each step (B)"
#: The names of a run's steps track (the host's one is named after it) and compiles track.
STEPS_TRACK, COMPILE_TRACK = "steps", "torch.compile"
#: The category of an instant the merged trace's readers draw as a marker (a memory peak),
#: whichever backend's it is.
MARK = "perfstack mark"


def _thread(pid: int, tid: int, name: str) -> dict[str, Any]:
    return {"ph": "M", "name": "thread_name", "pid": pid, "tid": tid, "args": {"name": name}}


def _steps(pid: int, tid: int, first_us: float, times: list[float],
           first_step: int) -> list[dict[str, Any]]:
    """The timed steps laid end to end from ``first_us``, each named by its number in the
    workload (the first is ``first_step``: torch's ``ProfilerStep#N`` of the same step has
    the same N)."""
    out, t = [], first_us
    for i, seconds in enumerate(times, start=first_step):
        out.append({"ph": "X", "pid": pid, "tid": tid, "ts": t, "dur": seconds * 1e6,
                    "name": f"step {i}", "cat": "perfstack step"})
        t += seconds * 1e6
    return out


def _resident(run: RunFolder, pid: int, first_us: float, times: list[float],
              first_step: int) -> list[dict[str, Any]]:
    """The resident memory after each step, as a counter at the step's end: ``ends[k]`` is
    the end of timed step ``first_step + k - 1`` (``ends[0]``, the first timed step's start,
    is the end of the step before it)."""
    resident = run.step_resident()
    ends = [first_us]
    for seconds in times:
        ends.append(ends[-1] + seconds * 1e6)
    out = []
    for i, value in enumerate(resident):  # after step i + 1
        k = i + 2 - first_step
        if 0 <= k < len(ends):
            out.append({"ph": "C", "pid": pid, "tid": 0, "ts": ends[k], "name": RSS,
                        "args": {"value": float(value)}})
    return out


def _compiles(folder: Path, pid: int, start_us: float) -> list[dict[str, Any]]:
    try:
        run = read_compiles(json.loads((folder / COMPILE_FILE).read_text("utf-8")))
    except (OSError, ValueError, TypeError, AttributeError):
        return []
    out = []
    for frame in run.frames:
        for c in frame.compiles:
            if c.start_s is None:
                continue
            args = {"frame": f"{frame.name} ({frame.file}:{frame.line})",
                    "compile id": c.compile_id}
            if c.recompile_reason:
                args["why again"] = c.recompile_reason[:200]
            out.append({"ph": "X", "pid": pid, "tid": COMPILE_TID,
                        "ts": c.start_s * 1e6 - start_us, "dur": c.seconds * 1e6,
                        "name": f"compile {frame.name} {c.compile_id}", "cat": COMPILE_TRACK,
                        "args": args})
    return [_thread(pid, COMPILE_TID, COMPILE_TRACK), *out] if out else []


def run_events(folder: Path, pid: int) -> list[dict[str, Any]]:
    """The run's steps (as the device ran them, and on the host where that differs), its
    resident memory after each step as a counter, and its compiles, as events of process
    ``pid``; [] where the run's start is not known."""
    run = RunFolder(folder)
    started = run.started()
    if started is None:
        return []
    start_us = started[1] / 1e3
    out: list[dict[str, Any]] = []
    first = run.first_mark()
    device, host = run.step_times(), run.host_step_times()
    if first is not None and device:
        first_us = first * 1e6 - start_us
        first_step = run.first_timed_step()
        out.append(_thread(pid, STEPS_TID, STEPS_TRACK))
        out += _steps(pid, STEPS_TID, first_us, device, first_step)
        if host and host != device:
            out[-len(device) - 1]["args"]["name"] = f"{STEPS_TRACK} (as the device ran them)"
            out.append(_thread(pid, HOST_STEPS_TID, f"{STEPS_TRACK} (host: time to queue them)"))
            out += _steps(pid, HOST_STEPS_TID, first_us, host, first_step)
        out += _resident(run, pid, first_us, host or device, first_step)
    return out + _compiles(folder, pid, start_us)
