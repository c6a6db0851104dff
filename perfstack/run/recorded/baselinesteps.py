"""A perfstack run folder given to analyze (or a backend's folder inside one): its baseline
runs' step time beside the traces read, as the run's own report has it.

A trace alone holds the steps as the profiler slowed them: torch.profiler costs the host 1.7x
to 3x on small-op models, and the device then looks idle, waiting for launches, where
unprofiled it is busy (the H200's autocast loop: 41% busy under the profiler, 95% of a step
without it). The run folder's baseline runs timed the same steps with no profiler, on the
device's clock where the workload ran CUDA (``workload-steps.json``, their warm-up and
measured steps in ``bootstrap.json``): read here, the GPU verdict takes its busy share of a
step without the profiler, as ``perfstack run``'s does.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path

from perfstack.report import Metric
from perfstack.run import assembly
from perfstack.runfolder import rundir
from perfstack.runfolder.filenames import BOOTSTRAP_CONFIG_FILE, STEPS_FILE

#: A baseline run's folder in a run folder: baseline-1, baseline-2, ...
BASELINE_GLOB = "baseline-*"


def run_folder(paths: Sequence[Path]) -> Path | None:
    """The one perfstack run folder the paths name (the folder itself, or a backend's folder
    in it) whose baseline runs marked steps; None for none, or for several (their baselines
    are not one workload's)."""
    found = {folder.resolve() for path in paths for folder in (path, path.parent)
             if folder.is_dir() and any(folder.glob(f"{BASELINE_GLOB}/{STEPS_FILE}"))}
    return found.pop() if len(found) == 1 else None


def _window(baseline: Path) -> tuple[int, int | None]:
    """The run's --steps window (warm-up, measured) as its bootstrap was told, or (0, None)."""
    try:
        steps = json.loads((baseline / BOOTSTRAP_CONFIG_FILE).read_text("utf-8"))["steps"]
        return int(steps["warmup"]), int(steps["measured"])
    except (OSError, ValueError, KeyError, TypeError):
        return 0, None


def baseline_steps(paths: Sequence[Path]) -> list[Metric]:
    """``step_time`` of the run folder's baseline runs (the median of their measured steps),
    or nothing where the paths name no one run folder or its baselines timed no step."""
    folder = run_folder(paths)
    if folder is None:
        return []
    runs = sorted(p for p in folder.glob(BASELINE_GLOB) if (p / STEPS_FILE).is_file())
    warmup, measured = _window(runs[0])
    found = assembly.step_metric([rundir.RunFolder(p).step_times() for p in runs],
                                 warmup, measured)
    for metric in found:
        metric.description = (f"{metric.description}: of the run folder {folder.name}'s "
                              f"{len(runs)} baseline run(s)")
    return found
