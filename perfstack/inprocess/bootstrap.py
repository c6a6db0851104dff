"""Runs inside the workload process: ``python -m perfstack.inprocess.bootstrap script.py ARGS``.

It sets up what must live in the workload's own process, then runs the script with runpy so
that ``__name__ == "__main__"``, ``sys.argv`` and ``sys.path[0]`` are what they would be
without perfstack:

- faulthandler, writing to a file the driver keeps, so a SIGSEGV leaves its Python stack;
- SIGUSR1 dumps every thread's stack to the same file (the driver sends it at a timeout);
- SIGTERM raises SystemExit, so in-process profilers get to write their output;
- a small JSON file with the pid and start time, for backends that attach to the pid;
- the in-process hooks a backend asked for (``module:function``), started before the script;
- the machine-speed probe (``perfstack.machine.probe``), timed before the script and after it.

Configuration comes in a JSON file named by PERFSTACK_BOOTSTRAP, removed from the
environment before the script runs. Keep imports here minimal: they land in the workload.
"""

from __future__ import annotations

import contextlib
import faulthandler
import itertools
import json
import os
import runpy
import signal
import sys
import time
from collections.abc import Callable
from types import FrameType
from typing import IO, TYPE_CHECKING, Any

from perfstack.inprocess.afterimport import when_imported
from perfstack.runfolder.filenames import (
    FAULTHANDLER_FILE,
    HOOK_ERRORS_FILE,
    PROBE_FILE,
    RANK_PREFIX,
    STARTED_FILE,
    STEPS_FILE,
    WINDOW_FILE,
    WINDOW_GO_FILE,
    WORKLOAD_ENV_FILE,
)
from perfstack.runfolder.handshake import CONFIG_ENV, STACK_SIGNAL, WINDOW_WAIT_S

if TYPE_CHECKING:
    from perfstack.inprocess.memwatch import Watch

#: Under ``--steps``: the signal with which a thread that reached the step limit ends the main
#: thread (a real-time one, which workloads and launchers leave alone; SIGUSR1/2 are SLURM's).
END_SIGNAL = signal.SIGRTMAX - 1
#: After the step limit ended the workload, threads it left running get this long to end
#: before the process exits without them (a producer blocked on a full queue never would).
LEFTOVER_WAIT_S = 2.0


def torch_facts() -> dict[str, Any] | None:
    """Return what the torch this process imported was built with and runs with, or None.

    Read only when the workload imported torch itself (so it costs nothing otherwise):
    version, CUDA/ROCm versions, the CPU capability torch dispatches to, its thread counts.
    """
    torch = sys.modules.get("torch")
    if torch is None:
        return None
    facts: dict[str, Any] = {}
    readers: dict[str, Callable[[], Any]] = {
        "version": lambda: str(torch.__version__),
        "git_version": lambda: str(torch.version.git_version),
        "debug": lambda: bool(torch.version.debug),
        "cuda": lambda: torch.version.cuda,
        "hip": lambda: torch.version.hip,
        "cpu_capability": lambda: torch.backends.cpu.get_cpu_capability(),
        "intra_op_threads": lambda: torch.get_num_threads(),
        "inter_op_threads": lambda: torch.get_num_interop_threads(),
        "mkldnn": lambda: bool(torch.backends.mkldnn.is_available()),
        "openmp": lambda: bool(torch.backends.openmp.is_available()),
        "mkl": lambda: bool(torch.backends.mkl.is_available()),
        "cuda_available": lambda: bool(torch.cuda.is_available()),
        # fp32 on a GPU's tensor cores (TF32): cuDNN's convolutions by default, matmuls when
        # the workload allows it (the roofline measures them against the TF32 peak)
        "cudnn_allow_tf32": lambda: bool(torch.backends.cudnn.allow_tf32),
        "matmul_allow_tf32": lambda: bool(torch.backends.cuda.matmul.allow_tf32),
    }
    for key, read in readers.items():
        try:
            facts[key] = read()
        except Exception:  # a torch too old or too new for one of these: leave it out
            continue
    return facts


def _write_workload_env(folder: str) -> None:
    facts: dict[str, Any] = {"torch": torch_facts()} if "torch" in sys.modules else {}
    # The top-level packages it imported (a backend for a library it never imported, run
    # again for it, would see nothing).
    facts["imported"] = sorted({name.partition(".")[0] for name in list(sys.modules)
                                if not name.startswith("_")})
    if hasattr(sys, "_is_gil_enabled"):
        facts["gil_enabled"] = sys._is_gil_enabled()
    tmp = os.path.join(folder, WORKLOAD_ENV_FILE + ".tmp")
    with open(tmp, "w", encoding="utf-8") as fh:
        json.dump(facts, fh, default=str)
    os.replace(tmp, os.path.join(folder, WORKLOAD_ENV_FILE))


def _write_started(folder: str) -> None:
    tmp = os.path.join(folder, STARTED_FILE + ".tmp")
    with open(tmp, "w", encoding="utf-8") as fh:
        json.dump({"pid": os.getpid(), "start_ns": time.time_ns()}, fh)
    os.replace(tmp, os.path.join(folder, STARTED_FILE))


def _probe() -> dict[str, float]:
    from perfstack.machine import probe

    return probe.measure()


def _write_probe(folder: str, probes: dict[str, Any]) -> None:
    with contextlib.suppress(OSError), open(os.path.join(folder, PROBE_FILE), "w",
                                            encoding="utf-8") as fh:
        json.dump(probes, fh)


def _on_sigterm(signum: int, frame: FrameType | None) -> None:
    raise SystemExit(128 + signum)


def _plain_sigterm_in_child() -> None:
    """A process the workload forks (a multiprocessing pool's worker) ends at SIGTERM as it
    would without perfstack: inheriting the handler above, a worker that ``Pool.terminate()``
    signalled raised SystemExit wherever it was, and now and then never ended, leaving the
    workload waiting for it (tests/workloads/forked_steps.py hung once in the suite's runs;
    300 pools in a row hung every time).
    A handler the workload set itself is left alone."""
    if signal.getsignal(signal.SIGTERM) is _on_sigterm:
        signal.signal(signal.SIGTERM, signal.SIG_DFL)


def _hook_failed(folder: str, target: str) -> None:
    # The workload still runs; the driver reads this file and marks the backend failed.
    import traceback

    with open(os.path.join(folder, HOOK_ERRORS_FILE), "a", encoding="utf-8") as fh:
        fh.write(f"in-process hook {target} failed:\n{traceback.format_exc()}")


def _start_hooks(hooks: list[dict[str, Any]], folder: str) -> list[tuple[str, Callable[[], None]]]:
    import importlib

    finishers = []
    for hook in hooks:
        target = hook["target"]
        try:
            module_name, _, func_name = target.partition(":")
            func = getattr(importlib.import_module(module_name), func_name)
            finish = func(hook.get("options", {}), folder)
        except Exception:
            _hook_failed(folder, target)
            continue
        if callable(finish):
            finishers.append((target, finish))
    return finishers


def _count_optimizer_steps(module: Any) -> None:
    from perfstack.inprocess import steps as marks

    module.register_optimizer_step_post_hook(marks._optimizer_step)


def _bound_steps(steps: dict[str, int], folder: str) -> None:
    """``perfstack run --steps N --warmup-steps K``: end after K+N steps; at step K, say the
    measured window opened (samplers attach then)."""
    from perfstack.inprocess import steps as marks

    warmup, measured = int(steps.get("warmup", 0)), int(steps["measured"])
    marks.state.stop_after = warmup + measured
    marks.state.started_at = time.perf_counter()  # so the first step has a duration
    marks.state.times.append(marks.state.started_at)

    def opened() -> None:
        tmp = os.path.join(folder, WINDOW_FILE + ".tmp")
        with open(tmp, "w", encoding="utf-8") as fh:
            json.dump({"pid": os.getpid(), "step": warmup, "ns": time.time_ns()}, fh)
        os.replace(tmp, os.path.join(folder, WINDOW_FILE))
        go = os.path.join(folder, WINDOW_GO_FILE)
        deadline = time.monotonic() + WINDOW_WAIT_S
        while not os.path.exists(go) and time.monotonic() < deadline:
            time.sleep(0.002)

    if warmup > 0:
        marks.state.window_at, marks.state.on_window = warmup, opened
    if signal.getsignal(END_SIGNAL) in (signal.SIG_DFL, None):
        signal.signal(END_SIGNAL, _on_end_signal)
        marks.state.end_signal = END_SIGNAL
    _quiet_thread_ends()


def _quiet_thread_ends() -> None:
    """A thread that the step limit ended ends as quietly as the main thread (threading's own
    hook is quiet about SystemExit itself only, not about a subclass)."""
    import threading

    from perfstack.inprocess import steps as marks

    before = threading.excepthook

    def hook(args: Any) -> None:
        if args.exc_type is not None and issubclass(args.exc_type, marks.StepLimitReached):
            return
        before(args)

    threading.excepthook = hook


def _on_end_signal(signum: int, frame: FrameType | None) -> None:
    """The step limit was reached in another thread: end the script in the main thread,
    unless it has ended already (the bootstrap is writing its files)."""
    from perfstack.inprocess import steps as marks

    if marks.state.end_signal is not None:
        raise marks.StepLimitReached(0)


def _end_leftover_threads() -> None:
    """The step limit ended the script: threads it started that still run get a bounded wait,
    then the process exits without them (the workload's atexit handlers run first)."""
    import atexit
    import threading

    deadline = time.monotonic() + LEFTOVER_WAIT_S
    for thread in threading.enumerate():
        if thread is threading.current_thread() or thread.daemon:
            continue
        thread.join(max(0.0, deadline - time.monotonic()))
    left = [t.name for t in threading.enumerate()
            if t.is_alive() and not t.daemon and t is not threading.current_thread()]
    if left:
        print(f"perfstack: --steps ended the workload; {len(left)} of its threads still ran "
              f"{LEFTOVER_WAIT_S:.0f} s later ({', '.join(left[:3])}): exiting without them",
              file=sys.stderr)
        atexit._run_exitfuncs()
        for stream in (sys.stdout, sys.stderr):
            with contextlib.suppress(Exception):
                stream.flush()
        os._exit(0)


def _parse(argv: list[str]) -> tuple[str, list[str], bool]:
    if argv and argv[0] == "-m" and len(argv) > 1:
        return argv[1], argv[2:], True
    if argv:
        return argv[0], argv[1:], False
    raise SystemExit("usage: python -m perfstack.inprocess.bootstrap (SCRIPT | -m MODULE) "
                     "[ARGS...]")


# long: the workload process's life in order: set-up, probe, hooks, script, exit files
def main(argv: list[str]) -> None:
    """Set up the workload process and run the workload in it; exits as the workload would."""
    target, args, as_module = _parse(argv)
    config: dict[str, Any] = {}
    config_path = os.environ.pop(CONFIG_ENV, None)
    if config_path:
        with open(config_path, encoding="utf-8") as fh:
            config = json.load(fh)
    folder = config.get("artifact_dir")
    if folder and os.environ.get("RANK") is not None and os.environ.get("WORLD_SIZE", "1") != "1":
        # Under torchrun each rank is its own workload process with its own folder.
        folder = os.path.join(folder, f"{RANK_PREFIX}{os.environ['RANK']}")
        os.makedirs(folder, exist_ok=True)
    log: IO[str] | None = None
    watch: Watch | None = None
    if folder:
        # Kept open for the life of the process: faulthandler writes to its descriptor.
        log = open(os.path.join(folder, FAULTHANDLER_FILE), "w", encoding="utf-8")  # noqa: SIM115
        faulthandler.enable(file=log, all_threads=True)
        faulthandler.register(STACK_SIGNAL, file=log, all_threads=True, chain=False)
        _write_started(folder)
    signal.signal(signal.SIGTERM, _on_sigterm)
    os.register_at_fork(after_in_child=_plain_sigterm_in_child)
    if folder:
        from perfstack.inprocess import steps as marks

        marks.state.artifact_dir = folder
        marks.state.pid = os.getpid()
        with contextlib.suppress(OSError):  # Linux: the resident memory after each step
            marks.state.statm = os.open("/proc/self/statm", os.O_RDONLY | os.O_CLOEXEC)
        if config.get("memory_watch"):
            from perfstack.inprocess import memwatch

            watch = memwatch.start(folder, marks.state.statm)
        when_imported("torch.optim.optimizer", _count_optimizer_steps)
        if config.get("steps"):
            _bound_steps(config["steps"], folder)
    probes: dict[str, Any] = {}
    scheduled: tuple[float, float] | None = None
    if folder and config.get("probe"):
        probes["start"] = _probe()
        from perfstack.machine.probe import scheduler_times

        scheduled = scheduler_times()
    finishers = _start_hooks(config.get("inprocess", []), folder or ".")

    sys.argv = [target, *args]  # for -m, runpy replaces argv[0] with the module's path
    first = os.getcwd() if as_module else os.path.dirname(os.path.abspath(target))
    if getattr(sys.flags, "safe_path", False):
        sys.path.insert(0, first)  # started with -P: nothing to replace
    else:
        sys.path[0] = first
    if watch is not None:
        watch.script.set()
    try:
        if as_module:
            runpy.run_module(target, run_name="__main__", alter_sys=True)
        else:
            runpy.run_path(target, run_name="__main__")
    except BaseException as exc:
        if folder:  # out of memory: what held it, while the frames that hold it still do
            from perfstack.inprocess.tensorkinds import after_death

            after_death(exc, folder)
        raise
    finally:
        script_end = time.time()  # what follows (hooks, atexit, the interpreter) is teardown
        if watch is not None:  # the workload's memory, not the probe's or the hooks'
            watch.stopped.set()
        if folder:
            from perfstack.inprocess import steps as marks

            marks.state.end_signal = None  # the script has ended: a late signal ends nothing
        if probes:
            from perfstack.machine.probe import scheduler_times

            now = scheduler_times()
            if scheduled is not None and now is not None:
                probes["sched"] = {"cpu_s": now[0] - scheduled[0],
                                   "wait_s": now[1] - scheduled[1]}
            probes["end"] = _probe()
            _write_probe(folder or ".", probes)
        for target, finish in reversed(finishers):
            try:
                finish()
            except Exception:
                _hook_failed(folder or ".", target)
        if folder:
            from perfstack.inprocess import devicemarks
            from perfstack.inprocess import steps as marks

            times = marks.state.times
            on_device = devicemarks.epochs(len(times))  # waits for the device's queue
            with open(os.path.join(folder, STEPS_FILE), "w", encoding="utf-8") as fh:
                json.dump({"steps": marks.state.count, "explicit": marks.state.explicit,
                           "limit": marks.state.stop_after,
                           "step_times_s": [b - a for a, b in itertools.pairwise(times)],
                           # the step the first duration is of: the first under --steps
                           # (the times begin at the script's start), else the second
                           # (they begin at the first step's mark, its end)
                           "first_timed_step": 1 if marks.state.started_at is not None else 2,
                           "step_rss_bytes": marks.state.rss,
                           "children_cpu_s": marks.children_cpu(),
                           # the steps' times began at the script's start under --steps
                           "children_cpu_at_first_step_s": (
                               0.0 if marks.state.started_at is not None
                               else marks.state.children_at_first),
                           "first_step_to_end_s": (time.perf_counter() - times[0]
                                                   if times else None),
                           # the first mark on the wall clock, so that events stamped
                           # with it (a compile's start) can be placed in their step
                           "first_mark_epoch_s": (time.time() - time.perf_counter() + times[0]
                                                  if times else None),
                           "script_end_epoch_s": script_end,
                           # each mark as the GPU reached it (CUDA runs asynchronously)
                           "device_mark_epoch_s": on_device}, fh)
            # Best effort: without it the report lacks the live torch facts, nothing more.
            with contextlib.suppress(Exception):
                _write_workload_env(folder)
        if log is not None:
            log.flush()
        if folder and marks.state.limit_reached:
            _end_leftover_threads()


if __name__ == "__main__":
    main(sys.argv[1:])
