"""The run folder: where a run's files go, what they are called, and how they are read back.

``.perfstack/runs/<timestamp>/`` (and the ``latest`` pointer) holds ``report.json`` (unless
``-o`` puts the report elsewhere) and one sub-folder per run: ``warmup-1/``, ``baseline-1/``...,
and one per backend, each with the workload's ``stdout.log``/``stderr.log``,
``faulthandler.log``, what the bootstrap wrote (``workload.json``: its pid and start;
``workload-steps.json``; ``probe.json``; ``workload-metrics.jsonl``) and the backend's raw
output; under torchrun one ``rank-N/`` folder per rank. The names are
``perfstack.runfolder.filenames``'; the bootstrap, inside the workload, writes the files
(``perfstack.inprocess.bootstrap``); ``RunFolder`` is the one reader of them on the driver's side.
"""

from __future__ import annotations

import contextlib
import itertools
import json
import math
import os
import re
import time
from pathlib import Path
from typing import Any

from perfstack.errors import OutputError
from perfstack.records import datarecord
from perfstack.runfolder.filenames import (
    HOOK_ERRORS_FILE,
    LATEST,
    METRICS_FILE,
    PROBE_FILE,
    RANK_PREFIX,
    STARTED_FILE,
    STDOUT_FILE,
    STEPS_FILE,
    WINDOW_FILE,
    WINDOW_GO_FILE,
    WORKLOAD_ENV_FILE,
)


@datarecord(frozen=True)
class WorkloadRun:
    """What the workload's bootstrap recorded of one run: its process and start (None until
    it ran), how many steps it marked and each step's time (known once it exited)."""

    pid: int | None
    start_ns: int | None
    steps: int | None
    step_times: list[float]


@datarecord(frozen=True)
class RunFolder:
    """One run's folder (a warm-up, a baseline or a backend's run) and what the workload's
    bootstrap left in it: the one object the driver and the analyses ask.

    ``rank=None`` means the workload's own files: the lowest rank's under torchrun (rank 0's
    on the job's first node), else the folder's.
    """

    path: Path

    def ranks(self) -> list[int]:
        """The ranks whose processes have a folder here, in order. Under torchrun these are
        global ranks: on the second node of a job, 2 and 3 rather than 0 and 1."""
        try:
            names = [p.name for p in self.path.iterdir() if p.is_dir()]
        except OSError:
            return []
        n = len(RANK_PREFIX)
        return sorted(int(name[n:]) for name in names
                      if name.startswith(RANK_PREFIX) and name[n:].isdigit())

    def rank(self, rank: int | None = None) -> RunFolder:
        """One rank's folder (``None``: the workload's own, see the class)."""
        if rank is not None:
            return RunFolder(self.path / f"{RANK_PREFIX}{rank}")
        ranks = self.ranks()
        return self.rank(ranks[0]) if ranks else self

    def file(self, name: str, rank: int | None = None) -> Path:
        """Where one of the workload's files is (its name from perfstack.runfolder.filenames)."""
        return self.rank(rank).path / name

    def outcome(self, rank: int | None = None) -> WorkloadRun:
        """What the bootstrap recorded of the workload's run (of one rank's)."""
        where = self.rank(rank)
        started = where.started()
        steps, times = where._steps()
        return WorkloadRun(started[0] if started else None,
                           started[1] if started else None, steps, times)

    def started(self, rank: int | None = None) -> tuple[int, int] | None:
        """(pid, start_ns) once the workload has started, else None."""
        data = _read_json(self.file(STARTED_FILE, rank))
        try:
            return int(data["pid"]), int(data["start_ns"])
        except (KeyError, TypeError, ValueError):
            return None

    def steps(self, rank: int | None = None) -> int | None:
        """How many steps the workload marked (saved at its exit), or None."""
        return self.rank(rank)._steps()[0]

    def step_times(self, rank: int | None = None) -> list[float]:
        """Each step's duration in seconds (saved at the workload's exit), or []: as the GPU
        ran it where the workload ran CUDA and the device stamped both its ends, else on the
        host's clock."""
        return self.rank(rank)._steps()[1]

    def host_step_times(self, rank: int | None = None) -> list[float]:
        """Each step's duration on the host's clock (its marks), or []: on a GPU, the time
        to queue the step's work."""
        return self.rank(rank)._steps(device=False)[1]

    def step_resident(self, rank: int | None = None) -> list[int]:
        """The process's resident memory (bytes) just after each step, one a step, or []
        where the kernel did not say (an older folder's extra first figure, a first batch's
        optimizer step before its ``perfstack.step()``, left out)."""
        data = _read_json(self.rank(rank).path / STEPS_FILE)
        try:
            values = [int(v) for v in data["step_rss_bytes"]]
        except (KeyError, TypeError, ValueError):
            return []
        count = data.get("steps")
        if isinstance(count, int) and len(values) == count + 1:
            values = values[1:]
        return values if all(v > 0 for v in values) else []

    def children_cpu(self, rank: int | None = None) -> float | None:
        """The CPU seconds of the child processes the workload waited for (saved at its
        exit), or None where it did not say."""
        return self._numbers(("children_cpu_s",), rank)[0]

    def first_mark(self, rank: int | None = None) -> float | None:
        """When the step times began (the start of the first timed step,
        ``first_timed_step``) on the wall clock, in epoch seconds, or None where the workload
        marked no step."""
        return self._numbers(("first_mark_epoch_s",), rank)[0]

    def first_timed_step(self, rank: int | None = None) -> int:
        """The number of the step whose duration comes first in ``step_times``: 1 where the
        times began at the script's start (``--steps``), 2 where they began at the first
        step's mark (its end). Where an older folder did not say: 1 when there is a duration
        for every step the workload marked, else 2."""
        data = _read_json(self.rank(rank).path / STEPS_FILE)
        said = data.get("first_timed_step") if isinstance(data, dict) else None
        if isinstance(said, int) and not isinstance(said, bool) and said in (1, 2):
            return said
        count, times = self.rank(rank)._steps()
        return 1 if count is not None and len(times) >= count else 2

    def script_end(self, rank: int | None = None) -> float | None:
        """When the workload's script returned (or raised) on the wall clock, in epoch
        seconds: what the process did after it is teardown. None where not saved."""
        return self._numbers(("script_end_epoch_s",), rank)[0]

    def children_busy_in_steps(self, rank: int | None = None) -> float | None:
        """The CPUs the workload's child processes kept busy on average from its first step
        to the end of its script (beside its steps, as DataLoader workers work; a compiler
        run before the first step, or workers' start-up, not), or None where it marked no
        step."""
        total, first, window = self._numbers(
            ("children_cpu_s", "children_cpu_at_first_step_s", "first_step_to_end_s"), rank)
        if total is None or first is None or not window:
            return None
        return max(0.0, total - first) / window

    def _numbers(self, names: tuple[str, ...], rank: int | None) -> list[float | None]:
        """Non-negative numbers the bootstrap saved at exit, one read of its file; None for
        each one missing or malformed."""
        data = _read_json(self.rank(rank).path / STEPS_FILE)
        out: list[float | None] = []
        for name in names:
            value = data.get(name) if isinstance(data, dict) else None
            if isinstance(value, (int, float)) and not isinstance(value, bool) and value >= 0:
                out.append(float(value))
            else:
                out.append(None)
        return out

    def _steps(self, device: bool = True) -> tuple[int | None, list[float]]:
        data = _read_json(self.path / STEPS_FILE)
        try:
            steps: int | None = int(data["steps"])
        except (KeyError, TypeError, ValueError):
            steps = None
        try:
            times = [float(t) for t in data["step_times_s"] if isinstance(t, (int, float))]
        except (KeyError, TypeError, ValueError):
            times = []
        marks = data.get("device_mark_epoch_s") if isinstance(data, dict) and device else None
        if isinstance(marks, list) and len(marks) == len(times) + 1:
            for i, (a, b) in enumerate(itertools.pairwise(marks)):
                if _number(a) and _number(b) and b >= a:
                    times[i] = float(b) - float(a)  # the step as the device ran it
        return steps, times

    def window(self, rank: int | None = None) -> int | None:
        """The pid that opened the measured window of ``--steps`` (at the end of its warm-up
        steps), once it has, else None."""
        try:
            return int(_read_json(self.file(WINDOW_FILE, rank))["pid"])
        except (KeyError, TypeError, ValueError):
            return None

    def window_opened(self, rank: int | None = None) -> float | None:
        """When the measured window of ``--steps`` opened (the end of the warm-up steps), on
        the wall clock in epoch seconds, or None."""
        try:
            return int(_read_json(self.file(WINDOW_FILE, rank))["ns"]) / 1e9
        except (KeyError, TypeError, ValueError):
            return None

    def steps_window(self, warmup: int | None = None,
                     measured: int | None = None) -> tuple[float, float, int] | None:
        """The steps on the wall clock: (start, end, how many) in epoch seconds; under
        ``--steps`` (``warmup``, ``measured``) the measured ones, else every step between
        the first mark and the last. None where the workload marked none."""
        first, times = self.first_mark(), self.step_times()
        if first is None or not times:
            return None
        if warmup is None or measured is None:
            return first, first + sum(times), len(times)
        # under --steps the first mark is the script's start: step 1 runs from it
        chosen = times[warmup:warmup + measured]
        if not chosen:
            return None
        start = first + sum(times[:warmup])
        return start, start + sum(chosen), len(chosen)

    def window_go(self, rank: int | None = None) -> None:
        """Tell a workload waiting at the start of its measured window to go on."""
        with contextlib.suppress(OSError):
            self.file(WINDOW_GO_FILE, rank).touch()

    def probe(self) -> dict[str, dict[str, float]] | None:
        """The machine-speed probe the bootstrap timed in the workload, or None."""
        data = _read_json(self.file(PROBE_FILE))
        out: dict[str, dict[str, float]] = {}
        fields = {"start": ("python_s", "native_s"), "end": ("python_s", "native_s"),
                  "sched": ("cpu_s", "wait_s")}
        for part, names in fields.items():
            values = data.get(part) if isinstance(data, dict) else None
            if isinstance(values, dict) and all(
                    isinstance(values.get(k), (int, float)) and math.isfinite(values[k])
                    and values[k] >= 0 for k in names):
                out[part] = {k: float(values[k]) for k in names}
        return out if "start" in out or "end" in out else None

    def printed_throughput(self) -> dict[str, Any] | None:
        """The last 'throughput: 38.75 samples/s' line the workload printed, as an entry like
        report_metric's (better higher), or None. Benchmarks print their figure far more
        often than they call perfstack: the figure is theirs either way."""
        path = self.path / STDOUT_FILE  # the whole run's (every rank's) output
        try:
            with open(path, "rb") as fh:  # its end: a long log's figure comes last
                fh.seek(max(0, path.stat().st_size - 65536))
                text = fh.read().decode("utf-8", errors="replace")
        except OSError:
            return None
        found = None
        for match in PRINTED_THROUGHPUT.finditer(text):
            found = match
        if found is None:
            return None
        try:
            value = float(found.group(1).replace(",", ""))
        except ValueError:
            return None
        if not math.isfinite(value) or value <= 0:
            return None
        return {"name": "throughput", "value": value, "unit": (found.group(2) or "").strip(),
                "better": "higher", "printed": found.group(0).strip()}

    def workload_metrics(self) -> list[dict[str, Any]]:
        """The well-formed entries the workload wrote with perfstack.report_metric."""
        path = self.file(METRICS_FILE)
        if not path.is_file():
            return []
        entries = []
        for line in path.read_text("utf-8", errors="replace").splitlines():
            try:
                entry = json.loads(line)
                if (isinstance(entry["name"], str) and entry["name"]
                        and math.isfinite(entry["value"])):
                    entries.append({"name": entry["name"], "value": float(entry["value"]),
                                    "unit": str(entry.get("unit", "")),
                                    "better": str(entry.get("better", "higher"))})
            except (ValueError, KeyError, TypeError):
                continue  # a torn or foreign line: skip it, keep the rest
        return entries

    def workload_env(self) -> dict[str, Any] | None:
        """What the workload process saw (the torch it imported, its threads), or None."""
        data = _read_json(self.file(WORKLOAD_ENV_FILE))
        return data if isinstance(data, dict) else None

    def hook_errors(self, ranks: list[int]) -> list[Path]:
        """The in-process hooks' error logs here and in the given ranks' folders."""
        places = [self.path, *(self.rank(r).path for r in ranks)]
        return [p / HOOK_ERRORS_FILE for p in places if (p / HOOK_ERRORS_FILE).is_file()]


#: A line a benchmark prints its figure on: 'throughput: 1,234.5 samples/s'.
PRINTED_THROUGHPUT = re.compile(
    r"(?im)^[ \t]*throughput[ \t]*[:=][ \t]*([0-9][0-9,]*(?:\.[0-9]+)?(?:[eE][-+]?[0-9]+)?)"
    r"[ \t]*([A-Za-z%][\w/%.-]*(?:[ \t]*/[ \t]*[A-Za-z]+)?)?[ \t]*$")


def _number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _read_json(path: Path) -> Any:
    """A JSON file's content, or None when it is missing, unreadable or torn."""
    try:
        return json.loads(path.read_text("utf-8"))
    except (OSError, ValueError):
        return None


def run_subfolder(run_dir: Path, name: str) -> Path:
    """Create (if needed) and return one run's or backend's folder inside the run folder; the
    run folder removed or replaced by a file while the session goes on is an OutputError."""
    folder = run_dir / name
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise OutputError(f"{run_dir}: the run folder was removed or replaced while the run "
                          f"went on ({exc.strerror}); nothing more can be written there") \
            from None
    return folder


def new_run_dir(base: Path) -> Path:
    """Create and return a fresh, timestamped run folder under ``base``."""
    stamp = time.strftime("%Y%m%d-%H%M%S")
    try:
        base.mkdir(parents=True, exist_ok=True)
        for n in range(1000):
            candidate = base / (stamp if n == 0 else f"{stamp}-{n}")
            try:
                candidate.mkdir()
            except FileExistsError:
                continue
            return candidate
    except OSError as exc:
        raise OutputError(f"{base}: cannot create a run folder ({exc.strerror})") from None
    raise OutputError(f"{base}: too many run folders named {stamp}")


def use_out_dir(path: Path) -> Path:
    """Return ``path`` as the run folder; it must be new or empty, so nothing is overwritten
    (taken atomically: two sessions given one --out-dir cannot both write there)."""
    from perfstack.runfolder.claim import claim_empty_folder

    return claim_empty_folder(path, f"{path}: exists and is not an empty folder (or another "
                                    "session writes there); choose a new --out-dir")


def check_writable(report_path: Path) -> None:
    """Raise OutputError now, before a long run, if the report could not be written later."""
    folder = report_path.parent if str(report_path.parent) else Path(".")
    existing = folder
    while not existing.exists() and existing != existing.parent:
        existing = existing.parent
    if not existing.is_dir() or not os.access(existing, os.W_OK | os.X_OK):
        raise OutputError(f"{report_path}: cannot write a report there")
    if report_path.is_dir():
        raise OutputError(f"{report_path}: is a folder; -o takes a file name")


def point_latest(run_dir: Path) -> None:
    """Make ``<base>/latest`` point at ``run_dir`` (replaced atomically)."""
    link = run_dir.parent / LATEST
    tmp = run_dir.parent / f".{LATEST}.{os.getpid()}"
    with contextlib.suppress(FileNotFoundError):
        tmp.unlink()
    try:
        tmp.symlink_to(run_dir.name, target_is_directory=True)
        os.replace(tmp, link)
    except OSError:
        # No symlinks here (some filesystems): fall back to a file naming the folder.
        with contextlib.suppress(FileNotFoundError):
            tmp.unlink()
        (run_dir.parent / f"{LATEST}.txt").write_text(run_dir.name + "\n", "utf-8")


def latest_run(base: Path) -> Path | None:
    """Return the folder ``latest`` points at under ``base``, or None when there is none."""
    link = base / LATEST
    if link.is_dir():
        return link
    pointer = base / f"{LATEST}.txt"
    if pointer.is_file():
        folder = base / pointer.read_text("utf-8").strip()
        return folder if folder.is_dir() else None
    return None
