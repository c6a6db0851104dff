"""``perfstack capture``: N steps of a job ``perfstack run --on-demand`` started, recorded
while it runs on, as often as asked.

The job's rider (perfstack.inprocess.ondemand) waits for a request in its run folder; this
side writes one, waits for the step it begins at (``ready.json``), attaches the backends that
sample from outside (``Backend.live``: py-spy) and lets the capture go, then waits for the
N steps (``done.json``), stops its samplers, and makes one report of what each side
recorded: the samplers' records, and the files the armed backends wrote inside the job
(read by the backends that recognize them, as ``perfstack analyze`` reads them).
"""

from __future__ import annotations

import contextlib
import json
import os
import time
from datetime import datetime, timezone
from functools import partial
from pathlib import Path
from typing import Any

from perfstack import errors
from perfstack.backend import Collected, availability
from perfstack.calls import call
from perfstack.pluginmanager import BackendEntry, Plugins
from perfstack.report import BackendResult, Report, Status
from perfstack.run import assembly, ptrace
from perfstack.run.attached import Live, run_info
from perfstack.run.filenames import CAPTURE_REQUEST_FILE as REQUEST_FILE
from perfstack.run.filenames import CAPTURES_DIR as CAPTURES
from perfstack.run.filenames import ONDEMAND_FILE as ARMED_FILE

#: The module every run's workload is started through.
BOOTSTRAP = "perfstack.inprocess.bootstrap"
#: How often the waits look at the job's folder.
POLL_S = 0.05


def find_armed(target: str, runs: Path) -> tuple[Path, int]:
    """The armed folder and the job's pid, from a run folder (or the folder above the armed
    one) or from the job's pid (among the run folders under ``runs``, here or in the job's
    working folder); InputNotFound where no armed job is there, or it has ended."""
    if target.isdigit():
        pid = int(target)
        places = [runs]  # here, and where the job runs (where its run was started)
        with contextlib.suppress(OSError):
            places.append(Path(os.readlink(f"/proc/{pid}/cwd")) / runs)
        found = [p.parent for place in places for p in place.glob(f"*/*/{ARMED_FILE}")
                 if _pid(p) == pid]
        where = f"no job armed by 'perfstack run --on-demand' under {runs} has pid {pid}"
    else:
        folder = Path(target)
        if not folder.is_dir():
            raise errors.InputNotFound(f"{target}: no such folder (give the run folder "
                                       "'perfstack run --on-demand' printed, or its pid)")
        found = [p.parent for p in (folder / ARMED_FILE, *folder.glob(f"*/{ARMED_FILE}"))
                 if p.is_file()]
        where = f"{target}: no job armed by 'perfstack run --on-demand' in this folder"
    if not found:
        raise errors.InputNotFound(where)
    folder = max(found, key=lambda p: (p / ARMED_FILE).stat().st_mtime)
    armed = _pid(folder / ARMED_FILE)
    if armed is None or not ptrace.alive(armed):
        raise errors.InputNotFound(f"{folder}: its job (pid {armed}) has ended")
    return folder, armed


def _pid(path: Path) -> int | None:
    try:
        pid = json.loads(path.read_text("utf-8"))["pid"]
    except (OSError, ValueError, KeyError, TypeError):
        return None
    return pid if isinstance(pid, int) else None


def workload_command(argv: list[str]) -> list[str] | None:
    """The job's own command, from its process's: what follows perfstack's bootstrap."""
    for i, arg in enumerate(argv[:-1]):
        if arg == "-m" and argv[i + 1] == BOOTSTRAP:
            return ["python", *argv[i + 2:]]
    return None


def next_id(folder: Path) -> int:
    """The next capture's number: one more than the last made or asked for."""
    made = [int(p.name) for p in (folder / CAPTURES).glob("*") if p.name.isdigit()]
    return max(made, default=0) + 1


def _wait_for(path: Path, pid: int, timeout_s: float, what: str,
              poll_s: float = POLL_S) -> dict[str, Any]:
    """The JSON file at ``path`` once the job wrote it; InputNotFound if the job ends
    first, UsageError at ``timeout_s`` (with ``what`` it was waiting for)."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            data: dict[str, Any] = json.loads(path.read_text("utf-8"))
            return data
        except (OSError, ValueError):
            pass
        if not ptrace.alive(pid):
            raise errors.InputNotFound(f"the job (pid {pid}) ended before {what}")
        time.sleep(poll_s)
    raise errors.UsageError(f"no {what} within {timeout_s:g} s (--timeout)")


def _recorded(backends: dict[str, BackendEntry], done: dict[str, Any],
              where: Path) -> tuple[list[BackendResult], list[Collected]]:
    """What the armed backends wrote inside the job, read by the backend that wrote it."""
    results, collected = [], []
    failed = done.get("failed") or {}
    for name in done.get("backends", []):
        entry = backends.get(name)
        if entry is None or name in failed:  # (said below, once)
            continue
        files = sorted(p for p in (where / name).rglob("*")
                       if p.is_file() and entry.backend.recognizes(p))
        read = call(partial(entry.backend.analyze, files), "analyze")
        if not files or not read.ok or not read.value:
            why = read.said() if not read.ok else "it wrote nothing the backend reads"
            results.append(assembly.result_of(entry, Status.FAILED, reason=why,
                                              traceback=read.error))
            continue
        one = read.value[0].collected
        results.append(assembly.result_of(entry, Status.OK, notes=one.notes,
                                          artifacts={k: str(v) for k, v in
                                                     one.artifacts.items()}))
        collected.append(one)
    for name, why in failed.items():
        if name in backends:
            results.append(assembly.result_of(backends[name], Status.FAILED, reason=why))
    return results, collected


def capture(plugins: Plugins, folder: Path, pid: int, steps: int,
            live: list[BackendEntry], options: dict[str, dict[str, Any]],
            timeout_s: float) -> tuple[Report, Path]:
    """Record the job's next ``steps`` steps; return the report and the capture's folder."""
    target = ptrace.target(pid)
    ptrace.check(target)
    ident = next_id(folder)
    where = folder / CAPTURES / str(ident)
    request = folder / REQUEST_FILE
    tmp = request.with_name(f"{request.name}.{ident}.tmp")
    tmp.write_text(json.dumps({"id": ident, "steps": steps}), "utf-8")
    tmp.replace(request)
    _wait_for(where / "ready.json", pid, timeout_s,
              "step of the job began the capture (captures begin and end at steps: "
              "perfstack.step() or an optimizer step)")
    samplers = [e for e in live if availability(e.backend).ok]
    sampling = Live(target, samplers, options, where) if samplers else None
    try:
        if sampling is not None:
            sampling.wait_ready()
        (where / "go").write_text("", "utf-8")
        started = datetime.now(timezone.utc)
        _wait_for(where / "ended.json", pid, timeout_s + 60 * steps,
                  f"end of the capture's {steps} steps", poll_s=0.002)
        sampled_s = (datetime.now(timezone.utc) - started).total_seconds()
    finally:
        if sampling is not None:
            sampling.stop()
        (where / "stopped").write_text("", "utf-8")  # the job's recorders write now
    done = _wait_for(where / "done.json", pid, 600.0, "the capture's files (written at the "
                     "job's next step)")
    results, collected = (sampling.collect(started, sampled_s, None) if sampling is not None
                          else ([], []))
    more_results, more = _recorded(plugins.backends()[0], done, where)
    environment = plugins.environment()
    environment["capture"] = {"id": ident, "run": str(folder), **{
        k: done[k] for k in ("steps", "asked", "first_step", "step_times_s", "cut")
        if done.get(k) is not None}}
    run = run_info(target, started, sampled_s, "running", True)
    run.command = workload_command(target.argv) or run.command
    report = assembly.build_report(run, environment, results + more_results,
                                   [*collected, *more], plugins.findings)
    return report, where
