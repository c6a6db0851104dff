"""Inside the workload: each ``nn.Module`` call as a profiler range named as the user knows
the module, by the attribute that holds it (``lm_head (Linear)``, ``h.0 (GPT2Block)``), so
the module view needs no Python stacks.

Global forward hooks (``torch.nn.modules.module.register_module_forward_pre_hook`` and
``..._forward_hook``) open and close a ``record_function`` range ``nn.Module: NAME`` around
each call. A module's name is the path from the module that called it to it
(``parent.named_modules()``, found once per module and kept); a module called with none
around it is named from the module whose method called it (``self.net(x)`` in a Lightning
``training_step``: ``net``), else by its class. Only torch and the standard library: this
runs in the workload. With Python stacks torch's own tracer records the calls
(``Linear_1``), and these ranges are not made.
"""

from __future__ import annotations

import sys
import weakref
from collections.abc import Callable
from types import FrameType
from typing import Any

from perfstack.inprocess.afterimport import when_imported

#: The prefix torch's Python tracer gives module calls, and so these ranges.
MODULE_PREFIX = "nn.Module: "


#: Frames looked up, from a module called with none around it, for the module whose code
#: called it (Lightning's training_step calls self.net(x): net's owner runs no forward).
CALLER_FRAMES = 12


def _caller_module(torch: Any, module: Any) -> Any:
    """The ``nn.Module`` whose method called ``module`` (its ``self``), or None."""
    frame: FrameType | None = sys._getframe(3)
    for _ in range(CALLER_FRAMES):
        if frame is None:
            return None
        owner = frame.f_locals.get("self")
        if isinstance(owner, torch.nn.Module) and owner is not module:
            return owner
        frame = frame.f_back
    return None


def _skip(frames: Any, functions: tuple[Callable[..., Any], ...]) -> None:
    """Tell dynamo to run these functions and all they call as they are, never compiling a
    frame of them (its frame strategy SKIP, recursive SKIP; where this torch has no such
    strategy, the frames themselves)."""
    import importlib

    types: Any = importlib.import_module("torch._dynamo.types")  # torch's, not typed here
    for fn in functions:
        try:
            both = types.FrameExecStrategy(types.FrameAction.SKIP, types.FrameAction.SKIP)
            frames.set_code_exec_strategy(fn.__code__, both)
        except (AttributeError, TypeError):
            frames.skip_code(fn.__code__)


def start(torch: Any) -> Callable[[], None]:
    """Install the hooks; return the function that removes them (and closes open ranges)."""
    from torch.nn.modules import module as modules

    names: weakref.WeakKeyDictionary[Any, str] = weakref.WeakKeyDictionary()
    stack: list[tuple[Any, Any]] = []  # (module, its open range), outermost first
    record = torch.autograd.profiler.record_function

    def name_of(module: Any) -> str:
        found = names.get(module)
        if found is None:
            kind = type(module).__name__
            owner = stack[-1][0] if stack else _caller_module(torch, module)
            attr = None
            if owner is not None:
                attr = next((n for n, m in owner.named_modules() if m is module and n), None)
            found = f"{attr} ({kind})" if attr else kind
            names[module] = found
        return found

    # Under torch.compile dynamo traces global hooks into the graph it builds: they must be
    # nothing there (its tracer failed on the names' dictionary, and a hook it cannot trace
    # would break the workload's graphs), so they return at once while it traces.
    compiling = getattr(getattr(torch, "compiler", None), "is_compiling", None) or (
        lambda: False)

    def pre(module: Any, args: Any) -> None:
        if compiling():
            return
        span = record(MODULE_PREFIX + name_of(module))
        span.__enter__()
        stack.append((module, span))

    def post(module: Any, args: Any, output: Any) -> None:
        if compiling():
            return
        # A module that raised left its range open (its post hook never ran): close those.
        while stack:
            held, span = stack.pop()
            span.__exit__(None, None, None)
            if held is module:
                break

    # ... and dynamo must not compile them either, nor what they call, as frames of their own
    # (a compiled model's call enters them under its frame hook): skipped, with every frame
    # under them, once dynamo is imported.
    when_imported("torch._dynamo.eval_frame", lambda frames: _skip(frames, (pre, post)))
    before = modules.register_module_forward_pre_hook(pre)
    try:
        after = modules.register_module_forward_hook(post, always_call=True)
    except TypeError:  # a torch without always_call
        after = modules.register_module_forward_hook(post)

    def stop() -> None:
        before.remove()
        after.remove()
        while stack:
            stack.pop()[1].__exit__(None, None, None)

    return stop
