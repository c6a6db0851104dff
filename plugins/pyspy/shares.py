"""Shares of the main thread's running time with some code on the stack: torch's data loading
(the step waiting for its batch), an optimizer's per-parameter loop; the wait pass
(``waits``) splits its own samples, waits included, the same way."""

from __future__ import annotations

from typing import Any

from perfstack.report import Better, Metric

from ..lateimports import is_import
from .compiling import CompilerFrames
from .speedscope import SOURCE, _is_native, _main_profile, is_ours

#: The files of torch's data loading (DataLoader, its iterators, fetchers and collate).
DATA_LOADING = "torch/utils/data/"
#: torch's optimizers run their update one parameter at a time in these functions unless
#: built with foreach=True or fused=True (_single_tensor_adam, _single_tensor_sgd, ...).
OPTIMIZER_LOOP = ("torch/optim/", "_single_tensor_")


def running_with(frames: list[dict[str, Any]], profiles: list[dict[str, Any]],
                 *marks: list[bool]) -> tuple[float, list[float]]:
    """The main thread's running seconds (its samples outside imports, set-up, teardown and
    torch.compile), and of them the seconds with a frame of each ``marks`` (a flag per frame)
    on the stack. The wait pass's profiles give the same split of its time, waits included."""
    profile = _main_profile(profiles)
    running, marked = 0.0, [0.0] * len(marks)
    if profile is None:
        return running, marked
    compiling = CompilerFrames(frames)
    for stack, weight in zip(profile.get("samples", []), profile.get("weights", []),
                             strict=False):
        python = [i for i in stack if not _is_native(frames[i]) and not is_ours(frames[i])]
        if not python or compiling(stack) or any(is_import(frames[i]) for i in stack):
            continue
        running += weight
        for k, mark in enumerate(marks):
            if any(mark[i] for i in python):
                marked[k] += weight
    return running, marked


def loading_frames(frames: list[dict[str, Any]]) -> list[bool]:
    """Per frame: torch's data loading at work (not its modules' import)."""
    return [DATA_LOADING in str(f.get("file") or "") and f.get("name") != "<module>"
            for f in frames]


def running_shares(frames: list[dict[str, Any]],
                    profiles: list[dict[str, Any]]) -> list[Metric]:
    """Shares of the main thread's running time with some code on the stack: torch's data
    loading (the step waiting for its batch), an optimizer's per-parameter loop. Nothing when
    the main thread ran nothing."""
    looping = [OPTIMIZER_LOOP[0] in str(f.get("file") or "")
               and str(f.get("name") or "").startswith(OPTIMIZER_LOOP[1]) for f in frames]
    running, (in_loading, in_loop) = running_with(frames, profiles, loading_frames(frames),
                                                  looping)
    if running <= 0:
        return []
    out = [Metric("data_loading_share", 100 * in_loading / running, "%", "python", SOURCE,
                  Better.LOWER, detail=True,
                  description="of the main thread's running time (start-up, teardown and "
                  "torch.compile aside) with torch's DataLoader on the stack")]
    if in_loop:
        out.append(Metric("optimizer_loop_share", 100 * in_loop / running, "%", "python",
                          SOURCE, Better.LOWER, detail=True,
                          description="of the main thread's running time in a torch "
                          "optimizer's per-parameter update (_single_tensor_*: no foreach, "
                          "no fused)"))
    return out
