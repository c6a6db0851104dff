"""The ``pyspy`` backend itself: py-spy attached to the workload (with its GIL and wait runs), the
profiles read back into rows, the time budget and the threads."""

from __future__ import annotations

import json
from datetime import datetime
from pathlib import Path
from typing import Any, ClassVar

from perfstack.analysis.views.drilldown import child_words
from perfstack.plugin.backend import (
    Attachment,
    Availability,
    Backend,
    Collected,
    Option,
    Outcome,
    RunContext,
)
from perfstack.report import Layer
from perfstack.runfolder import rundir

from .processes import as_children
from .processes import split as split_processes
from .sampler import (
    GIL_PROFILE_FILE,
    PROFILE_FILE,
    WAIT_PROFILE_FILE,
    WAIT_RATE,
    attach,
    availability,
    gil_rate,
    py_spy,
)
from .shares import running_shares
from .speedscope import (
    frame_key,
    is_ours,
    per_sample_s,
    read_profile,
    summarize,
    time_budget,
)
from .waits import read_waits, wait_metrics, wait_rows

__all__ = ["GIL_PROFILE_FILE", "PROFILE_FILE", "PySpyBackend", "frame_key", "gil_rate",
           "is_ours", "py_spy", "read_profile", "summarize"]


def _gil_run(ctx: RunContext, outcome: Outcome | None) -> tuple[float | None, str | None]:
    """The GIL pass's scale to the main run (its wall time over the GIL run's, 1 beside the
    main pass), and a note; None when the GIL pass cannot be used."""
    if outcome is None or not outcome.more:
        return 1.0, None  # beside the main pass, or none at all
    gil_run = outcome.more[0].record
    if not gil_run.exit.clean or not gil_run.wall_s or not outcome.record.wall_s:
        return None, (f"the GIL pass's run ended with {gil_run.exit.describe()}: GIL shares "
                      "and the interpreter/native split are not given")
    scale = outcome.record.wall_s / gil_run.wall_s
    return scale, (f"GIL pass in a run of its own ({gil_run.id}, {gil_run.wall_s:.2f} s against "
                   f"{outcome.record.wall_s:.2f} s): its counts are taken per second of its run")


class PySpyBackend(Backend):
    """py-spy sampling: Python functions, threads, GIL share (Python layer)."""

    name = "pyspy"
    layers = (Layer.PYTHON, Layer.KERNEL)
    primary: ClassVar[dict[str, str]] = {"": "self_time", "thread": "time",
                                         "native-frame": "samples", "wait": "wait_time"}
    publishes = ("budget.", "gil_held_share")
    openers = ((".speedscope.json", "speedscope, or speedscope.app"),)
    packages = ("py-spy",)
    quick = True  # a sampler: the time budget and the hottest functions by itself
    live = True  # reads a running process's memory from outside: perfstack attach PID
    description = "py-spy sampling: Python functions and threads, GIL share, native frames"
    options = (
        Option("rate", "samples per second", 250, int, minimum=1, maximum=10_000),
        Option("native", "also sample native frames (C/C++ below Python)", flag=True),
        Option("idle", "include idle (waiting) threads' samples", flag=True),
        Option("subprocesses", "also sample the workload's child processes", flag=True),
        Option("gil_rate", "samples per second of the GIL pass (default: half of --pyspy-rate; "
               "a second sampler at the full rate cost ~3% of wall time on 2 busy CPUs)",
               None, int, minimum=1, maximum=10_000),
        Option("no_gil", "skip the GIL-share pass (one run instead of two)", flag=True),
        Option("wait_rate", "samples per second of the wait pass, which samples the main "
               "thread idle or not, to say where it waits and to count torch.compile's waits "
               "as compiling (0: no wait pass)", WAIT_RATE, int, minimum=0, maximum=10_000),
        Option("gil_run", "give the GIL pass a run of its own (one more run; no second "
               "sampler competing for the CPUs, e.g. 100% of 2 cores)", flag=True),
    )

    def run_count(self, options: dict[str, Any]) -> int:
        """One run; two (the main pass, then the GIL pass) with --pyspy-gil-run."""
        return 2 if options.get("gil_run") and not options.get("no_gil") else 1

    def check(self) -> Availability:
        """Available when py-spy is installed and this user may attach to another process."""
        return availability()

    def attach(self, ctx: RunContext, pid: int) -> Attachment:
        """Start the samplers on the workload's pid (attached to a live process: every pass
        side by side, it has one run)."""
        return attach(ctx, pid, 1 if ctx.live else self.run_count(ctx.options))

    def collect(self, ctx: RunContext, outcome: Outcome | None) -> Collected:
        """Read both profiles into rows."""
        frames, profiles = read_profile(ctx.artifact_dir / PROFILE_FILE)
        log = ctx.artifact_dir / "profile.speedscope.json.log"
        said = log.read_text("utf-8", errors="replace").strip() if log.exists() else ""
        wall = outcome.record.wall_s if outcome is not None else None
        # py-spy sampled to its end and found no Python code running (a process that only
        # waits: a hung job, an idle server): answered by where it waits, below
        idle = _sampled_idle(said) and (ctx.live or (wall or 0.0) >= 1.0)
        if not profiles and not idle:
            if outcome is not None and not outcome.record.exit.clean:
                return Collected(notes=["py-spy wrote no profile: the workload ended first"])
            if wall is not None and wall < 1.0 and "process" in said:
                # py-spy needs ~0.1-0.3 s to attach: a shorter run can end before it does.
                return Collected(empty=(f"the workload ended after {wall:.2f} s, before py-spy "
                                        "could attach: nothing was sampled; profile a longer "
                                        "run"))
            raise RuntimeError(f"py-spy wrote no profile: {said.splitlines()[0] if said else ''}")
        gil_frames, gil_profiles = _gil_pass(ctx.artifact_dir)
        gil_scale, gil_note = _gil_run(ctx, outcome)
        if gil_scale is None:
            gil_frames, gil_profiles, gil_scale = [], [], 1.0
        # A GIL-pass sample stands for this many of the main pass's (its rate is lower).
        per_sample = per_sample_s(gil_profiles) / (per_sample_s(profiles) or 1.0) or 1.0
        pid = outcome.workload_pid if outcome is not None else None
        profiles, child_profiles, children = split_processes(profiles, pid)
        gil_profiles, gil_child_profiles, _ = split_processes(gil_profiles, pid)
        rows, metrics, notes = summarize(frames, profiles, gil_frames, gil_profiles,
                                         ctx.workload.home(), gil_scale * per_sample)
        metrics += running_shares(frames, profiles)
        if children:
            child_rows, _, _ = summarize(frames, child_profiles, gil_frames, gil_child_profiles,
                                         ctx.workload.home(), gil_scale * per_sample)
            rows[Layer.PYTHON] += as_children(child_rows, children)
            notes.append(f"{child_words(children)} of the workload sampled: their "
                         "functions are listed apart (keys child:), their time beside the "
                         "workload's, never a share of its wall time")
        if gil_note:
            notes.append(gil_note)
        if ctx.steps is not None and ctx.steps.warmup:
            notes.append(f"sampling covers the {ctx.steps.measured} measured steps (from the "
                         f"end of the {ctx.steps.warmup} warm-up steps) and the teardown")
        else:
            notes.append("sampling starts when the script starts; py-spy needs ~0.1 s to "
                         "attach")
        wait_frames, wait_profiles = read_profile(ctx.artifact_dir / WAIT_PROFILE_FILE)
        waits = read_waits((wait_frames, split_processes(wait_profiles, pid)[0]),
                           (frames, profiles), ctx.workload.home())
        if waits is not None and wall:
            waits.places = _within(waits.places, wait_profiles, wall if ctx.live else
                                   wall - _unsampled_start(ctx.artifact_dir, outcome))
        if waits is not None:
            rows[Layer.PYTHON] += wait_rows(waits, wall)
            metrics += wait_metrics(waits)
            notes.append("where the main thread waits: the wait pass (every sample, idle "
                         "ones too, at --pyspy-wait-rate) less the main pass, per place")
        if ctx.options.get("idle"):
            notes.append("no time budget with --pyspy-idle: idle samples cannot be told apart")
        elif not gil_profiles and profiles:
            notes.append("no time budget without the GIL pass (--pyspy-no-gil)")
        elif wall:
            windowed = ctx.steps is not None and ctx.steps.warmup > 0
            budget, error = time_budget(frames, profiles, gil_frames, gil_profiles, wall,
                                        _unsampled_start(ctx.artifact_dir, outcome), gil_scale,
                                        windowed, _teardown(ctx.artifact_dir, outcome),
                                        waits.compile_share if waits is not None else None)
            metrics += budget
            notes.append("time budget: the time before py-spy started counts as "
                         + ("its own part (before sampling)" if windowed else "start-up")
                         + "; its attach (~0.1-0.2 s) counts as waiting")
            notes.append(error)
        artifacts = {"speedscope": ctx.artifact_dir / PROFILE_FILE}
        for key, name in (("gil_speedscope", GIL_PROFILE_FILE),
                          ("wait_speedscope", WAIT_PROFILE_FILE)):
            if (ctx.artifact_dir / name).is_file():
                artifacts[key] = ctx.artifact_dir / name
        return Collected(rows=rows, metrics=metrics, notes=notes, artifacts=artifacts)


def _within(places: dict[Any, float], profiles: list[dict[str, Any]],
            sampled_s: float) -> dict[Any, float]:
    """The wait pass's seconds per place, held within the time it could sample
    (``sampled_s``: from py-spy's start to the process's end, or the time an attach
    measured). py-spy counts each sample as its nominal interval, and its samples can come
    faster than that (a 1.5 s sleep read as 1.76 s of waiting, 111% of the run); where the
    pass's own clock (its samples' sum) passes the time it had, each place is its share of
    the pass times that time. A pass that fell behind (ticks dropped on a busy machine) is
    left as it counted: its missing ticks are not evenly spread."""
    counted = max((float(p.get("endValue", 0)) - float(p.get("startValue", 0))
                   for p in profiles), default=0.0)
    if sampled_s <= 0 or counted <= sampled_s:
        return places
    return {k: min(sampled_s, v * sampled_s / counted) for k, v in places.items()}


def _gil_pass(folder: Path) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """The GIL pass's (frames, profiles); a pass that ran to its end and found the GIL never
    held (a process that sleeps, or waits on I/O) is one empty profile: a share of 0, not
    the unknown share of no pass."""
    frames, profiles = read_profile(folder / GIL_PROFILE_FILE)
    log = folder / f"{GIL_PROFILE_FILE}.log"
    if not profiles and log.exists() and _sampled_idle(log.read_text("utf-8", errors="replace")):
        profiles = [{"type": "sampled", "name": "", "unit": "seconds", "startValue": 0.0,
                     "endValue": 0.0, "samples": [], "weights": []}]
    return frames, profiles


def _sampled_idle(said: str) -> bool:
    """Whether py-spy's log says it sampled to the end and found no Python code running in
    any sample (every thread idle: sleeping, waiting on I/O or a lock), not that it failed."""
    return "Wrote speedscope file" in said and "Samples: 0 " in said


def _teardown(folder: Path, outcome: Outcome | None) -> float:
    """Seconds from the workload's script returning to the process's end (its teardown:
    atexit handlers, threads and pools joined, the interpreter's exit), or 0 where unknown."""
    end = rundir.RunFolder(folder).script_end()
    if outcome is None or end is None or outcome.record.wall_s is None:
        return 0.0
    try:
        started = datetime.fromisoformat(outcome.record.started).timestamp()
    except (TypeError, ValueError):
        return 0.0
    return max(0.0, started + outcome.record.wall_s - end)


def _unsampled_start(folder: Path, outcome: Outcome | None) -> float:
    """Seconds from the workload's start to py-spy's spawn: the run record's start (the
    driver's, ms precision) against the time attach() wrote."""
    try:
        spawn = json.loads((folder / "pyspy-spawn.json").read_text("utf-8"))["spawn_ns"] / 1e9
    except (OSError, ValueError, KeyError):
        return 0.0
    if outcome is None:
        return 0.0
    try:
        started = datetime.fromisoformat(outcome.record.started).timestamp()
    except (TypeError, ValueError):
        return 0.0
    return max(0.0, float(spawn) - started)
