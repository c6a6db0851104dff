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
from perfstack.analysis.job.distributed import rank_figures
from perfstack.machine import ptrace
from perfstack.machine.envinfo import with_plugins
from perfstack.plugin.backend import Collected, availability
from perfstack.plugin.calls import call
from perfstack.plugin.manager import BackendEntry, Plugins
from perfstack.records import datarecord
from perfstack.report import BackendResult, Finding, Metric, Report, Status
from perfstack.run import assembly
from perfstack.run.attached import Live, run_info
from perfstack.runfolder.filenames import CAPTURE_REQUEST_FILE as REQUEST_FILE
from perfstack.runfolder.filenames import CAPTURES_DIR as CAPTURES
from perfstack.runfolder.filenames import ONDEMAND_FILE as ARMED_FILE
from perfstack.runfolder.filenames import RANK_PREFIX
from perfstack.runfolder.ranks import among

#: The module every run's workload is started through.
BOOTSTRAP = "perfstack.inprocess.bootstrap"
#: How often the waits look at the job's folder.
POLL_S = 0.05


@datarecord(frozen=True)
class Armed:
    """One armed process of the job: its folder, its pid, its rank under torchrun."""

    folder: Path
    pid: int
    rank: int | None


def _rank(folder: Path) -> int | None:
    name = folder.name
    return int(name[len(RANK_PREFIX):]) if name.startswith(RANK_PREFIX) and \
        name[len(RANK_PREFIX):].isdigit() else None


def find_armed(target: str, runs: Path, ranks_spec: str = "all") -> list[Armed]:
    """The job's armed processes, from a run folder (or a folder above them: a torchrun
    job's every rank, or those ``ranks_spec`` names) or from one process's pid (among the run
    folders under ``runs``, here or in its working folder); InputNotFound where no armed job
    is there, or it has ended."""
    if target.isdigit():
        pid = int(target)
        places = [runs]  # here, and where the job runs (where its run was started)
        with contextlib.suppress(OSError):
            places.append(Path(os.readlink(f"/proc/{pid}/cwd")) / runs)
        found = [p.parent for place in places
                 for pattern in (f"*/*/{ARMED_FILE}", f"*/*/{RANK_PREFIX}*/{ARMED_FILE}")
                 for p in place.glob(pattern) if _pid(p) == pid][:1]
        where = f"no job armed by 'perfstack run --on-demand' under {runs} has pid {pid}"
    else:
        folder = Path(target)
        if not folder.is_dir():
            raise errors.InputNotFound(f"{target}: no such folder (give the run folder "
                                       "'perfstack run --on-demand' printed, or its pid)")
        found = [p.parent for p in (folder / ARMED_FILE, *folder.glob(f"*/{ARMED_FILE}"),
                                    *folder.glob(f"*/{RANK_PREFIX}*/{ARMED_FILE}"),
                                    *folder.glob(f"{RANK_PREFIX}*/{ARMED_FILE}"))
                 if p.is_file()]
        where = f"{target}: no job armed by 'perfstack run --on-demand' in this folder"
        ranked = [f for f in found if _rank(f) is not None]
        if ranked:  # a torchrun job: its ranks, as --ranks names them
            present = sorted(r for f in ranked if (r := _rank(f)) is not None)
            chosen = set(among(ranks_spec, present))
            found = [f for f in ranked if _rank(f) in chosen]
            where = f"{target}: no rank named by --ranks {ranks_spec} is armed here"
        elif found:  # one process: the newest armed
            found = [max(found, key=lambda p: (p / ARMED_FILE).stat().st_mtime)]
    if not found:
        raise errors.InputNotFound(where)
    out = []
    for folder in sorted(found, key=lambda f: _rank(f) or 0):
        armed = _pid(folder / ARMED_FILE)
        if armed is None or not ptrace.alive(armed):
            raise errors.InputNotFound(f"{folder}: its job (pid {armed}) has ended")
        out.append(Armed(folder.resolve(), armed, _rank(folder)))
    return out


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
              where: Path) -> list[tuple[BackendResult, Collected | None]]:
    """What the armed backends wrote inside the job, read by the backend that wrote it."""
    out: list[tuple[BackendResult, Collected | None]] = []
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
            out.append((assembly.result_of(entry, Status.FAILED, reason=why,
                                           traceback=read.error), None))
            continue
        one = read.value[0].collected
        out.append((assembly.result_of(entry, Status.OK, notes=one.notes, artifacts={
            k: os.path.abspath(v) for k, v in one.artifacts.items()}), one))
    out += [(assembly.result_of(backends[name], Status.FAILED, reason=why), None)
            for name, why in failed.items() if name in backends]
    return out


def _request(armed: Armed, ident: int, steps: int) -> Path:
    """Ask ``armed``'s rider for capture ``ident``; return the capture's folder."""
    request = armed.folder / REQUEST_FILE
    tmp = request.with_name(f"{request.name}.{ident}.tmp")
    tmp.write_text(json.dumps({"id": ident, "steps": steps}), "utf-8")
    tmp.replace(request)
    return armed.folder / CAPTURES / str(ident)


def _merged(parts: list[tuple[int | None, list[tuple[BackendResult, Collected | None]]]]
            ) -> tuple[list[BackendResult], list[Collected]]:
    """One process's results as they are; a job's ranks' merged a backend at a time, each
    rank's rows and figures named with its rank (as a torchrun run's are)."""
    if len(parts) == 1:
        pairs = parts[0][1]
        return [r for r, _ in pairs], [c for _, c in pairs if c is not None]
    results: dict[str, BackendResult] = {}
    by_backend: dict[str, Collected] = {}
    for rank, pairs in parts:
        for result, one in pairs:
            kept = results.setdefault(result.name, result)
            if result.status is not Status.OK:  # a rank that failed says so for all
                kept.status, kept.reason = result.status, f"rank {rank}: {result.reason}"
            if one is not None:
                assembly.merge_rank(by_backend.setdefault(result.name, Collected()), one,
                                    rank or 0, prefix=True)
    return list(results.values()), list(by_backend.values())


def capture(plugins: Plugins, armed: list[Armed], steps: int, live: list[BackendEntry],
            options: dict[str, dict[str, Any]], timeout_s: float,
            written_to: Path | None = None) -> tuple[Report, Path]:
    """Record the next ``steps`` steps of each armed process (a job's ranks together);
    return the report and the capture's folder (its report's default place; ``written_to``:
    the folder the report goes to instead, which its files are named from)."""
    targets = [ptrace.target(a.pid) for a in armed]
    for target in targets:
        ptrace.check(target)
    ident = max(next_id(a.folder) for a in armed)
    wheres = [_request(a, ident, steps) for a in armed]
    for a, where in zip(armed, wheres, strict=True):
        _wait_for(where / "ready.json", a.pid, timeout_s,
                  "step of the job began the capture (captures begin and end at steps: "
                  "perfstack.step() or an optimizer step)")
    samplers = [e for e in live if availability(e.backend).ok]
    report_dir = (armed[0].folder.parent / CAPTURES / str(ident) if armed[0].rank is not None
                  else wheres[0])  # a job's: beside its ranks'
    sampling = [Live(t, samplers, options, w) if samplers else None
                for t, w in zip(targets, wheres, strict=True)]
    for one in sampling:
        if one is not None:
            one.report_dir = written_to or report_dir
    try:
        for one in sampling:
            if one is not None:
                one.wait_ready()
        for where in wheres:
            (where / "go").write_text("", "utf-8")
        started = datetime.now(timezone.utc)
        for a, where in zip(armed, wheres, strict=True):
            _wait_for(where / "ended.json", a.pid, timeout_s + 60 * steps,
                      f"end of the capture's {steps} steps", poll_s=0.002)
        sampled_s = (datetime.now(timezone.utc) - started).total_seconds()
    finally:
        for one in sampling:
            if one is not None:
                one.stop()
        for where in wheres:
            (where / "stopped").write_text("", "utf-8")  # the job's recorders write now
    backends = plugins.backends()[0]
    parts, dones = [], []
    for a, where, one in zip(armed, wheres, sampling, strict=True):
        done = _wait_for(where / "done.json", a.pid, 600.0, "the capture's files (written "
                         "at the job's next step)")
        pairs = one.collect(started, sampled_s, None) if one is not None else []
        parts.append((a.rank, pairs + _recorded(backends, done, where)))
        dones.append(done)
    results, collected = _merged(parts)
    environment = with_plugins(plugins)
    run_folder = armed[0].folder.parent if armed[0].rank is not None else armed[0].folder
    environment["capture"] = {"id": ident, "run": str(run_folder), **{
        k: dones[0][k] for k in ("steps", "asked", "first_step", "step_times_s", "cut")
        if dones[0].get(k) is not None},
        **({"ranks": [a.rank for a in armed]} if armed[0].rank is not None else {})}
    run = run_info(targets[0], started, sampled_s, "running", True)
    run.command = workload_command(targets[0].argv) or run.command
    across = None
    if armed[0].rank is not None:  # a job's ranks: each rank's step times, the stragglers
        samples = {a.rank or 0: [float(t) for t in d.get("step_times_s") or []]
                   for a, d in zip(armed, dones, strict=True)}

        def across(report: Report) -> tuple[list[Metric], list[Finding]]:
            return rank_figures(report, samples, publish_steps=True,
                                steps_from="the capture's steps")

    report = assembly.build_report(run, environment, results, collected, plugins.findings,
                                   across_ranks=across)
    report_dir.mkdir(parents=True, exist_ok=True)
    return report, report_dir
