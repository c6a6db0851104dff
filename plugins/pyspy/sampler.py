"""Starting py-spy on a workload: where the binary is, whether this user may attach, the
samplers of one run and when they measure. The pyspy backend and the gil backend both start
their samplers here."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import IO, Any

from perfstack.machine.ptrace import ptrace_scope
from perfstack.plugin.backend import Availability, RunContext

#: The two profiles a run of this backend writes in its folder (the gil backend reads them too).
PROFILE_FILE = "profile.speedscope.json"
GIL_PROFILE_FILE = "gil.speedscope.json"
#: The wait pass's profile: every sample, idle ones included, at a low rate (plugins.pyspy.waits).
WAIT_PROFILE_FILE = "wait.speedscope.json"
#: The wait pass's default rate: a 2 s wait is 100 samples; a sampler at 250 Hz costs ~1.4
#: points of wall time on 2 busy CPUs, at 50 Hz about a fifth of that (docs/performance.md).
WAIT_RATE = 50


def py_spy() -> str | None:
    """Return the py-spy binary: beside this interpreter (its venv) first, then on PATH."""
    local = Path(sys.executable).parent / "py-spy"
    return str(local) if local.is_file() else shutil.which("py-spy")


class Samplers:
    """The running py-spy processes; stop() waits for them to write their profiles."""

    def __init__(self, procs: list[subprocess.Popen[bytes]], logs: Sequence[IO[bytes]],
                 live: bool = False) -> None:
        self.procs = procs
        self.logs = logs
        #: sampling a process perfstack did not start: stop() ends it at once (it runs on)
        self.live = live

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
        """Wait for each py-spy to write its profile: it stops by itself when the workload
        exits; one sampling a live process is asked to stop now (SIGINT: it writes what it
        has and detaches, the process runs on)."""
        if self.live:
            for proc in self.procs:
                if proc.poll() is None:
                    proc.send_signal(signal.SIGINT)
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


def gil_rate(options: dict[str, Any]) -> int:
    """The GIL pass's rate: ``gil_rate``, else half the main pass's (at least 1 per second)."""
    given = options.get("gil_rate")
    return int(given) if given else max(1, int(options.get("rate") or 250) // 2)


def wait_rate(options: dict[str, Any]) -> int:
    """The wait pass's rate: ``wait_rate`` (0: no wait pass), else WAIT_RATE; 0 also under
    ``idle``, where the main pass samples the waits itself."""
    if options.get("idle"):
        return 0
    given = options.get("wait_rate")
    return WAIT_RATE if given is None else int(given)


def availability() -> Availability:
    """Available when py-spy is installed and this user may attach to another process."""
    if py_spy() is None:
        return Availability.no("py-spy is not installed", "pip install py-spy")
    scope = ptrace_scope()
    if os.geteuid() != 0 and scope is not None and scope >= 1:
        return Availability.no(
            f"ptrace is refused: kernel.yama.ptrace_scope={scope} and not root",
            "sudo sysctl kernel.yama.ptrace_scope=0, or run perfstack with CAP_SYS_PTRACE")
    if scope == 3:
        return Availability.no("ptrace is disabled: kernel.yama.ptrace_scope=3",
                               "a reboot with ptrace_scope below 3 is needed")
    return Availability.yes()


def attach(ctx: RunContext, pid: int, run_count: int) -> Samplers:
    """Start py-spy on the workload's pid: the main pass (with the wait pass beside it: the
    same stacks, idle ones included, at a low rate), the GIL pass, or all side by side
    (``run_count`` 1: the GIL pass has no run of its own), as ``ctx.options`` say."""
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
        if wait_rate(ctx.options):
            passes.append((WAIT_PROFILE_FILE, ["--nonblocking", "--idle", "--rate",
                                               str(wait_rate(ctx.options))]))
        if run_count == 1 and not ctx.options.get("no_gil"):
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
    return Samplers(procs, logs, live=ctx.live)
