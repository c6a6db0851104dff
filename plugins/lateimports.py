"""Imports that run inside the workload's own calls, named with the call that made them.

An import at the top of a script is start-up. One made when the workload first calls some
library code (``torch.optim.SGD()`` importing ``torch._dynamo``, a second on a 2-CPU machine)
is start-up too, but "run python -X importtime" does not say where it came from: the sampler
does. For each sample taken inside an import, the innermost frame of the workload's own code
above the import machinery is the caller; when that frame is a function (not the script's
top level), the import is a late one, filed under that function with the library call it made
(the frame below it) and the module imported (the outermost module being executed).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable
from typing import Any

from perfstack.analysis.origin import module_of

#: How many late imports a function's row names.
TOP = 3
def is_import(frame: dict[str, Any]) -> bool:
    """Whether a sampled frame is the import machinery's."""
    return str(frame.get("file") or "").startswith("<frozen importlib")


def module_name(path: str) -> str:
    """'…/site-packages/torch/_dynamo/__init__.py' -> 'torch._dynamo'; a file that is no
    library's, its name without '.py'."""
    return module_of(path) or path.rsplit("/", 1)[-1].removesuffix(".py")


#: A library call: function, file, line (None for an import statement in the function).
Via = tuple[str, str, int | None] | None


class LateImports:
    """Seconds of late imports by (own function, library caller, module), from samples."""

    def __init__(self, frames: list[dict[str, Any]], ours: Callable[[int], bool],
                 key: Callable[[dict[str, Any]], str]) -> None:
        self.frames, self.ours, self.key = frames, ours, key
        self.by_caller: dict[str, dict[tuple[Via, str], float]] = defaultdict(
            lambda: defaultdict(float))

    def add(self, python: list[int], weight: float) -> None:
        """One sample's Python frames (outermost first), taken inside an import."""
        frames = self.frames
        first = next((k for k, i in enumerate(python) if is_import(frames[i])), None)
        if not first:  # no frame above the import machinery: the interpreter's own start
            return
        own = [i for i in python[:first] if self.ours(i)]
        if not own or frames[own[-1]].get("name") == "<module>":
            return  # an import at the top of a script: ordinary start-up
        module = next((i for i in python[first:] if frames[i].get("name") == "<module>"
                       and not is_import(frames[i])), None)
        if module is None:
            return
        # The library call the workload's code made (SGD.__init__), not the machinery's; None
        # for an import statement in the function itself.
        below = python.index(own[-1]) + 1
        via: Via = None
        if below < first:
            call = frames[python[below]]
            line = call.get("line")
            via = (str(call.get("name", "?")), str(call.get("file", "?")),
                   line if isinstance(line, int) else None)
        name = module_name(str(frames[module].get("file") or "?"))
        self.by_caller[self.key(frames[own[-1]])][(via, name)] += weight

    def of(self, caller: str) -> list[dict[str, Any]]:
        """The late imports filed under one of the workload's functions, largest first."""
        ranked = sorted(self.by_caller.get(caller, {}).items(), key=lambda kv: -kv[1])[:TOP]
        return [{"module": name, "seconds": round(seconds, 4),
                 "via": None if via is None else dict(zip(("function", "file", "line"), via,
                                                          strict=True))}
                for (via, name), seconds in ranked]
