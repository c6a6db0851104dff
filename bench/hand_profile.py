"""Run a script under torch.profiler by hand, with the torch backend's default settings.

    python bench/hand_profile.py OUT_DIR script.py [ARGS...]

The reference for bench/torch_backend.py: what a user would write without perfstack
(schedule stepped by the optimizer, Chrome trace exported), so the two costs compare directly.
"""

from __future__ import annotations

import os
import runpy
import sys

import torch
from torch.optim.optimizer import register_optimizer_step_post_hook
from torch.profiler import ProfilerActivity, profile, schedule

if __name__ == "__main__":
    out_dir, script, *args = sys.argv[1:]
    traces = []

    def ready(prof: profile) -> None:
        path = os.path.join(out_dir, f"hand-{len(traces)}.json")
        prof.export_chrome_trace(path)
        traces.append(path)

    prof = profile(activities=[ProfilerActivity.CPU], record_shapes=True, with_flops=True,
                   schedule=schedule(skip_first=1, wait=0, warmup=1, active=3, repeat=1),
                   on_trace_ready=ready)
    register_optimizer_step_post_hook(lambda *_: prof.step())
    sys.argv = [script, *args]
    sys.path[0] = os.path.dirname(os.path.abspath(script))
    prof.start()
    try:
        runpy.run_path(script, run_name="__main__")
    finally:
        prof.stop()
    torch.cuda.is_available()
