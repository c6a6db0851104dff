"""Launching one run: the bootstrap's configuration, the child's command line (through torchrun
for a job of ranks) and environment, watching for the workload's start or its measured window,
and the run's record once it has ended. ``perfstack.run.child.process`` supervises the child."""

from __future__ import annotations

import os
import sys
from collections.abc import Callable
from pathlib import Path

import perfstack
from perfstack.plugin.backend import Launch, Outcome, StepWindow, Workload
from perfstack.report import RunRecord
from perfstack.report.files import write_json_atomic
from perfstack.run.child.oomfacts import memory_at_end
from perfstack.run.child.process import ChildResult
from perfstack.runfolder import rundir
from perfstack.runfolder.filenames import BOOTSTRAP_CONFIG_FILE
from perfstack.runfolder.handshake import CONFIG_ENV

#: Start the bootstrap without the current folder on sys.path (Python 3.11+), so a folder
#: named like one of perfstack's modules where the user stands cannot shadow the installed
#: perfstack in the workload process; the bootstrap then puts the script's folder first.
SAFE_PATH = ["-P"] if sys.version_info >= (3, 11) else []


def write_config(folder: Path, launch: Launch, role: str, steps: StepWindow | None) -> Path:
    """Write what the bootstrap reads in the child (its folder, in-process hooks, the steps
    window); return the file."""
    config = folder / BOOTSTRAP_CONFIG_FILE
    write_json_atomic(config, {
        "artifact_dir": str(folder.resolve()),
        "inprocess": [{"target": h.target, "options": h.options} for h in launch.inprocess],
        "probe": role != "extra",
        # the memory watch (what an out-of-memory death leaves) in the runs no profiler is
        # in: a thread of ours there would be one more to sample (py-spy --native: 3x slower)
        "memory_watch": role in ("warmup", "baseline"),
        **({"steps": {"warmup": steps.warmup, "measured": steps.measured}} if steps else {}),
    })
    return config


def child_argv(workload: Workload, launch: Launch, folder: Path, python: str | None,
               nproc: int | None, torchrun_args: list[str]) -> list[str]:
    """The child's command line: the backend's wrapper, then the bootstrap running the
    workload (under torchrun, each rank's)."""
    target = ["-m", workload.target] if workload.module else [workload.target]
    if nproc:
        # torchrun starts each rank as `python -m perfstack.inprocess.bootstrap SCRIPT ARGS`.
        rendezvous = torchrun_args or ["--standalone"]
        # torchrun makes a torchelastic_* folder in the system's temporary folder for its
        # logs unless told where: it belongs in this run's folder (the user's own
        # --log-dir, given in --torchrun-args, wins).
        logs = ([] if any(a.startswith(("--log-dir", "--log_dir")) for a in rendezvous)
                else [f"--log-dir={folder.resolve() / 'torchrun-logs'}"])
        return [*launch.wrap, python or sys.executable, "-m", "torch.distributed.run",
                f"--nproc-per-node={nproc}", *rendezvous, *logs, "-m",
                "perfstack.inprocess.bootstrap", *target, *workload.args]
    return [*launch.wrap, python or sys.executable, *SAFE_PATH, "-m",
            "perfstack.inprocess.bootstrap", *target, *workload.args]


def child_env(launch: Launch, config: Path, python: str | None,
              run_dir: Path) -> dict[str, str]:
    """The child's environment: ours, the backend's, and where its bootstrap configuration is;
    another interpreter gets a path holding only perfstack."""
    env = {**os.environ, **launch.env, CONFIG_ENV: str(config.resolve())}
    if python is not None and os.path.realpath(python) != os.path.realpath(sys.executable):
        env["PYTHONPATH"] = os.pathsep.join(
            p for p in (str(bootstrap_path(run_dir)), launch.env.get("PYTHONPATH")) if p)
    return env


def bootstrap_path(run_dir: Path) -> Path:
    """A folder holding only perfstack (a link), for another interpreter's sys.path.

    perfstack's bootstrap and ``perfstack/__init__`` need nothing beyond the standard
    library, so another interpreter (a free-threaded build) can run them; the rest of
    this interpreter's site-packages must not leak into it.
    """
    shim = run_dir / ".interpreter-path"
    link = shim / "perfstack"
    if not link.exists():
        shim.mkdir(parents=True, exist_ok=True)
        link.symlink_to(Path(perfstack.__file__).resolve().parent, target_is_directory=True)
    return shim


def rank_watcher(folder: Path, tick_progress: Callable[[float], None],
                 on_rank_started: Callable[[int, Path, int], None] | None,
                 windowed: bool = False) -> Callable[[float], None]:
    """Return an on_tick callback that reports each rank's pid once it has started (with
    ``windowed``, once its measured window of steps has opened; the rank then waits
    until its samplers are attached)."""
    seen: set[int] = set()
    run = rundir.RunFolder(folder)

    def tick(elapsed: float) -> None:
        tick_progress(elapsed)
        for rank in run.ranks():
            if rank in seen:
                continue
            if windowed:
                pid = run.window(rank)
            else:
                found = run.started(rank)
                pid = found[0] if found is not None else None
            if pid is not None:
                seen.add(rank)
                try:
                    if on_rank_started is not None:
                        on_rank_started(rank, run.rank(rank).path, pid)
                finally:
                    if windowed:
                        run.window_go(rank)
    return tick


def window_watcher(folder: Path, tick_progress: Callable[[float], None],
                   on_started: Callable[[int], None] | None) -> Callable[[float], None]:
    """Return an on_tick callback that, once the measured window of ``--steps`` opens
    (the workload has made its warm-up steps and waits), calls ``on_started`` (samplers
    attach) and lets the workload go on."""
    done: list[int] = []
    run = rundir.RunFolder(folder)

    def tick(elapsed: float) -> None:
        tick_progress(elapsed)
        if not done:
            pid = run.window()
            if pid is not None:
                done.append(pid)
                try:
                    if on_started is not None:
                        on_started(pid)
                finally:
                    run.window_go()
    return tick


def record_of(label: str, role: str, backend: str | None, argv: list[str],
              result: ChildResult, report_dir: Path) -> RunRecord:
    """The run as the report shows it (its logs relative to the report's folder)."""
    def rel(path: Path) -> str:
        return os.path.relpath(path, report_dir)

    return RunRecord(
        id=label, role=role, backend=backend, argv=argv, started=result.started,
        wall_s=result.wall_s, exit=result.exit, rusage=result.rusage,
        stdout=rel(result.stdout) if result.stdout else None,
        stderr=rel(result.stderr) if result.stderr else None,
        python_stack=result.python_stack,
        stdout_tail=result.stdout_tail, stderr_tail=result.stderr_tail,
        machine_load=result.machine_load,
        memory=(None if result.exit.clean or result.stdout is None
                else memory_at_end(result.stdout.parent, result.oom_kills)),
    )


def outcome_of(record: RunRecord, folder: Path, result: ChildResult,
               distributed: bool) -> Outcome:
    """What a backend's collect step is told of the run: under torchrun, the first rank's
    process and steps."""
    workload = rundir.RunFolder(folder).outcome()
    record.steps = workload.steps
    if distributed:
        return Outcome(record, folder, workload.pid, workload.start_ns, record.steps)
    return Outcome(record, folder, result.workload_pid, result.start_ns, record.steps)
