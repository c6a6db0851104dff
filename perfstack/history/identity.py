"""What a run is in the history: where the history lives, the workload's identity, the machine's
fingerprint, the repository's commit, and whether other programs disturbed the run."""

from __future__ import annotations

import hashlib
import json
import os
import statistics
import subprocess
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from perfstack.history.location import is_url
from perfstack.machine import cpus
from perfstack.report import Report

FILE_NAME = "history.sqlite"
#: Set to "off" (or "0") to write no history; or to a database path.
HISTORY_ENV = "PERFSTACK_HISTORY"

#: A history's location: an SQLite file, or a PostgreSQL URL (``postgresql://...``).
Location = str | Path


def default_path(runs_dir: Path) -> Location | None:
    """Return the history database for reports under ``runs_dir`` (``.perfstack/runs``): the
    PERFSTACK_HISTORY variable's path or PostgreSQL URL when set, None when it is "off"."""
    chosen = os.environ.get(HISTORY_ENV, "").strip()
    if chosen.lower() in ("off", "0", "no", "false"):
        return None
    if chosen:
        return chosen if is_url(chosen) else Path(chosen)
    return runs_dir.parent / FILE_NAME


def repository_of(folder: Path, script: Path | None = None) -> dict[str, Any] | None:
    """Return the git commit, branch and dirty state of the repository holding ``folder``,
    or None outside a repository (or without git). With the workload's ``script``: whether
    git tracks it (``script_tracked``); an untracked or modified script makes the run dirty,
    since the commit does not hold the code that ran."""
    def git(*args: str) -> str | None:
        try:
            proc = subprocess.run(["git", "-C", str(folder), *args], capture_output=True,
                                  text=True, timeout=10)
        except (OSError, subprocess.SubprocessError):
            return None
        return proc.stdout.strip() if proc.returncode == 0 else None

    commit = git("rev-parse", "HEAD")
    if not commit:
        return None
    branch = git("rev-parse", "--abbrev-ref", "HEAD")
    status = git("status", "--porcelain", "--untracked-files=no")
    out: dict[str, Any] = {"commit": commit,
                           "branch": None if branch in (None, "HEAD") else branch,
                           "dirty": None if status is None else bool(status)}
    if script is not None:
        tracked = git("ls-files", "--error-unmatch", "--", str(script)) is not None
        out["script_tracked"] = tracked
        if not tracked:
            out["dirty"] = True
    return out


def machine_facts(report: Report) -> dict[str, Any]:
    """Return what identifies the machine a report ran on: runs on other machines are never
    compared in a series. The machine only: the torch a workload imported is the workload's
    (a torch and a plain-Python workload on one machine once had two machine ids), and a
    change of it is a change of the series', as a commit's is."""
    env = report.environment
    cpu, python = (env.get(k) or {} for k in ("cpu", "python"))
    return {"cpu_model": cpu.get("model"), "isa": sorted(cpu.get("isa") or []),
            "usable_cpus": cpus.usable_cpus(env), "python": python.get("version")}


def fingerprint(facts: dict[str, Any]) -> str:
    """Return a short stable name for ``machine_facts``."""
    return hashlib.sha256(json.dumps(facts, sort_keys=True).encode()).hexdigest()[:12]


def workload_key(command: Sequence[str]) -> str:
    """Return a short stable name for a workload's command."""
    return hashlib.sha256(json.dumps(list(command)).encode()).hexdigest()[:12]


def configuration(report: Report) -> list[str]:
    """How a run measured its workload, beyond its command: ``--steps`` (runs ended after K+N
    steps measure other things than whole runs) and the backends' options set to other than
    their defaults (``--torch-stack``): words of a command line, in a stable order; [] for a
    plain run."""
    out = []
    if report.run.steps:
        out += [f"--steps {report.run.steps.get('measured')}",
                f"--warmup-steps {report.run.steps.get('warmup')}"]
    for b in sorted(report.backends, key=lambda b: b.name):
        for name, value in sorted(b.options.items()):
            flag = f"--{b.name}-{name.replace('_', '-')}"
            out.append(flag if value is True else f"{flag} {value}")
    return out


def workload_of(report: Report) -> tuple[list[str], str]:
    """Return what a report's series are keyed by: the workload's command (the script or
    module and its arguments) and its short key, which also holds how it was measured
    (``configuration``: a full run and a --steps 3 run of one script are two series). A
    report of traces (``perfstack analyze``) is its traces, resolved, and the GPUs that
    recorded them: two unrelated analyses are two series, one folder analyzed again is one."""
    command = list(report.run.command)
    if command or not report.run.analyzed:
        config = configuration(report)
        if not config:
            return command, workload_key(command)
        shown = [*command, f"(measured with {' '.join(config)})"]
        return shown, workload_key([*command, "perfstack:", *config])
    folders: dict[str, str] = {}
    paths = sorted({_real(a.get("path", ""), folders) for a in report.run.analyzed})
    recorded = report.environment.get("recorded")
    names = sorted({str(d) for rank in (recorded or {}).values() if isinstance(rank, dict)
                    for d in rank.get("devices") or []}) if isinstance(recorded, dict) else []
    shown = ["perfstack", "analyze", *paths]
    return shown, workload_key([*shown, *names])


def _real(path: str, folders: dict[str, str]) -> str:
    """``os.path.realpath(path)``, each folder resolved once (in ``folders``), not once a
    rank of a job; a file that is a link itself resolved whole."""
    head, name = os.path.split(path)
    if not name or name in (".", "..") or os.path.islink(path):
        return os.path.realpath(path)
    if head not in folders:
        folders[head] = os.path.realpath(head or ".")
    return os.path.join(folders[head], name)


def disturbed(report: Report) -> str | None:
    """Return why a report's figures were disturbed by other programs, or None: when half or
    more of its clean baseline runs (the figures are their medians) were disturbed
    (``perfstack.machine.load``), the median run's reason."""
    from perfstack.machine import load as machineload

    clean = [r for r in report.run.runs if r.role == "baseline" and r.exit.clean]
    measured = [r for r in clean if r.machine_load]
    if not measured:
        return None
    hit = [r for r in measured if machineload.disturbed(r.machine_load)]
    if 2 * len(hit) < len(measured):
        return None
    hit.sort(key=lambda r: float((r.machine_load or {}).get("others_cpus") or 0.0))
    why = machineload.disturbed(hit[len(hit) // 2].machine_load)
    return f"{why} in {len(hit)} of {len(measured)} baseline runs"


def speeds(report: Report) -> tuple[float | None, float | None]:
    """The machine's slowness during a report's baseline runs (medians of the probes),
    wall-clock and CPU-only."""
    from perfstack.analysis.diff.drift import baseline_speeds

    out = []
    for wall_clock in (True, False):
        found = baseline_speeds(report, wall_clock)
        out.append(statistics.median(found) if found else None)
    return out[0], out[1]
