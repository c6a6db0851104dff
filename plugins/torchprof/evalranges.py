"""Inside the workload: an evaluation loop run between training steps as one profiler range,
so that the step it ran in says "evaluation" where it said "torch ops" or "data loading"
(issue 72: a Lightning fit's validation read as "data loading (DataLoader) +307 ms").

A training loop puts its model in eval mode for an evaluation and back in train mode after
it: ``model.eval()`` ... ``model.train()`` by hand, ``on_validation_model_eval`` and
``on_validation_model_train`` in Lightning. ``nn.Module.train`` (``eval()`` calls it) is
wrapped: its outermost call switching a model to eval mode, once a training step was counted,
opens a ``record_function`` range ``perfstack#evaluation``; the next outermost call back to
train mode closes it, or the first module called in train mode (Lightning restores each
module's mode by setting its ``training`` flag, not by ``train()``: a global forward pre-hook,
there only while the range is open, sees it), or the next step. The trace reader
(``opgroups``) counts such a range as an evaluation only where no backward pass and no
optimizer step ran in it (a model kept in eval mode while it trains, to freeze its batch
norms, is training). Only torch and the standard library: this runs in the workload.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

#: The range's name, in the trace.
EVALUATION = "perfstack#evaluation"


def start(torch: Any, marks: Any) -> Callable[[], None]:
    """Wrap ``nn.Module.train``; ``marks`` is perfstack's step counter (its steps so far, its
    step callbacks, the thread that steps). Return the function that unwraps it."""
    module = torch.nn.Module
    original = module.train
    state: dict[str, Any] = {"depth": 0, "open": None, "hook": None}

    def close() -> None:
        record, state["open"] = state["open"], None
        hook, state["hook"] = state["hook"], None
        if hook is not None:
            hook.remove()
        if record is not None:
            with torch._C.DisableTorchFunctionSubclass():
                torch.ops.profiler._record_function_exit._RecordFunction(record)

    def training_again(called: Any, args: Any) -> None:
        if called.training:
            close()

    def open_range() -> None:
        state["open"] = torch.ops.profiler._record_function_enter_new(EVALUATION, None)
        state["hook"] = torch.nn.modules.module.register_module_forward_pre_hook(
            training_again)

    def train(self: Any, mode: bool = True) -> Any:
        outer = state["depth"] == 0
        state["depth"] += 1
        try:
            return original(self, mode)
        finally:
            state["depth"] -= 1
            stepper = marks.state.stepper
            if outer and (stepper is None or stepper == threading.get_ident()):
                if mode:
                    close()
                elif state["open"] is None and marks.state.count > 0:
                    open_range()

    module.train = train
    unhook = marks.on_step(close, first=True)  # before the profiler's step: a step ends it

    def stop() -> None:
        close()
        module.train = original
        unhook()

    return stop
