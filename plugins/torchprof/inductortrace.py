"""Inside the workload (the torch backend's run): ask inductor to say where its kernels come
from, so the trace's compiled kernels can be traced to the user's lines.

Two settings of ``torch._inductor.config``, made the moment the workload imports it (nothing
is imported otherwise, and the settings exist only where inductor does):

- ``trace.provenance_tracking_level = 1``: each compile records, for every kernel it
  generates (``triton_poi_fused_mul_0``, ``cpp_fused_relu_0``, ``extern_kernels.mm``), the
  user's source lines of the graph nodes it fuses; dynamo's compile record keeps that as
  ``inductor_provenance``, which the compile backend's rider saves (``compile.json``);
- ``cpp.enable_kernel_profile = True``: a C++ kernel inductor generates for the CPU is a
  profiler range of its own (``graph_0_cpp_fused_relu_0``); without it, its time is the
  unnamed remainder of the compiled graph's call. (Triton kernels on a GPU are ranges and
  device kernels already.)

Only in the torch backend's run: provenance is part of inductor's cache key, so the run
compiles what the baseline runs found in the cache, and the baseline runs, whose compile time
the compile layer reports, are left as the user's program makes them. Standard library only.
"""

from __future__ import annotations

import contextlib
from typing import Any

from perfstack.inprocess.afterimport import when_imported

CONFIG = "torch._inductor.config"


def _set(config: Any) -> None:
    trace, cpp = getattr(config, "trace", None), getattr(config, "cpp", None)
    if trace is not None and hasattr(trace, "provenance_tracking_level"):
        if not trace.provenance_tracking_level:
            trace.provenance_tracking_level = 1
    elif trace is not None and hasattr(trace, "provenance_tracking"):  # older torch: a flag
        trace.provenance_tracking = True
    if cpp is not None and hasattr(cpp, "enable_kernel_profile"):
        cpp.enable_kernel_profile = True


def start() -> None:
    """Make the two settings once inductor's config is imported (now, if it is)."""
    with contextlib.suppress(Exception):  # a torch without them runs as it is
        when_imported(CONFIG, _set)
