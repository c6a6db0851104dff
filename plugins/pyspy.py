"""The ``pyspy`` backend: py-spy sampling of the workload's Python stacks (Python layer).

py-spy attaches to the workload's Python pid as soon as the bootstrap has written it, in
non-blocking mode (it reads the process's memory without stopping it). Two passes: one records
every sample, one only samples whose thread holds the GIL (``--gil``), at half the rate by
default (``--pyspy-gil-rate``): a second sampler at the full rate cost ~3% of wall time on 2
busy CPUs, at half ~1.5% (docs/performance.md); the GIL share is the ratio of the two, each
per second of its own run. The passes take two runs
of the workload side by side by default; ``--pyspy-gil-run`` gives the GIL pass a run of its
own (``run_count`` 2), so that one sampler at a time competes with the workload for the CPUs.
Measured on 2 vCPUs (docs/performance.md), the second sampler's cost was within the noise of
one run's overhead, while a second run mixes two runs' splits into the budget: one run is the
default. With ``--pyspy-native`` the native frames below Python frames go
to the kernel layer, linked to the Python function that called them.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from collections import Counter, defaultdict
from collections.abc import Sequence
from datetime import datetime
from pathlib import Path
from typing import IO, Any, ClassVar

from perfstack import hookimpl
from perfstack.backend import (
    Attachment,
    Availability,
    Backend,
    Collected,
    Option,
    Outcome,
    RunContext,
)
from perfstack.report import Better, Finding, Layer, Metric, Quantity, Report, Row

from .lateimports import LateImports, is_import

SOURCE = "pyspy"
#: The two profiles a run of this backend writes in its folder (the gil backend reads them too).
PROFILE_FILE = "profile.speedscope.json"
GIL_PROFILE_FILE = "gil.speedscope.json"


def py_spy() -> str | None:
    """Return the py-spy binary: beside this interpreter (its venv) first, then on PATH."""
    local = Path(sys.executable).parent / "py-spy"
    return str(local) if local.is_file() else shutil.which("py-spy")


def _ptrace_scope() -> int | None:
    try:
        return int(Path("/proc/sys/kernel/yama/ptrace_scope").read_text().strip())
    except (OSError, ValueError):
        return None


class _Samplers:
    """The running py-spy processes; stop() waits for them to write their profiles."""

    def __init__(self, procs: list[subprocess.Popen[bytes]], logs: Sequence[IO[bytes]]) -> None:
        self.procs = procs
        self.logs = logs

    def wait_ready(self, timeout_s: float) -> None:
        """Return once every py-spy says it samples ("Sampling process ..."), or has exited,
        or after ``timeout_s``."""
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            waiting = False
            for proc, log in zip(self.procs, self.logs, strict=True):
                if proc.poll() is not None:
                    continue
                try:
                    said = Path(log.name).read_bytes()
                except (OSError, TypeError):
                    continue
                waiting = waiting or b"Sampling process" not in said
            if not waiting:
                return
            time.sleep(0.01)

    def stop(self) -> None:
        for proc in self.procs:
            try:
                proc.wait(timeout=30)  # py-spy stops and writes when the workload exits
            except subprocess.TimeoutExpired:
                proc.send_signal(signal.SIGINT)  # asks it to write what it has
                try:
                    proc.wait(timeout=10)
                except subprocess.TimeoutExpired:
                    proc.kill()
        for log in self.logs:
            log.close()


def frame_key(frame: dict[str, Any]) -> str:
    """Return the Python-layer key of a speedscope frame: 'func (file:line)'."""
    return f"{frame.get('name', '?')} ({frame.get('file', '?')}:{frame.get('line') or 0})"


def _is_native(frame: dict[str, Any]) -> bool:
    file = str(frame.get("file") or "")
    return not file.endswith(".py") and not file.startswith("<")


def is_ours(frame: dict[str, Any]) -> bool:
    """Whether a frame is perfstack's bootstrap, its machine-speed probe or the runpy calls it
    makes, not the workload's."""
    file = str(frame.get("file") or "")
    return (file.endswith(("perfstack/run/bootstrap.py", "perfstack/machine/probe.py", "/runpy.py"))
            or file == "<frozen runpy>")


def _stable_thread_name(name: str, seen: dict[str, int]) -> str:
    """Return a thread's key part that is the same in every run: its Python name.

    py-spy names a thread 'Thread 8730 "MainThread"'; the native id changes every run, so
    rows are keyed by the quoted Python name, numbered when several threads share it.
    """
    quoted = name.split('"')
    base = quoted[1] if len(quoted) >= 3 and quoted[1] else name
    seen[base] = seen.get(base, 0) + 1
    return base if seen[base] == 1 else f"{base}#{seen[base]}"


def _thread_name(profile: dict[str, Any]) -> str:
    return str(profile.get("name", "thread"))


def read_profile(path: Path) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """Return (frames, profiles) of a speedscope file, or empty lists when there is none."""
    if not path.is_file() or path.stat().st_size == 0:
        return [], []
    data = json.loads(path.read_text("utf-8"))
    return data["shared"]["frames"], data["profiles"]


def _leaf_counts(frames: list[dict[str, Any]], profiles: list[dict[str, Any]]) -> Counter[str]:
    leaves: Counter[str] = Counter()
    for profile in profiles:
        for stack in profile.get("samples", []):
            python = [i for i in stack if not _is_native(frames[i]) and not is_ours(frames[i])]
            if python:
                leaves[frame_key(frames[python[-1]])] += 1
    return leaves


def _main_profile(profiles: list[dict[str, Any]]) -> dict[str, Any] | None:
    main = [p for p in profiles if '"MainThread"' in _thread_name(p)]
    if main:
        return main[0]
    return max(profiles, key=lambda p: len(p.get("samples", [])), default=None)


def _main_leaves(frames: list[dict[str, Any]], profiles: list[dict[str, Any]]) -> tuple[
        Counter[str], dict[str, float], float]:
    """Main thread: samples and seconds per innermost Python function outside imports, and
    the seconds of start-up and shutdown: importing (any importlib frame on the stack), and
    the interpreter's own set-up and teardown (no frame of the workload on the stack)."""
    counts: Counter[str] = Counter()
    seconds: dict[str, float] = defaultdict(float)
    importing = 0.0
    profile = _main_profile(profiles)
    if profile is None:
        return counts, seconds, importing
    for stack, weight in zip(profile.get("samples", []), profile.get("weights", []),
                             strict=False):
        python = [i for i in stack if not _is_native(frames[i]) and not is_ours(frames[i])]
        if not python or any(is_import(frames[i]) for i in stack):
            # Importing, or no frame of the workload's yet (set-up) or any more (teardown).
            importing += weight
            continue
        leaf = frame_key(frames[python[-1]])
        counts[leaf] += 1
        seconds[leaf] += weight
    return counts, seconds, importing


def time_budget(frames: list[dict[str, Any]], profiles: list[dict[str, Any]],
                gil_frames: list[dict[str, Any]], gil_profiles: list[dict[str, Any]],
                wall_s: float, unsampled_start_s: float = 0.0,
                gil_scale: float = 1.0) -> tuple[list[Metric], str]:
    """Split the main thread's wall time: ``budget.startup`` (imports, the interpreter's set-up
    and teardown), ``budget.interpreter``
    (Python code running with the GIL held), ``budget.native`` (the GIL released: torch ops
    and other native code called from Python) and ``budget.idle`` (not sampled: sleeping,
    I/O, locks, the GIL wanted, and py-spy's attach), each as a share of ``wall_s``.

    Whether the main thread held the GIL comes from the GIL pass, a second sampler (at half
    the rate by default) that keeps only GIL-holding samples: the interpreter's time is that
    pass's own seconds on the main thread outside imports, times ``gil_scale`` when the pass
    had a run of its own (the main run's wall time over its run's), capped at the main pass's
    active time. The two samplers are independent, so per-function ratios of their counts would
    be noisy and, capped at 1, biased low; their totals are not.
    ``unsampled_start_s`` (the workload ran before py-spy was started) counts as start-up;
    py-spy's own attach after that (~0.1-0.2 s) cannot be told from waiting.

    Also returns a note with the sampling error of the split: a count of n samples has a
    standard error of sqrt(n) samples, and ``native`` is the difference of two such counts.
    """
    counts, seconds, importing = _main_leaves(frames, profiles)
    gil_counts, gil_seconds, _ = _main_leaves(gil_frames, gil_profiles)
    active = sum(seconds.values())
    interpreter = min(active, sum(gil_seconds.values()) * gil_scale)
    unsampled_start_s = max(0.0, min(unsampled_start_s, wall_s - importing - active))
    importing += unsampled_start_s
    idle = max(0.0, wall_s - importing - active)
    # Nonblocking sampling can sum a little past the wall time: scale to it, never beyond.
    scale = min(1.0, wall_s / max(importing + active, 1e-9))
    parts = (("startup", importing * scale, "python"),
             ("interpreter", interpreter * scale, "python"),
             ("native", (active - interpreter) * scale, "framework"),
             ("idle", idle, "run"))
    described = {  # short: the report prints each after its value, on one line
        "startup": "of wall time in imports, set-up, teardown (main thread)",
        "interpreter": "of wall time in Python code, start-up excluded (main thread)",
        "native": "of wall time in native code that released the GIL (main thread)",
        "idle": "of wall time waiting: sleep, I/O, locks, device sync (main thread)"}
    metrics = [Metric(f"budget.{name}", 100 * value / wall_s, "%", layer, SOURCE,
                      Better.NEITHER, description=described[name],
                      group="interpreter" if name == "interpreter" else None)
               for name, value, layer in parts]
    n_active, n_gil = sum(counts.values()), sum(gil_counts.values())
    per_sample = active / n_active if n_active else 0.0
    points = 100 * per_sample * scale / wall_s
    # The GIL pass may sample at a lower rate: each of its samples stands for more time.
    gil_per_sample = sum(gil_seconds.values()) / n_gil if n_gil else per_sample
    gil_points = 100 * gil_per_sample * gil_scale * scale / wall_s
    native_error = (points ** 2 * n_active + gil_points ** 2 * n_gil) ** 0.5
    note = (f"time budget from {n_active} samples ({n_gil} holding the GIL): one standard "
            f"error is {gil_points * n_gil ** 0.5:.1f} points on interpreter, "
            f"{native_error:.1f} on native")
    return metrics, note


def summarize(frames: list[dict[str, Any]], profiles: list[dict[str, Any]],
              gil_frames: list[dict[str, Any]], gil_profiles: list[dict[str, Any]],
              home: str | None = None, gil_scale: float = 1.0) -> tuple[
                  dict[Layer, list[Row]], list[Metric], list[str]]:
    """Return Python rows (self/total samples and seconds), thread rows, native kernel rows.

    ``gil_*`` is the GIL pass (samples whose thread held the GIL), or empty lists; its counts
    are multiplied by ``gil_scale`` (the main pass's samples one of its samples stands for,
    times the main run's wall time over the GIL run's when the pass had a run of its own)
    before they are compared with the main pass's. ``home`` is
    the workload's folder: each of the workload's own functions also gets ``own`` and
    ``own_time``, the samples in which it is the innermost frame of the workload's own code,
    so the library code it calls (torch, the standard library) counts as its time.
    """
    ours = _OwnFrames(frames, home)
    own_n: Counter[str] = Counter()
    own_seconds: dict[str, float] = defaultdict(float)
    self_n: Counter[str] = Counter()
    total_n: Counter[str] = Counter()
    seconds: dict[str, float] = defaultdict(float)
    threads: dict[str, dict[str, float]] = {}
    where: dict[str, set[str]] = defaultdict(set)
    native: dict[str, Counter[str]] = defaultdict(Counter)
    native_n: Counter[str] = Counter()
    importing_n: Counter[str] = Counter()  # a function's own samples taken inside an import
    late = LateImports(frames, ours, frame_key)
    all_samples = 0
    for profile in profiles:
        name = _thread_name(profile)
        t = threads.setdefault(name, {"samples": 0, "seconds": 0.0})
        for stack, weight in zip(profile.get("samples", []), profile.get("weights", []),
                                 strict=False):
            stack = [i for i in stack if not is_ours(frames[i])]
            all_samples += 1
            t["samples"] += 1
            t["seconds"] += weight
            python = [i for i in stack if not _is_native(frames[i])]
            mine = [i for i in python if ours(i)]
            if mine and not any(is_import(frames[i]) for i in stack):
                own_key = frame_key(frames[mine[-1]])
                own_n[own_key] += 1
                own_seconds[own_key] += weight
            if python:
                leaf = frame_key(frames[python[-1]])
                self_n[leaf] += 1
                if any(is_import(frames[i]) for i in stack):
                    importing_n[leaf] += 1
                    late.add(python, weight)
                seconds[leaf] += weight
                for key in {frame_key(frames[i]) for i in python}:
                    total_n[key] += 1
                    where[key].add(name)
            below = stack[stack.index(python[-1]) + 1:] if python else stack
            if below:  # native frames under the innermost Python frame
                sym = frames[below[-1]]
                nkey = f"{sym.get('name', '?')} ({sym.get('file', '?')})"
                native_n[nkey] += 1
                if python:
                    native[nkey][frame_key(frames[python[-1]])] += 1
    gil = {_thread_name(p): len(p.get("samples", [])) for p in gil_profiles}
    gil_leaves = _leaf_counts(gil_frames, gil_profiles)
    rows = []
    for key, total in total_n.most_common():
        func, _, rest = key.partition(" (")
        file, _, line = rest.rstrip(")").rpartition(":")
        values = {
            "self": Quantity(self_n[key], "count"), "total": Quantity(total, "count"),
            "self_time": Quantity(seconds[key], "s"),
            "self_share": Quantity(100 * self_n[key] / all_samples, "%"),
            "total_share": Quantity(100 * total / all_samples, "%")}
        if own_n[key]:
            values["own"] = Quantity(own_n[key], "count")
            values["own_time"] = Quantity(own_seconds[key], "s")
        if gil_profiles and self_n[key]:
            # GIL-holding samples of this function (in main-pass samples) over all of its own.
            values["gil_share"] = Quantity(
                min(100.0, 100 * gil_leaves[key] * gil_scale / self_n[key]), "%")
        attrs: dict[str, Any] = {"function": func, "file": file,
                                 "line": int(line) if line.isdigit() else None,
                                 "threads": sorted(where[key])}
        if self_n[key]:
            attrs["import_share"] = round(100 * importing_n[key] / self_n[key], 1)
        if key in late.by_caller:
            attrs["late_imports"] = late.of(key)
        rows.append(Row(key, key, SOURCE, values, attrs))
    rows.sort(key=lambda r: -(r.values["self"].value or 0))
    seen: dict[str, int] = {}
    for name, t in threads.items():
        values = {"samples": Quantity(t["samples"], "count"),
                  "time": Quantity(t["seconds"], "s")}
        if gil_profiles:
            values["gil_share"] = Quantity(
                min(100.0, 100 * gil.get(name, 0) * gil_scale / t["samples"]), "%")
        rows.append(Row(f"thread:{_stable_thread_name(name, seen)}", f"thread {name}", SOURCE,
                        values, {"kind": "thread"}))
    kernel = [Row(k, k, SOURCE, {"samples": Quantity(n, "count"),
                                 "share": Quantity(100 * n / all_samples, "%")},
                  {"kind": "native-frame"}, {"python": [c for c, _ in native[k].most_common(5)]})
              for k, n in native_n.most_common(50)]
    metrics = [Metric("pyspy_samples", all_samples, "count", "python", SOURCE, Better.NEITHER,
                      detail=True)]
    notes = [f"{all_samples} samples in {len(threads)} threads"]
    if gil_profiles and all_samples:
        share = 100 * min(sum(gil.values()) * gil_scale, all_samples) / all_samples
        metrics.append(Metric(
            "gil_held_share", share, "%", "python", SOURCE, Better.NEITHER,
            description="of py-spy's samples holding the GIL, start-up included",
            group="interpreter"))
    elif not gil_profiles:
        notes.append("no GIL pass: GIL share unknown")
    return {Layer.PYTHON: rows, Layer.KERNEL: kernel}, metrics, notes


class _OwnFrames:
    """Whether a frame (by index) is the workload's own code, decided once per frame."""

    def __init__(self, frames: list[dict[str, Any]], home: str | None) -> None:
        from perfstack.analysis.origin import origin

        self.frames, self.home, self.origin = frames, home, origin
        self.known: dict[int, bool] = {}

    def __call__(self, index: int) -> bool:
        if self.home is None:
            return False
        if index not in self.known:
            self.known[index] = self.origin(str(self.frames[index].get("file") or ""),
                                            self.home).ours
        return self.known[index]


def gil_rate(options: dict[str, Any]) -> int:
    """The GIL pass's rate: ``gil_rate``, else half the main pass's (at least 1 per second)."""
    given = options.get("gil_rate")
    return int(given) if given else max(1, int(options.get("rate") or 250) // 2)


def per_sample_s(profiles: list[dict[str, Any]]) -> float:
    """Return the seconds one sample stands for (1 / the rate), from the profiles' weights;
    0 when there are none."""
    n = sum(len(p.get("samples", [])) for p in profiles)
    return sum(sum(p.get("weights", [])) for p in profiles) / n if n else 0.0


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
                                         "native-frame": "samples"}
    publishes = ("budget.", "gil_held_share")
    description = "py-spy sampling: Python functions and threads, GIL share, native frames"
    options = (
        Option("rate", "samples per second", 250, int, minimum=1, maximum=10_000),
        Option("native", "also sample native frames (C/C++ below Python)", flag=True),
        Option("idle", "include idle (waiting) threads' samples", flag=True),
        Option("subprocesses", "also sample the workload's child processes", flag=True),
        Option("gil_rate", "samples per second of the GIL pass (default: half of --pyspy-rate; "
               "a second sampler at the full rate cost ~3%% of wall time on 2 busy CPUs)",
               None, int, minimum=1, maximum=10_000),
        Option("no_gil", "skip the GIL-share pass (one run instead of two)", flag=True),
        Option("gil_run", "give the GIL pass a run of its own (one more run; no second "
               "sampler competing for the CPUs, e.g. 100% of 2 cores)", flag=True),
    )

    def run_count(self, options: dict[str, Any]) -> int:
        """One run; two (the main pass, then the GIL pass) with --pyspy-gil-run."""
        return 2 if options.get("gil_run") and not options.get("no_gil") else 1

    def check(self) -> Availability:
        """Available when py-spy is installed and this user may attach to another process."""
        if py_spy() is None:
            return Availability.no("py-spy is not installed", "pip install py-spy")
        scope = _ptrace_scope()
        if os.geteuid() != 0 and scope is not None and scope >= 1:
            return Availability.no(
                f"ptrace is refused: kernel.yama.ptrace_scope={scope} and not root",
                "sudo sysctl kernel.yama.ptrace_scope=0, or run perfstack with CAP_SYS_PTRACE")
        if scope == 3:
            return Availability.no("ptrace is disabled: kernel.yama.ptrace_scope=3",
                                   "a reboot with ptrace_scope below 3 is needed")
        return Availability.yes()

    def attach(self, ctx: RunContext, pid: int) -> Attachment:
        """Start the samplers on the workload's pid."""
        exe = py_spy() or "py-spy"
        common = ["record", "--function", "--format", "speedscope", "--pid", str(pid)]
        for flag in ("idle", "subprocesses"):
            if ctx.options.get(flag):
                common.append(f"--{flag}")
        # Native stacks need py-spy to pause the process; the GIL pass only reads its memory.
        main = ["--native" if ctx.options.get("native") else "--nonblocking",
                "--rate", str(ctx.options.get("rate") or 250)]
        gil = (GIL_PROFILE_FILE, ["--nonblocking", "--gil", "--rate", str(gil_rate(ctx.options))])
        if ctx.run_index > 0:  # the second run: the GIL pass alone
            passes = [gil]
        else:
            passes = [(PROFILE_FILE, main)]
            if self.run_count(ctx.options) == 1 and not ctx.options.get("no_gil"):
                passes.append(gil)  # beside the main pass (without --pyspy-gil-run)
            # When sampling began, against the bootstrap's start (workload.json): the time
            # before it is start-up the sampler did not see, not waiting.
            (ctx.artifact_dir / "pyspy-spawn.json").write_text(
                json.dumps({"spawn_ns": time.time_ns()}), "utf-8")
        procs, logs = [], []
        for name, extra in passes:
            log = open(ctx.artifact_dir / f"{name}.log", "wb")  # noqa: SIM115 - closed by stop()
            logs.append(log)
            procs.append(subprocess.Popen(
                [exe, *common, *extra, "-o", str(ctx.artifact_dir / name)],
                stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL))
        return _Samplers(procs, logs)

    def collect(self, ctx: RunContext, outcome: Outcome | None) -> Collected:
        """Read both profiles into rows."""
        frames, profiles = read_profile(ctx.artifact_dir / PROFILE_FILE)
        if not profiles:
            log = ctx.artifact_dir / "profile.speedscope.json.log"
            said = log.read_text("utf-8", errors="replace").strip() if log.exists() else ""
            if outcome is not None and not outcome.record.exit.clean:
                return Collected(notes=["py-spy wrote no profile: the workload ended first"])
            wall = outcome.record.wall_s if outcome is not None else None
            if wall is not None and wall < 1.0 and "process" in said:
                # py-spy needs ~0.1-0.3 s to attach: a shorter run can end before it does.
                return Collected(empty=(f"the workload ended after {wall:.2f} s, before py-spy "
                                        "could attach: nothing was sampled; profile a longer "
                                        "run"))
            raise RuntimeError(f"py-spy wrote no profile: {said.splitlines()[0] if said else ''}")
        gil_frames, gil_profiles = read_profile(ctx.artifact_dir / GIL_PROFILE_FILE)
        gil_scale, gil_note = _gil_run(ctx, outcome)
        if gil_scale is None:
            gil_frames, gil_profiles, gil_scale = [], [], 1.0
        # A GIL-pass sample stands for this many of the main pass's (its rate is lower).
        per_sample = per_sample_s(gil_profiles) / (per_sample_s(profiles) or 1.0) or 1.0
        rows, metrics, notes = summarize(frames, profiles, gil_frames, gil_profiles,
                                         _home(ctx), gil_scale * per_sample)
        if gil_note:
            notes.append(gil_note)
        if ctx.steps is not None and ctx.steps.warmup:
            notes.append(f"sampling covers the {ctx.steps.measured} measured steps (from the "
                         f"end of the {ctx.steps.warmup} warm-up steps) and the teardown")
        else:
            notes.append("sampling starts when the script starts; py-spy needs ~0.1 s to "
                         "attach")
        wall = outcome.record.wall_s if outcome is not None else None
        if ctx.options.get("idle"):
            notes.append("no time budget with --pyspy-idle: idle samples cannot be told apart")
        elif not gil_profiles:
            notes.append("no time budget without the GIL pass (--pyspy-no-gil)")
        elif wall:
            budget, error = time_budget(frames, profiles, gil_frames, gil_profiles, wall,
                                        _unsampled_start(ctx.artifact_dir, outcome), gil_scale)
            metrics += budget
            notes.append("time budget: the time before py-spy started counts as start-up; "
                         "its attach (~0.1-0.2 s) counts as waiting")
            notes.append(error)
        artifacts = {"speedscope": ctx.artifact_dir / PROFILE_FILE}
        if (ctx.artifact_dir / GIL_PROFILE_FILE).is_file():
            artifacts["gil_speedscope"] = ctx.artifact_dir / GIL_PROFILE_FILE
        return Collected(rows=rows, metrics=metrics, notes=notes, artifacts=artifacts)


#: Share of samples (%) under torch's data-loading code from which loading is the bottleneck.
DATA_LOADING_SHARE = 20.0


@hookimpl
def perfstack_findings(report: Report) -> list[Finding]:
    """Flag a run whose samples are mostly inside torch's data loading (DataLoader, datasets,
    collate) in the main process."""
    rows = [r for r in report.layers.get(Layer.PYTHON, [])
            if r.source == SOURCE and "torch/utils/data/" in str(r.attrs.get("file", ""))]
    share = max((float(r.values["total_share"].value or 0.0) for r in rows
                 if "total_share" in r.values), default=0.0)
    if share < DATA_LOADING_SHARE:
        return []
    top = max(rows, key=lambda r: float(r.values["total_share"].value or 0.0))
    return [Finding(
        rule="python.data-loading",
        title=f"data loading: {share:.0f}% of the samples are inside torch's DataLoader",
        layer="python", severity="warning",
        evidence=[f"{top.name}: {share:.1f}% of all samples (inclusive)"],
        action=("load in worker processes (DataLoader(num_workers=N, pin_memory=True, "
                "persistent_workers=True)), make __getitem__ cheaper, or prefetch"),
        source=SOURCE)]


def _home(ctx: RunContext) -> str:
    """The workload's folder: its script's, or the current folder for ``-m``."""
    if ctx.workload.module:
        return os.getcwd()
    return os.path.dirname(os.path.abspath(ctx.workload.target))


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


@hookimpl
def perfstack_backends() -> list[Backend]:
    """Provide the pyspy backend."""
    return [PySpyBackend()]
