"""The run folder: where a run's files go, what they are called, and how they are read back.

``.perfstack/runs/<timestamp>/`` (and the ``latest`` pointer) holds ``report.json`` (unless
``-o`` puts the report elsewhere) and one sub-folder per run: ``warmup-1/``, ``baseline-1/``...,
and one per backend, each with the workload's ``stdout.log``/``stderr.log``,
``faulthandler.log``, what the bootstrap wrote (``workload.json``: its pid and start;
``workload-steps.json``; ``probe.json``; ``workload-metrics.jsonl``) and the backend's raw
output; under torchrun one ``rank-N/`` folder per rank. This module is the one place that
knows those names on the driver's side and reads them back; the bootstrap, which runs inside
the workload, writes them (``perfstack.run.bootstrap``).
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import time
from pathlib import Path
from typing import Any

from perfstack.errors import OutputError

LATEST = "latest"
REPORT_FILE = "report.json"
BOOTSTRAP_CONFIG_FILE = "bootstrap.json"


def rank_dir(folder: Path, rank: int) -> Path:
    """Return the folder of one rank's workload process inside a run folder."""
    return folder / f"rank-{rank}"


def ranks_in(folder: Path) -> list[int]:
    """Return the ranks whose processes have a folder in a run folder, in order. Under torchrun
    these are global ranks: on the second node of a job, 2 and 3 rather than 0 and 1."""
    try:
        names = [p.name for p in folder.iterdir() if p.is_dir()]
    except OSError:
        return []
    return sorted(int(n[5:]) for n in names if n.startswith("rank-") and n[5:].isdigit())


def primary_dir(folder: Path) -> Path:
    """Return where the workload's own files are: the lowest rank's folder under torchrun
    (rank 0's on the job's first node), else the run folder."""
    ranks = ranks_in(folder)
    return rank_dir(folder, ranks[0]) if ranks else folder


def read_started(folder: Path) -> tuple[int, int] | None:
    """Return (pid, start_ns) from the bootstrap's start file, once it exists."""
    from perfstack.run.bootstrap import STARTED_FILE

    try:
        data = json.loads((folder / STARTED_FILE).read_text("utf-8"))
        return int(data["pid"]), int(data["start_ns"])
    except (OSError, ValueError, KeyError, TypeError):
        return None


def read_steps(folder: Path) -> int | None:
    """Return how many steps the workload marked (saved by the bootstrap at exit), or None."""
    from perfstack.run.bootstrap import STEPS_FILE

    try:
        data = json.loads((folder / STEPS_FILE).read_text("utf-8"))
        return int(data["steps"])
    except (OSError, ValueError, KeyError, TypeError):
        return None


def read_step_times(folder: Path) -> list[float]:
    """Return each step's duration in seconds (saved by the bootstrap at exit), or []."""
    from perfstack.run.bootstrap import STEPS_FILE

    try:
        data = json.loads((folder / STEPS_FILE).read_text("utf-8"))
        return [float(t) for t in data["step_times_s"] if isinstance(t, (int, float))]
    except (OSError, ValueError, KeyError, TypeError):
        return []


def read_window(folder: Path) -> int | None:
    """Return the pid that opened the measured window of ``--steps`` (at the end of its
    warm-up steps), once it has, else None."""
    from perfstack.run.bootstrap import WINDOW_FILE

    try:
        return int(json.loads((folder / WINDOW_FILE).read_text("utf-8"))["pid"])
    except (OSError, ValueError, KeyError, TypeError):
        return None


def window_go(folder: Path) -> None:
    """Tell a workload waiting at the start of its measured window to go on."""
    from perfstack.run.bootstrap import WINDOW_GO_FILE

    with contextlib.suppress(OSError):
        (folder / WINDOW_GO_FILE).touch()


def read_probe(folder: Path) -> dict[str, dict[str, float]] | None:
    """Return the machine-speed probe the bootstrap timed in this run, or None."""
    from perfstack.machine.probe import PROBE_FILE

    try:
        data = json.loads((folder / PROBE_FILE).read_text("utf-8"))
    except (OSError, ValueError):
        return None
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


def read_workload_metrics(folder: Path) -> list[dict[str, Any]]:
    """Return the well-formed entries the workload wrote with perfstack.report_metric."""
    from perfstack import METRICS_FILE

    path = folder / METRICS_FILE
    if not path.is_file():
        return []
    entries = []
    for line in path.read_text("utf-8", errors="replace").splitlines():
        try:
            entry = json.loads(line)
            if isinstance(entry["name"], str) and entry["name"] and math.isfinite(entry["value"]):
                entries.append({"name": entry["name"], "value": float(entry["value"]),
                                "unit": str(entry.get("unit", "")),
                                "better": str(entry.get("better", "higher"))})
        except (ValueError, KeyError, TypeError):
            continue  # a torn or foreign line: skip it, keep the rest
    return entries




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
    """Return ``path`` as the run folder; it must be new or empty, so nothing is overwritten."""
    if path.exists() and (not path.is_dir() or any(path.iterdir())):
        raise OutputError(f"{path}: exists and is not an empty folder; choose a new --out-dir")
    try:
        path.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise OutputError(f"{path}: cannot create ({exc.strerror})") from None
    return path


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
