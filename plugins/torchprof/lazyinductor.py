"""Keep torch.profiler from importing the torch.compile stack into a workload that never used it.

``torch.profiler.profile.prepare_trace`` asks ``hasattr(torch, "_inductor")`` to learn whether
inductor's CUDA graphs are on. ``torch._inductor`` is one of torch's lazy modules, so that question
*imports* it when nobody has: inductor, dynamo and sympy, about 800 modules and a second of CPU
(1.05 s measured on the 2-CPU VM with torch 2.13) at the profiler's start and again at each
schedule cycle's first transition, inside the window being measured. A workload that never
imported inductor cannot have its CUDA graphs on, so for that one caller, and only while inductor
is not imported, the answer is "no such attribute". Every other ``torch._inductor`` access (the
workload's own ``torch.compile`` included) goes to torch's lazy import unchanged.

Only torch and the standard library are used here: this runs in the workload.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from types import ModuleType
from typing import Any

_ASKER = "torch.profiler.profiler"
_NAME = "_inductor"


def install(torch: ModuleType) -> Callable[[], None]:
    """Answer the profiler's inductor question without importing it; return the undo."""
    lazy: Callable[[str], Any] | None = torch.__dict__.get("__getattr__")
    if lazy is None:  # a torch with no lazy modules: nothing to keep from importing
        return lambda: None
    lazy_getattr = lazy

    def __getattr__(name: str) -> Any:
        if (name == _NAME and "torch._inductor" not in sys.modules
                and sys._getframe(1).f_globals.get("__name__") == _ASKER):
            raise AttributeError(name)
        return lazy_getattr(name)

    setattr(torch, "__getattr__", __getattr__)  # noqa: B010 (a module attribute torch defines)

    def undo() -> None:
        if torch.__dict__.get("__getattr__") is __getattr__:
            setattr(torch, "__getattr__", lazy_getattr)  # noqa: B010

    return undo
