"""``perfstack attach PID``: the backends that can look into a running process
(``Backend.live``) measure it for a while, and what they measured becomes a report like a
run's, with what only a baseline run could say (the profiler's overhead, the unprofiled
speed) said to be unknown.

Nothing here stops or restarts the process: each backend attaches, the session waits for
the duration (or until the process exits, or the user's Ctrl-C), each attachment's
``stop()`` ends its measuring at once, and the process runs on.
"""

from __future__ import annotations

import os
import time
from collections.abc import Sequence
from dataclasses import replace
from datetime import datetime, timezone
from functools import partial
from pathlib import Path
from typing import Any

import perfstack
from perfstack import errors
from perfstack.machine import ptrace
from perfstack.machine.envinfo import with_plugins
from perfstack.plugin.backend import (
    Attachment,
    Collected,
    Outcome,
    RunContext,
    Workload,
    availability,
)
from perfstack.plugin.calls import call
from perfstack.plugin.manager import BackendEntry, Plugins
from perfstack.report import BackendResult, Report, Status
from perfstack.report.session import ExitInfo, RunInfo, RunRecord
from perfstack.run import assembly
from perfstack.run.collecting import collect

#: How often the wait looks whether the process still runs.
POLL_S = 0.05


def live_backends(backends: dict[str, BackendEntry], named: Sequence[str] | None
                  ) -> list[BackendEntry]:
    """The backends to attach with: those named (each must be able to), else every installed
    one that can look into a running process."""
    if named is None:
        return [e for _, e in sorted(backends.items()) if e.backend.live]
    chosen = []
    for name in named:
        if name not in backends:
            raise errors.UnknownPlugin(name, sorted(backends))
        if not backends[name].backend.live:
            able = ", ".join(n for n, e in sorted(backends.items()) if e.backend.live)
            raise errors.UsageError(f"the {name} backend measures only a process it starts "
                                    f"('perfstack run'); these attach: {able or 'none'}")
        chosen.append(backends[name])
    return chosen


def _workload(t: ptrace.Target) -> Workload:
    """The attached process as a workload: its script (whose folder tells the user's code
    from libraries), or its working folder for ``-m``, ``-c`` or an embedded Python."""
    args = t.argv[1:]
    while args and args[0].startswith("-") and args[0] not in ("-m", "-c"):
        args = args[1:]  # the interpreter's own flags (-u, -X dev, -O)
    if args[:2] == ["-m", "perfstack.inprocess.bootstrap"]:  # a run perfstack started
        args = args[2:]
    cwd = t.cwd or "/"
    if args and args[0] not in ("-m", "-c") and not args[0].startswith("-"):
        return Workload(os.path.join(cwd, args[0]), args[1:])
    return Workload(os.path.join(cwd, "-"), args)  # home(): the working folder


def _wait(pid: int, duration_s: float) -> tuple[float, str | None]:
    """Wait ``duration_s`` or until the process exits; return the seconds waited and how it
    ended ('exited' where it did). Ctrl-C (KeyboardInterrupt) passes through."""
    began = time.monotonic()
    while time.monotonic() - began < duration_s:
        if not ptrace.alive(pid):
            return time.monotonic() - began, "exited"
        time.sleep(POLL_S)
    return time.monotonic() - began, None


def checked(pid: int) -> ptrace.Target:
    """The process ``pid``, once it is known that this process may look into it and that it
    runs Python; InputNotFound or AttachRefused, with the fix, where not."""
    target = ptrace.target(pid)
    ptrace.check(target)
    ptrace.check_python(target)
    return target


class Live:
    """The backends attached to one running process, from start to their records."""

    def __init__(self, target: ptrace.Target, selected: list[BackendEntry],
                 options: dict[str, dict[str, Any]], run_dir: Path) -> None:
        """Attach each of ``selected`` that can run here (its files in ``run_dir/<name>``);
        AttachRefused where none could."""
        self.target, self.run_dir = target, run_dir
        #: where the report is written: its artifacts' paths are relative to it
        self.report_dir = run_dir
        self.results: list[BackendResult] = []
        self.ready: list[tuple[BackendEntry, RunContext, Attachment | None]] = []
        workload = _workload(target)
        for entry in selected:
            said = availability(entry.backend)
            if not said.ok:
                self.results.append(assembly.result_of(
                    entry, Status.UNAVAILABLE, reason=said.reason, fix=said.fix))
                continue
            folder = run_dir / entry.backend.name
            folder.mkdir(parents=True, exist_ok=True)
            ctx = RunContext(entry.backend.name, workload, folder,
                             options.get(entry.backend.name, {}), None, live=True)
            called = call(partial(entry.backend.attach, ctx, target.pid), "attach")
            if not called.ok:
                self.results.append(assembly.result_of(
                    entry, Status.FAILED, reason=called.said() or "attach() raised",
                    traceback=called.error))
                continue
            self.ready.append((entry, ctx, called.value))
        if not self.ready:
            why = ("; ".join(f"{r.name}: {r.reason}" for r in self.results)
                   or "no backend can attach")
            raise errors.AttachRefused(f"nothing could attach to process {target.pid}: {why}")

    def wait_ready(self, timeout_s: float = 5.0) -> None:
        """Return once each sampler that needs a moment to attach samples."""
        for _, _, attachment in self.ready:
            waiting = getattr(attachment, "wait_ready", None)
            if callable(waiting):
                waiting(timeout_s)

    def stop(self) -> None:
        """End every backend's measuring; the process runs on."""
        for _, _, attachment in self.ready:
            if attachment is not None:
                call(attachment.stop, "stop")

    def collect(self, started: datetime, sampled_s: float, ended: str | None,
                timeout_s: float = 600.0) -> list[tuple[BackendResult, Collected | None]]:
        """Each backend's result and records (None where it kept none) of the ``sampled_s``
        seconds from ``started`` (``ended``: 'exited' where the process ended meanwhile)."""
        record = RunRecord(id="attached", role="backend", backend=None, argv=self.target.argv,
                           started=started.isoformat(timespec="milliseconds"),
                           wall_s=sampled_s,
                           exit=ExitInfo("exited", 0) if ended is None else ExitInfo("exited"))
        out: list[tuple[BackendResult, Collected | None]] = [(r, None) for r in self.results]
        for entry, ctx, _ in self.ready:
            result = assembly.result_of(entry, Status.OK)
            outcome = Outcome(replace(record, backend=entry.backend.name), ctx.artifact_dir,
                              self.target.pid, int(started.timestamp() * 1e9))
            kept = collect(result, entry.backend, ctx, outcome, nproc=None, ranks_spec="",
                           per_rank=False, timeout_s=timeout_s, errors=[],
                           report_dir=self.report_dir)
            result.wall_s = sampled_s
            out.append((result, kept))
        return out


def run_info(target: ptrace.Target, started: datetime, sampled_s: float, how: str,
             complete: bool) -> RunInfo:
    """The report's run: nothing started, process ``target`` measured (``how`` it ended)."""
    return RunInfo(command=target.argv or [f"pid {target.pid}"], cwd=target.cwd or "",
                   started=started.isoformat(timespec="seconds"), duration_s=sampled_s,
                   perfstack_version=perfstack.__version__, repeat=0, warmup=0,
                   timeout_s=None, complete=complete, runs=[],
                   attached={"pid": target.pid, "sampled_s": round(sampled_s, 3),
                             "ended": how})


def attach_session(plugins: Plugins, target: ptrace.Target, selected: list[BackendEntry],
                   options: dict[str, dict[str, Any]], duration_s: float, run_dir: Path,
                   report_dir: Path | None = None, collect_timeout_s: float = 600.0) -> Report:
    """Measure the process (:func:`checked`) with ``selected`` for ``duration_s`` seconds
    (less where it exits or the user stops it first) and return the report; its files are
    in ``run_dir``, named relative to ``report_dir`` (the report's folder; default
    ``run_dir``). AttachRefused where no backend could attach."""
    live = Live(target, selected, options, run_dir)
    live.report_dir = report_dir or run_dir
    started = datetime.now(timezone.utc)
    interrupted = False
    try:
        live.wait_ready()
        started = datetime.now(timezone.utc)
        sampled_s, ended = _wait(target.pid, duration_s)
    except KeyboardInterrupt:  # Ctrl-C, SIGTERM: stop measuring, keep what was measured
        interrupted, ended = True, None
        sampled_s = (datetime.now(timezone.utc) - started).total_seconds()
    finally:
        live.stop()
    pairs = live.collect(started, sampled_s, ended, collect_timeout_s)
    results, collected = [r for r, _ in pairs], [c for _, c in pairs if c is not None]
    how = "exited" if ended else "interrupted" if interrupted else "running"
    run = run_info(target, started, sampled_s, how, not interrupted)
    return assembly.build_report(run, with_plugins(plugins), results, collected,
                                 plugins.findings)
