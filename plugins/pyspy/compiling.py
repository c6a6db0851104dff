"""Whether a sampled stack is torch.compile at work: its call (which imports the compiler),
dynamo compiling a frame, inductor compiling a graph (a backward one too, at its first
backward call), or a generated kernel being built or autotuned at its first run. Running the
compiled code is none of these: it goes through other files (``eval_frame``'s wrapper,
inductor's ``output_code``)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ..lateimports import is_import

#: (a file's ending, its functions that compile; None: every function but the module's own
#: code, which runs when the file is imported).
COMPILER_FRAMES: tuple[tuple[str, frozenset[str] | None], ...] = (
    ("torch/__init__.py", frozenset({"compile"})),  # torch.compile(model): the compiler's import
    ("torch/_dynamo/convert_frame.py", None),  # a frame's compile, the backend's included
    ("torch/_inductor/compile_fx.py", None),  # a graph's, the lazy backward one's included
    ("torch/_inductor/runtime/triton_heuristics.py",
     frozenset({"precompile", "_precompile_config", "benchmark_all_configs",
                "autotune_to_one_config", "_make_launchers"})),
    ("triton/compiler/compiler.py", frozenset({"compile"})),
)


def is_compiler(frame: dict[str, Any]) -> bool:
    """Whether a speedscope frame is one of the compiler's entry points."""
    file = str(frame.get("file") or "").replace("\\", "/")
    name = str(frame.get("name") or "")
    for ending, functions in COMPILER_FRAMES:
        if file.endswith(ending):
            return name != "<module>" if functions is None else name in functions
    return False


class CompilerFrames:
    """Which samples of one profile are torch.compile at work: a compiler frame outside any
    import. The compiler's own modules running as they are imported (``import torch._dynamo``
    made by an optimizer's constructor) are importing, not compiling, whatever their frames
    are named (py-spy names some ``TODO_UNKNOWN``); torch.compile's call importing the
    compiler is compiling."""

    def __init__(self, frames: list[dict[str, Any]]) -> None:
        self.compiler = [is_compiler(f) for f in frames]
        self.importing = [is_import(f) for f in frames]

    def __call__(self, stack: Sequence[int]) -> bool:
        """Whether a sample (its frames' indices, outermost first) is compiling."""
        for i in stack:
            if self.compiler[i]:
                return True
            if self.importing[i]:
                return False
        return False
