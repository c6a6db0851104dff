"""What perfstack keeps inside the workload's process: the steps it marks (``perfstack.step()``
and a torch optimizer's steps), their times and the resident memory after each, the step
limit of ``--steps``, and the figures it reports itself (``perfstack.report_metric``). Set up
by the bootstrap; read back by the driver from the files the bootstrap writes at exit. All of
it is one object, ``state``; a backend hears of each step through ``on_step``.
Standard library only: every profiled workload imports it."""

from __future__ import annotations

import os
import threading
from collections.abc import Callable
from time import perf_counter as _perf_counter
from typing import Any

from perfstack.inprocess import devicemarks
from perfstack.runfolder.filenames import METRICS_FILE


class StepState:
    """Everything perfstack keeps inside the workload's process about its steps, in one
    object (``state``): set up by the bootstrap, read by the in-process backends (the torch
    profiler's schedule, memray, the memory watch, the on-demand rider) and written at exit.
    A backend hears of each step with ``on_step``; what it reads here it must not change."""

    __slots__ = (
        "artifact_dir",
        "callbacks",
        "children_at_first",
        "count",
        "end_signal",
        "explicit",
        "limit_reached",
        "on_window",
        "pid",
        "rss",
        "started_at",
        "statm",
        "stepper",
        "stop_after",
        "times",
        "window_at",
    )

    def __init__(self) -> None:
        #: Set by the bootstrap when this process is a workload run by perfstack: its folder.
        self.artifact_dir: str | None = None
        #: Called at every step (``on_step``): in-process backends register here.
        self.callbacks: list[Callable[[], None]] = []
        #: How many steps the workload made; the bootstrap saves it (workload-steps.json).
        self.count = 0
        #: Whether the workload calls perfstack.step() itself: then optimizer steps do not
        #: count.
        self.explicit = False
        #: time.perf_counter() at each step (the first 100,000), for per-step times.
        self.times: list[float] = []
        #: The process's resident memory (bytes) just after each step (the first 100,000),
        #: where the kernel says it (Linux): memory over the run, aligned to steps.
        self.rss: list[int] = []
        #: An open /proc/self/statm, read again at each step.
        self.statm: int | None = None
        #: Under ``perfstack run --steps``: end the workload after this many steps.
        self.stop_after: int | None = None
        #: Under ``--steps``: time.perf_counter() when the script started, the first entry of
        #: ``times`` (so that the first step has a duration).
        self.started_at: float | None = None
        #: The step at which the measured window opens, and what to call then.
        self.window_at: int | None = None
        self.on_window: Callable[[], None] | None = None
        #: The workload's own process: steps count there, not in forked workers.
        self.pid: int | None = None
        #: The thread whose steps count (``threading.get_ident()``): the first to mark a step
        #: of the kind that counts. A training loop run in a worker thread is counted there; a
        #: second thread stepping beside it is not counted twice.
        self.stepper: int | None = None
        #: Under ``--steps``: the signal that ends the main thread when the step limit is
        #: reached in another thread (the main thread may be waiting on that thread).
        self.end_signal: int | None = None
        #: Whether ``--steps`` ended the workload: its leftover threads then get a bounded wait.
        self.limit_reached = False
        #: The CPU seconds of the child processes the workload had waited for when the step
        #: times began (its first step): what they use later ran beside its steps (DataLoader
        #: workers), what they used before did not (a compiler run at the first call).
        self.children_at_first: float | None = None


#: The one state of this process.
state = StepState()


class StepLimitReached(SystemExit):
    """Raised at the step that ``perfstack run --steps`` ends the workload with: a clean exit
    (status 0) that unwinds the workload's own ``finally`` blocks and context managers."""


def on_step(callback: Callable[[], None], first: bool = False) -> Callable[[], None]:
    """Call ``callback`` after each step the workload marks (``perfstack.step()``, or an
    optimizer step where it marks none), in the marking thread; ``first``: before those
    registered already. The public way for an in-process backend to hear of a step; returns
    what stops the calls."""
    if first:
        state.callbacks.insert(0, callback)
    else:
        state.callbacks.append(callback)

    def stop() -> None:
        if callback in state.callbacks:
            state.callbacks.remove(callback)

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
    st = state
    if st.pid is not None and os.getpid() != st.pid:
        return
    me = threading.get_ident()
    if explicit and not st.explicit:
        st.explicit, st.stepper = True, me
        # The optimizer steps counted so far were the same batches the workload now marks
        # itself: counted once, not twice (a first batch of two "steps").
        st.count = 0
        st.times[:] = [] if st.started_at is None else [st.started_at]
        st.rss[:] = []  # one resident figure a counted step, as the times are
    elif not explicit and st.explicit:
        return  # the workload marks its own steps: optimizer steps no longer count
    elif st.stepper is None:
        st.stepper = me
    if me != st.stepper:
        return  # one thread's steps are the run's steps
    st.count += 1
    if st.count == st.window_at and st.on_window is not None:
        st.on_window()  # waits for the samplers to attach: before the step ends, so that
        # the wait belongs to the last warm-up step, in perfstack's step times and torch's
    if st.artifact_dir is not None and len(st.times) < 100_000:
        if not st.times:  # the step times begin: the children's CPU so far, read before
            # the first mark so that reading /proc is in no step's time
            st.children_at_first = children_cpu() + _live_children_cpu()
        st.times.append(_perf_counter())
        devicemarks.mark(len(st.times) - 1)  # on the device's clock too, where it runs
        if st.statm is not None:
            st.rss.append(_resident())
    for callback in st.callbacks:
        callback()
    if st.stop_after is not None and st.count >= st.stop_after:
        _end_main_thread()
        raise StepLimitReached(0)


def _end_main_thread() -> None:
    """The step limit was reached: when in another thread than the main one, interrupt the
    main thread (the bootstrap's handler raises StepLimitReached there)."""
    state.limit_reached = True
    main = threading.main_thread()
    if state.end_signal is not None and threading.current_thread() is not main and main.ident:
        import signal

        signal.pthread_kill(main.ident, state.end_signal)


def children_cpu() -> float:
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
        assert state.statm is not None
        return int(os.pread(state.statm, 128, 0).split()[1]) * _PAGE
    except (AssertionError, OSError, ValueError, IndexError):
        return -1


_PAGE = os.sysconf("SC_PAGE_SIZE") if hasattr(os, "sysconf") else 4096


def report_metric(name: str, value: float, unit: str = "", better: str = "higher") -> None:
    """Report a figure the workload measured itself, such as throughput in samples/s.

    Under perfstack it becomes a report metric (source ``workload``), with one sample per
    baseline run so that ``diff`` can judge it against noise; otherwise a no-op.
    ``better`` is ``"higher"``, ``"lower"`` or ``"neither"``.
    """
    if state.artifact_dir is None:
        return
    import json
    import math
    import sys

    if not math.isfinite(float(value)):  # NaN or infinity is not a measurement
        print(f"perfstack: report_metric({name!r}): {value} is not a value; not recorded",
              file=sys.stderr)
        return

    line = json.dumps({"name": name, "value": float(value), "unit": unit, "better": better})
    with open(os.path.join(state.artifact_dir, METRICS_FILE), "a", encoding="utf-8") as fh:
        fh.write(line + "\n")
