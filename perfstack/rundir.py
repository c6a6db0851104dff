"""Where a run's files go: ``.perfstack/runs/<timestamp>/`` and the ``latest`` pointer.

A run folder holds ``report.json`` (unless ``-o`` puts the report elsewhere) and one
sub-folder per run: ``warmup-1/``, ``baseline-1/``..., and one per backend, each with the
workload's ``stdout.log``/``stderr.log``, ``faulthandler.log`` and the backend's raw output.
"""

from __future__ import annotations

import contextlib
import os
import time
from pathlib import Path

from perfstack.errors import OutputError

LATEST = "latest"


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
