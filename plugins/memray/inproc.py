"""The memray backend's part inside the workload process (started by perfstack's bootstrap).

It starts memray's ``Tracker`` before the script runs and stops it when the script ends, so
that the capture holds the script's allocations and none of perfstack's. At every step it
notes the wall-clock time (``time.time_ns()``, memray's own clock for its memory snapshots),
so that the capture's memory can be read per step. Only memray and the standard library are
imported here: this runs in the workload.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable
from typing import Any

from perfstack.inprocess.afterimport import when_imported

#: memray's capture of the whole script.
CAPTURE = "memray.bin"
#: What the hook noted: when the tracker started and stopped and when each step ended.
SIDECAR = "memray-steps.json"
#: At most this many step times are kept (a long job's later steps add nothing per step).
MAX_STEPS = 100_000


#: The methods that register a hook on a module, and the kind each registers.
REGISTER = {"register_forward_hook": "forward", "register_forward_pre_hook": "forward_pre",
            "register_full_backward_hook": "backward",
            "register_full_backward_pre_hook": "backward_pre",
            "register_backward_hook": "backward"}


def _where(hook: Any) -> dict[str, Any]:
    code = getattr(hook, "__code__", None) or getattr(
        getattr(type(hook), "__call__", None), "__code__", None)  # noqa: B004 (its method)
    file = getattr(code, "co_filename", None)
    return {"function": str(getattr(hook, "__qualname__", type(hook).__qualname__)),
            "file": os.path.abspath(file) if isinstance(file, str)
            and not file.startswith("<") else file,
            "line": getattr(code, "co_firstlineno", None)}


class HookLog:
    """The hooks the workload registers on its torch modules, once per hook function: its
    kind, where it is defined, how many modules it was registered on and of which classes.
    A hook that keeps what it sees holds it from step to step, and memray charges that memory
    to the code that allocated it (the module's forward), not to the hook: the leak finding
    names them beside. Noted at registration (the model may be gone by the end)."""

    def __init__(self) -> None:
        self.found: dict[tuple[str, str, Any, Any], dict[str, Any]] = {}

    def note(self, kind: str, hook: Any, owner: str) -> None:
        """One registration of ``hook``."""
        where = _where(hook)
        key = (kind, where["function"], where["file"], where["line"])
        entry = self.found.setdefault(key, {"kind": kind, **where, "modules": 0,
                                            "classes": []})
        entry["modules"] += 1
        if owner not in entry["classes"] and len(entry["classes"]) < 5:
            entry["classes"].append(owner)

    def watch(self, modules: Any) -> None:
        """Wrap the registering methods of ``torch.nn.modules.module`` (once imported)."""
        for method, kind in REGISTER.items():
            original = getattr(modules.Module, method, None)
            if original is None:
                continue

            def wrapped(module: Any, hook: Any, *args: Any, _original: Any = original,
                        _kind: str = kind, **kwargs: Any) -> Any:
                self.note(_kind, hook, type(module).__name__)
                return _original(module, hook, *args, **kwargs)

            setattr(modules.Module, method, wrapped)

    def hooks(self) -> list[dict[str, Any]]:
        """What was registered, at most 50 hook functions."""
        return list(self.found.values())[:50]


def start(options: dict[str, Any], folder: str) -> Callable[[], None]:
    """Start memray's tracker in this process; return the function that stops it and saves
    the step times."""
    import memray

    from perfstack.inprocess import steps as marks

    path = os.path.join(folder, CAPTURE)
    tracker = memray.Tracker(path, native_traces=bool(options.get("native", True)),
                             memory_interval_ms=int(options.get("interval_ms", 2)),
                             follow_fork=False, trace_python_allocators=False)
    steps: list[int] = []

    def on_step() -> None:
        if len(steps) < MAX_STEPS:
            steps.append(time.time_ns())

    log = HookLog()
    when_imported("torch.nn.modules.module", log.watch)
    started = time.time_ns()
    tracker.__enter__()
    unhook = marks.on_step(on_step)

    def finish() -> None:
        unhook()
        tracker.__exit__(None, None, None)
        info = {"started_ns": started, "stopped_ns": time.time_ns(), "step_ends_ns": steps,
                "explicit_steps": marks.state.explicit,
                "memray": getattr(memray, "__version__", None), "hooks": log.hooks()}
        tmp = os.path.join(folder, SIDECAR + ".tmp")
        with open(tmp, "w", encoding="utf-8") as fh:
            json.dump(info, fh)
        os.replace(tmp, os.path.join(folder, SIDECAR))

    return finish
