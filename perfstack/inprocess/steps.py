"""What perfstack keeps inside the workload's process: the steps it marks (``perfstack.step()``
and a torch optimizer's steps), their times and the resident memory after each, the step
limit of ``--steps``, and the figures it reports itself (``perfstack.report_metric``). Set up
by the bootstrap; read back by the driver from the files the bootstrap writes at exit.
Standard library only: every profiled workload imports it."""

from __future__ import annotations

import os
import threading
from collections.abc import Callable
from time import perf_counter as _perf_counter
from typing import Any

from perfstack.inprocess import devicemarks
from perfstack.runfolder.filenames import METRICS_FILE

#: Set by the bootstrap when this process is a workload run by perfstack: its artifact folder.
_artifact_dir: str | None = None
#: Called at every step (perfstack.step(), or an optimizer step when the workload never calls
#: perfstack.step()); in-process backends (the torch profiler's schedule) register here.
_step_callbacks: list[Any] = []
#: How many steps the workload made; the bootstrap saves it (workload-steps.json) at exit.
_steps = 0
#: Whether the workload calls perfstack.step() itself: then optimizer steps no longer count.
_explicit = False
#: time.perf_counter() at each step (the first 100,000), for per-step times across ranks.
_step_times: list[float] = []
#: The process's resident memory (bytes) just after each step (the first 100,000), where the
#: kernel says it (Linux): memory over the run, aligned to steps, at the cost of one read.
_step_rss: list[int] = []
_statm: int | None = None  # an open /proc/self/statm, read again at each step
#: Set by the bootstrap under ``perfstack run --steps``: end the workload after this many steps.
_stop_after: int | None = None
#: Set by the bootstrap under ``--steps``: time.perf_counter() when the script started, the
#: first entry of _step_times (so that the first step has a duration).
_started_at: float | None = None
#: Set by the bootstrap: the step at which the measured window opens, and what to call then.
_window_at: int | None = None
_on_window: Any = None
#: Set by the bootstrap: the workload's own process; steps count there, not in forked workers.
_pid: int | None = None
#: The thread whose steps count (``threading.get_ident()``): the first to mark a step of the
#: kind that counts. A training loop run in a worker thread is counted there; a second thread
#: stepping beside it is not counted twice.
_stepper: int | None = None
#: Set by the bootstrap under ``--steps``: the signal that ends the main thread when the step
#: limit is reached in another thread (the main thread may be waiting on that thread).
_end_signal: int | None = None
#: Whether ``--steps`` ended the workload: its leftover threads then get a bounded wait.
_limit_reached = False
#: The CPU seconds of the child processes the workload had waited for when the step times
#: began (its first step): what they use later ran beside its steps (DataLoader workers), what
#: they used before did not (a compiler run at the first call).
_children_at_first: float | None = None


class StepLimitReached(SystemExit):
    """Raised at the step that ``perfstack run --steps`` ends the workload with: a clean exit
    (status 0) that unwinds the workload's own ``finally`` blocks and context managers."""


def on_step(callback: Callable[[], None], first: bool = False) -> Callable[[], None]:
    """Call ``callback`` after each step the workload marks (``perfstack.step()``, or an
    optimizer step where it marks none), in the marking thread; ``first``: before those
    registered already. The public way for an in-process backend to hear of a step; returns
    what stops the calls."""
    if first:
        _step_callbacks.insert(0, callback)
    else:
        _step_callbacks.append(callback)

    def stop() -> None:
        if callback in _step_callbacks:
            _step_callbacks.remove(callback)

    return stop


def step() -> None:
    """Mark the end of one step (a batch, an iteration) of the workload.

    A no-op unless the process runs under perfstack, where in-process backends use it to
    profile a representative window of steps (the torch backend's schedule) and
    ``perfstack run --steps N`` ends the run after its steps. Training loops with a torch
    optimizer need not call it: optimizer steps are counted automatically.

    Steps count in the workload's own process, in the first thread that marks one (a
    training loop may run in a worker thread while the main thread waits on it): calls from
    other threads, and from forked workers (``multiprocessing``), are ignored. When the limit
    is reached in a thread other than the main one, that thread ends and the main thread is
    ended too, wherever it waits; threads still running then get a few seconds to end.
    """
    _count_step(explicit=True)


def _optimizer_step(*_: Any) -> None:
    """The global optimizer step hook the bootstrap registers once torch.optim is imported."""
    _count_step(explicit=False)


def _count_step(explicit: bool) -> None:
    global _steps, _explicit, _children_at_first, _stepper
    if _pid is not None and os.getpid() != _pid:
        return
    me = threading.get_ident()
    if explicit and not _explicit:
        _explicit, _stepper = True, me
        # The optimizer steps counted so far were the same batches the workload now marks
        # itself: counted once, not twice (a first batch of two "steps").
        _steps = 0
        _step_times[:] = [] if _started_at is None else [_started_at]
    elif not explicit and _explicit:
        return  # the workload marks its own steps: optimizer steps no longer count
    elif _stepper is None:
        _stepper = me
    if me != _stepper:
        return  # one thread's steps are the run's steps
    _steps += 1
    if _steps == _window_at and _on_window is not None:
        _on_window()  # waits for the samplers to attach: before the step ends, so that
        # the wait belongs to the last warm-up step, in perfstack's step times and torch's
    if _artifact_dir is not None and len(_step_times) < 100_000:
        if not _step_times:  # the step times begin: the children's CPU so far, read before
            # the first mark so that reading /proc is in no step's time
            _children_at_first = _children_cpu() + _live_children_cpu()
        _step_times.append(_perf_counter())
        devicemarks.mark(len(_step_times) - 1)  # on the device's clock too, where it runs
        if _statm is not None:
            _step_rss.append(_resident())
    for callback in _step_callbacks:
        callback()
    if _stop_after is not None and _steps >= _stop_after:
        _end_main_thread()
        raise StepLimitReached(0)


def _end_main_thread() -> None:
    """The step limit was reached: when in another thread than the main one, interrupt the
    main thread (the bootstrap's handler raises StepLimitReached there)."""
    global _limit_reached
    _limit_reached = True
    main = threading.main_thread()
    if _end_signal is not None and threading.current_thread() is not main and main.ident:
        import signal

        signal.pthread_kill(main.ident, _end_signal)


def _children_cpu() -> float:
    """The CPU seconds (user + system) of the child processes this process has waited for."""
    import resource

    used = resource.getrusage(resource.RUSAGE_CHILDREN)
    return float(used.ru_utime + used.ru_stime)


def _live_children_cpu() -> float:
    """The CPU seconds its descendants still running have used so far (Linux: ``/proc``'s
    children lists and each one's stat; 0 elsewhere): DataLoader workers started (spawned:
    importing torch) before the first step are not reaped yet, and what they used before it
    is not the steps'. A live child's own reaped children are in its stat's cutime/cstime."""
    tick = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100
    total, seen, todo = 0.0, set(), [os.getpid()]
    while todo:
        pid = todo.pop()
        try:
            tasks = os.listdir(f"/proc/{pid}/task")
        except OSError:
            continue
        for tid in tasks:
            try:
                with open(f"/proc/{pid}/task/{tid}/children", encoding="ascii") as fh:
                    kids = [int(k) for k in fh.read().split()]
            except (OSError, ValueError):
                continue
            for kid in kids:
                if kid in seen:
                    continue
                seen.add(kid)
                try:
                    with open(f"/proc/{kid}/stat", encoding="utf-8", errors="replace") as fh:
                        fields = fh.read().rsplit(")", 1)[1].split()
                    total += sum(int(fields[i]) for i in (11, 12, 13, 14)) / tick
                except (OSError, ValueError, IndexError):
                    continue
                todo.append(kid)
    return total


def _resident() -> int:
    """The process's resident memory in bytes (``/proc/self/statm``'s second field), or -1."""
    try:
        assert _statm is not None
        return int(os.pread(_statm, 128, 0).split()[1]) * _PAGE
    except (AssertionError, OSError, ValueError, IndexError):
        return -1


_PAGE = os.sysconf("SC_PAGE_SIZE") if hasattr(os, "sysconf") else 4096


def report_metric(name: str, value: float, unit: str = "", better: str = "higher") -> None:
    """Report a figure the workload measured itself, such as throughput in samples/s.

    Under perfstack it becomes a report metric (source ``workload``), with one sample per
    baseline run so that ``diff`` can judge it against noise; otherwise a no-op.
    ``better`` is ``"higher"``, ``"lower"`` or ``"neither"``.
    """
    if _artifact_dir is None:
        return
    import json
    import math
    import sys

    if not math.isfinite(float(value)):  # NaN or infinity is not a measurement
        print(f"perfstack: report_metric({name!r}): {value} is not a value; not recorded",
              file=sys.stderr)
        return

    line = json.dumps({"name": name, "value": float(value), "unit": unit, "better": better})
    with open(os.path.join(_artifact_dir, METRICS_FILE), "a", encoding="utf-8") as fh:
        fh.write(line + "\n")
