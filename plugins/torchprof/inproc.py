"""The torch backend's part inside the workload process (started by perfstack's bootstrap).

It starts torch.profiler before the script runs and stops it when the script ends. Steps are
perfstack's (the bootstrap counts every ``optimizer.step()`` through a global optimizer hook,
or ``perfstack.step()`` for inference loops; once the workload calls ``perfstack.step()``, only
those count). Until the first step everything is recorded, so a workload that never steps is
profiled whole; once steps come, the schedule (skip_first, wait, warmup, active, repeat)
picks a representative window and the part before the first step is discarded.

Only torch and the standard library are imported here: this runs in the workload.
"""

from __future__ import annotations

import contextlib
import json
import os
import socket
import sys
from collections.abc import Callable, Iterator
from typing import Any

SIDECAR = "torchprof.json"
#: The ending torch's own tensorboard_trace_handler gives its traces.
TRACE_SUFFIX = ".pt.trace.json"


def trace_index(name: str) -> int:
    """Return N of a trace file named 'host_pid.N.pt.trace.json'."""
    return int(name[: -len(TRACE_SUFFIX)].rsplit(".", 1)[1])


def _rank_selected(spec: str) -> bool:
    from perfstack.runfolder import ranks  # standard library only: cheap in the workload

    rank = os.environ.get("RANK")
    if rank is None or not rank.strip().isdigit():
        return True
    return ranks.selected(spec, int(rank))


def _write_sidecar(folder: str, info: dict[str, Any]) -> None:
    tmp = os.path.join(folder, SIDECAR + ".tmp")
    with open(tmp, "w", encoding="utf-8") as fh:
        json.dump(info, fh)
    os.replace(tmp, os.path.join(folder, SIDECAR))


def _update_memory_sidecar(folder: str, change: Callable[[dict[str, Any]], None],
                           failed: Callable[[dict[str, Any], str], None]) -> None:
    """Apply ``change`` to the memory sidecar (``--torch-memory``) and save it whole; where
    ``change`` raises (torch's memory APIs are private), ``failed`` records why instead:
    never a failed run."""
    from .memcats import MEMORY_SIDECAR

    path = os.path.join(folder, MEMORY_SIDECAR)
    try:
        with open(path, encoding="utf-8") as fh:
            saved = json.load(fh)
    except (OSError, ValueError):
        saved = {"cycles": []}
    try:
        change(saved)
    except Exception as exc:  # a private torch API: say why, never fail the run
        failed(saved, f"{type(exc).__name__}: {exc}")
    tmp = path + ".tmp"
    with open(tmp, "w", encoding="utf-8") as fh:
        json.dump(saved, fh)
    os.replace(tmp, path)


def _save_categories(prof: Any, folder: str, cycle: int) -> None:
    """Save torch's memory categories at the peak of this cycle."""
    from .memcats import categories

    _update_memory_sidecar(
        folder, lambda saved: saved["cycles"].append({"cycle": cycle,
                                                      "devices": categories(prof)}),
        lambda saved, why: saved["cycles"].append({"cycle": cycle, "error": why}))


#: The CUDA caching allocator's whole snapshot, as torch's own memory viewer reads it.
CUDA_SNAPSHOT = "cuda-memory.pickle"


def _save_cuda_snapshot(torch: Any, folder: str) -> None:
    """Summarise the CUDA caching allocator's snapshot into the memory sidecar, and keep the
    snapshot itself beside it (``pytorch.org/memory_viz`` opens it)."""
    import pickle

    from .cudasnap import summarize

    def add(saved: dict[str, Any]) -> None:
        snapshot = torch.cuda.memory._snapshot()
        torch.cuda.memory._record_memory_history(enabled=None)
        with open(os.path.join(folder, CUDA_SNAPSHOT), "wb") as fh:
            pickle.dump(snapshot, fh)
        saved["cuda"] = summarize(snapshot)

    _update_memory_sidecar(folder, add, lambda saved, why: saved.update(cuda_error=why))


#: The allocator's snapshot the instant the device ran out of memory.
CUDA_OOM_SNAPSHOT = "cuda-oom.pickle"


def _on_device_oom(torch: Any, folder: str) -> Callable[[int, int, int, int], None]:
    """The CUDA allocator's out-of-memory observer: the instant an allocation is refused, its
    snapshot (each live block with the stack that allocated it) is kept beside the run and
    summarised into the memory sidecar (``cuda_oom``), with what each live block belonged to
    (a parameter, a gradient, an optimizer's state, or else), before the error unwinds the
    frames that held the tensors."""
    def observe(device: int, asked: int, allocated: int, free: int) -> None:
        import pickle

        from perfstack.inprocess.tensorkinds import owners as tensor_owners

        from .cudasnap import at_oom

        def add(saved: dict[str, Any]) -> None:
            snapshot = torch.cuda.memory._snapshot()
            with open(os.path.join(folder, CUDA_OOM_SNAPSHOT), "wb") as fh:
                pickle.dump(snapshot, fh)
            try:
                owners: tuple[dict[int, str], dict[int, str]] | None = tensor_owners(torch)
            except Exception as exc:  # the lines and the allocator's figures still count
                owners = None
                saved["cuda_oom_owners_error"] = f"{type(exc).__name__}: {exc}"
            saved["cuda_oom"] = at_oom(snapshot, device, asked, free, owners)

        _update_memory_sidecar(folder, add, lambda saved, why: saved.update(cuda_oom_error=why))

    return observe


def _record_cuda_history(torch: Any, folder: str) -> None:
    """The caching allocator's own record, for its snapshot at the end, and its observer of
    an out-of-memory error, for its snapshot that instant."""
    torch.cuda.memory._record_memory_history(max_entries=100_000)
    attach = getattr(torch._C, "_cuda_attach_out_of_memory_observer", None)
    if attach is not None:  # (a private API: a torch without it keeps the end's only)
        attach(_on_device_oom(torch, folder))


@contextlib.contextmanager
def _inductor_unasked(torch: Any, with_stack: bool) -> Iterator[None]:
    """Around torch.profiler's start and step, where the workload has not imported
    torch._inductor and no Python stacks are recorded: ``hasattr(torch, "_inductor")`` is
    False while they run.

    Preparing a trace, torch.profiler asks ``hasattr(torch, "_inductor")`` for a CUDA graphs
    setting of inductor's, and torch answers by importing torch._inductor and torch._dynamo
    with it: a second of a 2-CPU machine, per process, in a workload that compiles nothing.
    A workload that uses inductor has imported it and is asked as before. With Python stacks
    the import is left where torch puts it, before the script: a torch optimizer imports
    torch._dynamo when it is built, and under the stack tracer that import cost seconds more.
    (Only the attribute is hidden, for the call: ``import torch._inductor`` works as ever.)"""
    lazy = torch.__dict__.get("__getattr__")
    if with_stack or lazy is None or "torch._inductor" in sys.modules:
        yield
        return

    def attribute(name: str) -> Any:
        if name == "_inductor" and "torch._inductor" not in sys.modules:
            raise AttributeError(name)
        return lazy(name)

    torch.__getattr__ = attribute
    try:
        yield
    finally:
        torch.__getattr__ = lazy


def _module_ranges(torch: Any) -> Callable[[], None] | None:
    """Each module call as a profiler range named by its attribute (moduleranges), or None
    where torch's hooks are missing."""
    from .moduleranges import start as ranges

    try:
        return ranges(torch)
    except (AttributeError, ImportError):
        return None


def _evaluation_ranges(torch: Any, marks: Any) -> Callable[[], None] | None:
    """An evaluation loop between training steps as one profiler range (evalranges), or None
    where this torch lacks what it needs."""
    from .evalranges import start as ranges

    try:
        return ranges(torch, marks)
    except AttributeError:
        return None


def _ranges(torch: Any, marks: Any, with_stack: bool,
            kernel_lines: bool) -> list[Callable[[], None]]:
    """What the trace holds beside torch's own ranges: module calls named by attribute
    (without Python stacks), an evaluation between steps, and (``kernel_lines``) inductor's
    kernels with their provenance; the functions that stop them."""
    if kernel_lines:  # compiled kernels traced to the user's lines
        from .inductortrace import start as provenance

        provenance()
    return [off for off in (None if with_stack else _module_ranges(torch),
                            _evaluation_ranges(torch, marks)) if off is not None]


def start(options: dict[str, Any], folder: str) -> Callable[[], None] | None:
    """Start torch.profiler in this process; return the function that stops it and saves."""
    if not _rank_selected(str(options.get("ranks", "0"))):
        _write_sidecar(folder, {"rank_not_profiled": os.environ.get("RANK"), "traces": []})
        return None
    import torch
    from torch.profiler import ProfilerAction, ProfilerActivity, profile, schedule

    from perfstack.inprocess import steps as marks

    activities = [ProfilerActivity.CPU]
    if torch.cuda.is_available():
        activities.append(ProfilerActivity.CUDA)
    window = schedule(skip_first=int(options.get("skip_first", 1)),
                      wait=int(options.get("wait", 0)), warmup=int(options.get("warmup", 1)),
                      active=int(options.get("active", 3)), repeat=int(options.get("repeat", 1)))
    state: dict[str, Any] = {"steps": 0, "prelude_seen": False, "traces": []}

    def pick(step_num: int) -> ProfilerAction:
        if state["steps"] == 0:
            return ProfilerAction.RECORD_AND_SAVE  # no step yet: record everything so far
        action: ProfilerAction = window(step_num - 1)
        return action

    def ready(prof: Any) -> None:
        if not state["prelude_seen"]:
            state["prelude_seen"] = True
            if state["steps"] > 0:
                return  # what ran before the first step: set-up, not a representative step
        # Named as torch's tensorboard_trace_handler names them, so tools that look for
        # *.pt.trace.json (TensorBoard, HTA) find them: host_pid.N.pt.trace.json.
        name = f"{socket.gethostname()}_{os.getpid()}.{len(state['traces'])}{TRACE_SUFFIX}"
        path = os.path.join(folder, name)
        prof.export_chrome_trace(path)
        state["traces"].append({"file": os.path.basename(path), "at_step": state["steps"]})
        if prof.profile_memory and prof.with_stack and prof.record_shapes:
            _save_categories(prof, folder, len(state["traces"]) - 1)

    prof = profile(activities=activities, schedule=pick, on_trace_ready=ready,
                   record_shapes=bool(options.get("record_shapes", True)),
                   profile_memory=bool(options.get("profile_memory", False)),
                   with_stack=bool(options.get("with_stack", False)),
                   # perfstack counts each op's FLOPs and bytes from its shapes (opcost.py);
                   # torch's own count, with shapes recorded, made GPT-2's steps 3-4x slower
                   # from the third recorded step on (357, 331, 339, 1059, 1138 ms; 270 ms
                   # with either alone), so it is never asked for
                   with_flops=False)

    def on_step() -> None:
        # perfstack counts the steps (perfstack.step(), else optimizer steps): one call each.
        state["steps"] += 1
        with _inductor_unasked(torch, prof.with_stack):
            prof.step()

    unhook = marks.on_step(on_step)
    offs = _ranges(torch, marks, prof.with_stack, bool(options.get("kernel_lines", True)))
    cuda_history = bool(options.get("profile_memory")) and torch.cuda.is_available()
    if cuda_history:
        _record_cuda_history(torch, folder)
    with _inductor_unasked(torch, prof.with_stack):
        prof.start()

    def finish() -> None:
        unhook()
        for off in offs:
            off()
        prof.stop()
        if cuda_history:
            _save_cuda_snapshot(torch, folder)
        info = {"steps": state["steps"], "explicit_steps": marks.state.explicit,
                "traces": state["traces"], "activities": [a.name for a in activities],
                "torch": torch.__version__, "cuda": torch.version.cuda,
                "devices": [torch.cuda.get_device_name(i)
                            for i in range(torch.cuda.device_count())]
                if torch.cuda.is_available() else []}
        _write_sidecar(folder, info)

    return finish
