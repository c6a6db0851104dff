"""Reading py-spy's speedscope profiles: frames and keys, the workload's own frames, the time
budget of the main thread, and the Python-layer rows (the gil backend reads them too)."""

from __future__ import annotations

import json
from collections import Counter, defaultdict
from pathlib import Path
from typing import Any

from perfstack.report import Better, Layer, Metric, Quantity, Row

from ..lateimports import LateImports, is_import
from .compiling import CompilerFrames

SOURCE = "pyspy"


def frame_key(frame: dict[str, Any]) -> str:
    """Return the Python-layer key of a speedscope frame: 'func (file:line)'."""
    return f"{frame.get('name', '?')} ({frame.get('file', '?')}:{frame.get('line') or 0})"


def _is_native(frame: dict[str, Any]) -> bool:
    file = str(frame.get("file") or "")
    return not file.endswith(".py") and not file.startswith("<")


def is_ours(frame: dict[str, Any]) -> bool:
    """Whether a frame is perfstack's bootstrap, its machine-speed probe or the runpy calls it
    makes, not the workload's; or the root frame py-spy gives each stack when it samples child
    processes too ('process 4242:"python ..."', no file), which only names the process."""
    file = str(frame.get("file") or "")
    return (file.endswith(("perfstack/inprocess/bootstrap.py", "perfstack/run/bootstrap.py",
                           "perfstack/machine/probe.py", "/runpy.py"))
            or file == "<frozen runpy>"
            or (not file and str(frame.get("name", "")).startswith("process ")))


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
        Counter[str], dict[str, float], float, float]:
    """Main thread: samples and seconds per innermost Python function outside imports and
    the compiler, the seconds of start-up and shutdown: importing (any importlib frame on the
    stack), and the interpreter's own set-up and teardown (no frame of the workload on the
    stack); and the seconds torch.compile was at work (its imports included)."""
    counts: Counter[str] = Counter()
    seconds: dict[str, float] = defaultdict(float)
    importing = compiling = 0.0
    profile = _main_profile(profiles)
    if profile is None:
        return counts, seconds, importing, compiling
    compiling_now = CompilerFrames(frames)
    for stack, weight in zip(profile.get("samples", []), profile.get("weights", []),
                             strict=False):
        if compiling_now(stack):
            compiling += weight
            continue
        python = [i for i in stack if not _is_native(frames[i]) and not is_ours(frames[i])]
        if not python or any(is_import(frames[i]) for i in stack):
            # Importing, or no frame of the workload's yet (set-up) or any more (teardown).
            importing += weight
            continue
        leaf = frame_key(frames[python[-1]])
        counts[leaf] += 1
        seconds[leaf] += weight
    return counts, seconds, importing, compiling


def key_parts(key: str) -> tuple[str, str, int | None]:
    """A Python-layer key 'func (file:line)' -> its function, file and line."""
    function, _, rest = key.partition(" (")
    file, _, line = rest.rstrip(")").rpartition(":")
    return function, file, int(line) if line.isdigit() else None


def _trailing(frames: list[dict[str, Any]], profiles: list[dict[str, Any]]) -> float:
    """Seconds of the main thread's last samples with no frame of the workload's: its
    teardown, as far as py-spy sampled it."""
    profile = _main_profile(profiles)
    if profile is None:
        return 0.0
    seconds = 0.0
    for stack, weight in zip(reversed(profile.get("samples", [])),
                             reversed(profile.get("weights", [])), strict=False):
        if any(not _is_native(frames[i]) and not is_ours(frames[i]) for i in stack):
            break
        seconds += weight
    return seconds


def time_budget(frames: list[dict[str, Any]], profiles: list[dict[str, Any]],
                gil_frames: list[dict[str, Any]], gil_profiles: list[dict[str, Any]],
                wall_s: float, unsampled_start_s: float = 0.0,
                gil_scale: float = 1.0, windowed: bool = False,
                teardown_s: float = 0.0, compile_share: float | None = None) -> tuple[
                    list[Metric], str]:
    """Split the main thread's wall time: ``budget.startup`` (imports, the interpreter's set-up
    and teardown), ``budget.compile`` (torch.compile at work: importing the compiler, compiling
    frames and graphs, building and autotuning kernels at their first run, waiting for its
    workers; only when it was), ``budget.interpreter``
    (Python code running with the GIL held), ``budget.native`` (the GIL released: torch ops
    and other native code called from Python) and ``budget.idle`` (not sampled: sleeping,
    I/O, locks, the GIL wanted, and py-spy's attach), each as a share of ``wall_s``;
    ``budget.before_sampling`` when ``windowed`` (``--steps``: py-spy was started after the
    warm-up steps, and what ran before it, start-up and those steps, was not sampled).

    Whether the main thread held the GIL comes from the GIL pass, a second sampler (at half
    the rate by default) that keeps only GIL-holding samples: the interpreter's time is that
    pass's own seconds on the main thread outside imports, times ``gil_scale`` when the pass
    had a run of its own (the main run's wall time over its run's), capped at the main pass's
    active time (per-function ratios of two independent samplers' counts would be noisy).
    ``unsampled_start_s`` (the workload ran before py-spy was started) counts as start-up,
    or under ``windowed`` as its own part; py-spy's own attach after that (~0.1-0.2 s) cannot
    be told from waiting. ``teardown_s`` (the process ran on after its script returned:
    atexit handlers, pools and threads joined) is teardown, start-up's part, sampled or not:
    what of it py-spy did not sample (the samples after the workload's last frame tell how
    much it did) is not the workload waiting. ``compile_share`` (the wait pass's share of the
    main thread's samples in torch.compile) moves the compiler's waits into ``compile``.

    Also returns a note with the sampling error of the split: a count of n samples has a
    standard error of sqrt(n) samples, and ``native`` is the difference of two such counts.
    """
    counts, seconds, importing, compiling = _main_leaves(frames, profiles)
    gil_counts, gil_seconds, _, _ = _main_leaves(gil_frames, gil_profiles)
    active = sum(seconds.values())
    interpreter = min(active, sum(gil_seconds.values()) * gil_scale)
    sampled = importing + compiling + active
    unsampled_start_s = max(0.0, min(unsampled_start_s, wall_s - sampled))
    before = unsampled_start_s if windowed else 0.0
    importing += unsampled_start_s - before
    idle = max(0.0, wall_s - before - importing - compiling - active)
    quiet_end = min(idle, max(0.0, teardown_s - _trailing(frames, profiles)))
    importing, idle = importing + quiet_end, idle - quiet_end
    if compile_share is not None:  # the compiler's waits are compiling, not the workload's
        sampled_s = wall_s - before - unsampled_start_s - quiet_end
        waited = min(idle, max(0.0, compile_share * sampled_s - compiling))
        compiling, idle = compiling + waited, idle - waited
    # Nonblocking sampling can sum a little past the wall time: scale to it, never beyond.
    scale = min(1.0, (wall_s - before) / max(importing + compiling + active, 1e-9))
    parts = (("before_sampling", before, "run"),
             ("startup", importing * scale, "python"),
             ("compile", compiling * scale, "compile"),
             ("interpreter", interpreter * scale, "python"),
             ("native", (active - interpreter) * scale, "framework"),
             ("idle", idle, "run"))
    described = {  # short: the report prints each after its value, on one line
        "before_sampling": "of wall time before py-spy started: start-up and the warm-up "
                           "steps (--steps), not sampled",
        "startup": "of wall time in imports, set-up, teardown (main thread)",
        "compile": "of wall time in torch.compile: its import, compiling, first kernel "
                   "builds, waiting for its workers (main thread)",
        "interpreter": "of wall time in Python code, start-up excluded (main thread)",
        "native": "of wall time in native code that released the GIL (main thread)",
        "idle": "of wall time waiting: sleep, I/O, locks, device sync (main thread)"}
    metrics = [Metric(f"budget.{name}", 100 * value / wall_s, "%", layer, SOURCE,
                      Better.NEITHER, description=described[name],
                      group="interpreter" if name == "interpreter" else None)
               for name, value, layer in parts
               if name not in ("before_sampling", "compile") or value > 0]
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


# long: one pass over the samples that fills every figure at once
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
    compiling = CompilerFrames(frames)
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
                    if not compiling(stack):  # else torch.compile's call imported it
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
        func, file, line = key_parts(key)
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
                                 "line": line,
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


def per_sample_s(profiles: list[dict[str, Any]]) -> float:
    """Return the seconds one sample stands for (1 / the rate), from the profiles' weights;
    0 when there are none."""
    n = sum(len(p.get("samples", [])) for p in profiles)
    return sum(sum(p.get("weights", [])) for p in profiles) / n if n else 0.0
