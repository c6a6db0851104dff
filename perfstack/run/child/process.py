"""Starting one workload process and seeing it through to the end, whatever the end is.

The child gets its own session and process group, so a timeout or Ctrl-C stops everything
it started and nothing else. A thread blocks in ``os.wait4`` so the wall time is exact and the
OS's resource accounting (CPU time, max RSS, faults, context switches) comes for free.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import threading
import time
from collections.abc import Callable
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from perfstack import signals
from perfstack.machine import load as machineload
from perfstack.machine import oomkill
from perfstack.records import datarecord, field
from perfstack.report import ExitInfo
from perfstack.run.child import strays
from perfstack.runfolder import rundir
from perfstack.runfolder.filenames import FAULTHANDLER_FILE, STDERR_FILE, STDOUT_FILE
from perfstack.runfolder.handshake import STACK_SIGNAL

#: How much of faulthandler's output to keep in the report (the rest stays in the file).
STACK_LIMIT = 20_000
#: How many of the last lines of the workload's stdout and stderr the report keeps.
TAIL_LINES = 15


@datarecord
class ChildSpec:
    """What to run and how long to let it run."""

    argv: list[str]
    env: dict[str, str]
    cwd: str
    artifact_dir: Path
    timeout_s: float | None = None
    kill_grace_s: float = 5.0  # after SIGTERM, before SIGKILL: time for profilers to flush
    #: count the user-space instructions of the child and all it starts (perfstack.machine.counters)
    count_instructions: bool = False


@datarecord
class ChildResult:
    """How the child ended, and what it left behind."""

    started: str
    wall_s: float | None
    exit: ExitInfo
    rusage: dict[str, float] = field(default_factory=dict)
    workload_pid: int | None = None
    start_ns: int | None = None
    python_stack: str | None = None
    stdout: Path | None = None
    stderr: Path | None = None
    stdout_tail: str | None = None
    stderr_tail: str | None = None
    instructions: int | None = None
    instructions_reason: str | None = None  # why they were not counted, when asked for
    #: processes the run started that were still running after it ended (in a session of
    #: their own), and were stopped: 'pid N: command'
    left_running: list[str] = field(default_factory=list)
    #: what else the machine did meanwhile (perfstack.machine.load.between)
    machine_load: dict[str, Any] | None = None
    #: the kernel's OOM killer killed a process of this memory cgroup during the run (its
    #: count rose); None where the machine does not count them
    oom_kills: int | None = None


def tail(path: Path, lines: int = TAIL_LINES, limit: int = 8192) -> str | None:
    """Return the last ``lines`` lines of a text file (at most ``limit`` bytes), or None."""
    try:
        with open(path, "rb") as fh:
            fh.seek(0, os.SEEK_END)
            fh.seek(max(0, fh.tell() - limit))
            data = fh.read().decode("utf-8", errors="replace")
    except OSError:
        return None
    kept = [line.rstrip() for line in data.splitlines()[-lines:]]
    return "\n".join(kept) if any(kept) else None


def _signal_name(num: int) -> str:
    try:
        return signal.Signals(num).name
    except ValueError:
        return f"signal {num}"


def _rusage(ru: Any) -> dict[str, float]:
    return {
        "user_s": ru.ru_utime,
        "system_s": ru.ru_stime,
        "max_rss_bytes": float(ru.ru_maxrss * 1024),  # Linux reports KiB
        "minor_faults": float(ru.ru_minflt),
        "major_faults": float(ru.ru_majflt),
        "voluntary_switches": float(ru.ru_nvcsw),
        "involuntary_switches": float(ru.ru_nivcsw),
        "block_in": float(ru.ru_inblock),
        "block_out": float(ru.ru_oublock),
    }


class _Waiter(threading.Thread):
    def __init__(self, pid: int) -> None:
        super().__init__(name=f"perfstack-wait-{pid}", daemon=True)
        self.pid = pid
        self.done = threading.Event()
        self.status = 0
        self.rusage: Any = None
        self.end = 0.0

    def run(self) -> None:
        _, self.status, self.rusage = os.wait4(self.pid, 0)
        self.end = time.perf_counter()
        self.done.set()


# long: one child's life from start to reaping, its signal and time-limit paths together
def run_child(
    spec: ChildSpec,
    on_started: Callable[[int], None] | None = None,
    on_tick: Callable[[float], None] | None = None,
) -> ChildResult:
    """Run the child to its end and return how it ended.

    :param on_started: called once with the workload's Python pid, when the bootstrap has
        written it (before the script runs), e.g. to attach a sampler.
    :param on_tick: called about ten times a second with the elapsed seconds.

    A timeout or Ctrl-C first asks the workload for its Python stacks (SIGUSR1), then sends
    SIGTERM to the group, and SIGKILL after ``kill_grace_s``.
    """
    spec.artifact_dir.mkdir(parents=True, exist_ok=True)
    stdout_path = spec.artifact_dir / STDOUT_FILE
    stderr_path = spec.artifact_dir / STDERR_FILE
    started = datetime.now(timezone.utc).isoformat(timespec="milliseconds")
    # From the child's start until it is watched, a stopping signal waits: acted on there, it
    # left a child of its own session running (a SIGHUP between the start and the watch).
    with signals.deferred(), open(stdout_path, "wb") as out, open(stderr_path, "wb") as err:
        load_start = machineload.snapshot()
        oom_start = oomkill.kills()
        begin = time.perf_counter()
        try:
            token = strays.new_token()  # inherited by everything the run starts
            proc = subprocess.Popen(
                spec.argv,
                env={**(spec.env if spec.env is not None else os.environ),
                     strays.TOKEN_VAR: token},
                cwd=spec.cwd,
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=err,
                start_new_session=True,
            )
        except OSError as exc:
            err.write(f"perfstack: cannot start {spec.argv[0]}: {exc}\n".encode())
            return ChildResult(started, None, ExitInfo("not_started"), stdout=stdout_path,
                               stderr=stderr_path)
        counter, counter_reason = _instruction_counter(proc.pid) if spec.count_instructions \
            else (None, None)
        waiter = _Waiter(proc.pid)
        waiter.start()
        state = _Supervision(spec, proc.pid, on_started)
    stop_reason: str | None = None
    try:
        signals.raise_pending()  # a signal that came while it started: stopped like any
        while not waiter.done.wait(0.1):
            elapsed = time.perf_counter() - begin
            state.poll_started()
            if on_tick is not None:
                on_tick(elapsed)
            if spec.timeout_s is not None and elapsed >= spec.timeout_s:
                stop_reason = "timeout"
                break
    except KeyboardInterrupt:
        stop_reason = "interrupted"
    if stop_reason is not None:
        with signals.deferred():
            state.stop(waiter)
    state.poll_started()
    proc.returncode = waiter.status  # tell Popen the child is reaped
    load = machineload.between(load_start, machineload.snapshot(), waiter.end - begin)
    oom_end = oomkill.kills()
    oom_kills = oom_end - oom_start if oom_start is not None and oom_end is not None else None
    with signals.deferred():
        strays.end_group(proc.pid)  # anything the workload left behind in its group
        left_running = strays.stop_marked(token)  # and what left the group (new sessions)
    if stop_reason != "interrupted":
        # A signal during the kill grace or the sweep: acted on now, the run stopped whole.
        signals.raise_pending()
    instructions = None
    if counter is not None:
        try:
            instructions = counter.read()
        except OSError as exc:
            counter_reason = f"the instruction counter could not be read ({exc.strerror})"
        finally:
            counter.close()
    return ChildResult(
        started=started,
        wall_s=waiter.end - begin,
        exit=_exit_info(waiter.status, stop_reason, _fatal_signal(spec.artifact_dir)),
        rusage=_rusage(waiter.rusage),
        workload_pid=state.pid,
        start_ns=state.start_ns,
        python_stack=_read_stack(spec.artifact_dir),
        stdout=stdout_path,
        stderr=stderr_path,
        stdout_tail=tail(stdout_path),
        stderr_tail=tail(stderr_path),
        instructions=instructions,
        instructions_reason=counter_reason,
        machine_load=load,
        left_running=left_running,
        oom_kills=oom_kills,
    )


def _instruction_counter(pid: int) -> tuple[Any, str | None]:
    """Open an instruction counter on the child, or return why there is none."""
    from perfstack.machine.counters import CounterUnavailable, open_counter

    try:
        return open_counter(pid), None
    except CounterUnavailable as exc:
        return None, str(exc)


class _Supervision:
    def __init__(self, spec: ChildSpec, pgid: int, on_started: Callable[[int], None] | None):
        self.spec = spec
        self.pgid = pgid
        self.on_started = on_started
        self.pid: int | None = None
        self.start_ns: int | None = None

    def poll_started(self) -> None:
        if self.pid is not None:
            return
        found = rundir.RunFolder(self.spec.artifact_dir).started()
        if found is not None:
            self.pid, self.start_ns = found
            if self.on_started is not None:
                self.on_started(self.pid)

    def stop(self, waiter: _Waiter) -> None:
        self.poll_started()
        if self.pid is not None:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(self.pid, STACK_SIGNAL)
            _wait_for_stack(self.spec.artifact_dir / FAULTHANDLER_FILE, waiter)
        for sig, wait_s in ((signal.SIGTERM, self.spec.kill_grace_s), (signal.SIGKILL, 10.0)):
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(self.pgid, sig)
            if waiter.done.wait(wait_s):
                return


def _wait_for_stack(path: Path, waiter: _Waiter, limit_s: float = 1.0) -> None:
    # faulthandler writes from the signal handler at once; wait until the file stops growing.
    deadline = time.monotonic() + limit_s
    last = -1
    while time.monotonic() < deadline and not waiter.done.is_set():
        size = path.stat().st_size if path.exists() else 0
        if size and size == last:
            return
        last = size
        time.sleep(0.05)


#: faulthandler's words for the signals that kill a Python process, and the signals.
FATAL_SIGNALS = {"Segmentation fault": signal.SIGSEGV, "Aborted": signal.SIGABRT,
                 "Bus error": signal.SIGBUS, "Floating-point exception": signal.SIGFPE,
                 "Floating point exception": signal.SIGFPE,
                 "Illegal instruction": signal.SIGILL}


def _fatal_signal(folder: Path) -> int | None:
    """The signal that killed the workload, from its own faulthandler log: a wrapper (perf
    stat, a launcher) may exit 0 after its child died, but the workload said how it died."""
    try:
        text = (folder / FAULTHANDLER_FILE).read_text("utf-8", errors="replace")
    except OSError:
        return None
    for line in text.splitlines():
        if line.startswith("Fatal Python error: "):
            return FATAL_SIGNALS.get(line.removeprefix("Fatal Python error: ").strip())
    return None


def _exit_info(status: int, stop_reason: str | None, fatal: int | None = None) -> ExitInfo:
    code = os.waitstatus_to_exitcode(status)
    sig = -code if code < 0 else None
    if stop_reason is None and sig is None and fatal is not None:
        sig = fatal  # the wrapper hid it; the workload's log did not
    if stop_reason is not None:
        return ExitInfo(stop_reason, code if sig is None else None, sig,
                        _signal_name(sig) if sig else None)
    if sig is not None:
        return ExitInfo("signalled", None, sig, _signal_name(sig))
    return ExitInfo("exited", code)


def _ours(line: str) -> bool:
    # Frames of the bootstrap and of the runpy calls it makes: not the workload's stack.
    return ("<frozen runpy>" in line
            or f"perfstack{os.sep}inprocess{os.sep}bootstrap.py" in line
            or f"perfstack{os.sep}machine{os.sep}probe.py" in line
            or f"{os.sep}runpy.py" in line)


def _read_stack(folder: Path) -> str | None:
    try:
        text = (folder / FAULTHANDLER_FILE).read_text("utf-8", errors="replace").strip()
    except OSError:
        return None
    # perfstack's own threads in the workload (the memory watch) are not the workload's
    blocks = [b for b in text.split("\n\n")
              if not (b.startswith("Thread 0x")
                      and f"perfstack{os.sep}inprocess{os.sep}memwatch.py" in b)]
    text = "\n".join(line for line in "\n\n".join(blocks).splitlines() if not _ours(line))
    if not text:
        return None
    return text if len(text) <= STACK_LIMIT else text[:STACK_LIMIT] + "\n..."
