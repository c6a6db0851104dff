"""The ``pyspy`` backend: py-spy sampling of the workload's Python stacks (Python layer).

py-spy attaches to the workload's Python pid as soon as the bootstrap has written it, in
non-blocking mode (it reads the process's memory without stopping it). Three passes, side by
side in one run of the workload:

- the main pass samples running code (py-spy leaves out a thread that waits);
- the GIL pass keeps only samples whose thread holds the GIL (``--gil``), at half the rate by
  default (``--pyspy-gil-rate``): a second sampler at the full rate cost ~3% of wall time on 2
  busy CPUs, at half ~1.5% (docs/performance.md); the GIL share is the ratio of the two, each
  per second of its own run. ``--pyspy-gil-run`` gives it a run of its own (``run_count`` 2),
  so that fewer samplers at a time compete with the workload for the CPUs; measured on 2 vCPUs
  the second sampler's cost was within the noise of one run's overhead, while a second run
  mixes two runs' splits into the budget: one run is the default;
- the wait pass (``--idle``, 50 Hz, ``--pyspy-wait-rate``) samples the main thread whether it
  runs or waits: less the main pass, it says where the main thread waits, and what
  torch.compile waited for counts as compiling (``waits``).

With ``--pyspy-native`` the native frames below Python frames go to the kernel layer, linked
to the Python function that called them.

The package: ``sampler`` starts py-spy, ``speedscope`` reads what it wrote, ``processes``
keeps the workload's own process apart from its children (``--pyspy-subprocesses``),
``shares`` says what share of its running time is in data loading or an optimizer's loop,
``waits`` tells where the main thread waits, ``findings`` says what the samples conclude, and
``backend`` is the backend that joins them into the report.
"""

from __future__ import annotations

from perfstack import hookimpl
from perfstack.plugin.backend import Backend
from perfstack.report import Finding, Report

from . import findings
from .backend import PySpyBackend
from .sampler import GIL_PROFILE_FILE, PROFILE_FILE, gil_rate, py_spy
from .speedscope import frame_key, is_ours, read_profile, summarize

__all__ = ["GIL_PROFILE_FILE", "PROFILE_FILE", "PySpyBackend", "frame_key", "gil_rate",
           "is_ours", "py_spy", "read_profile", "summarize"]


@hookimpl
def perfstack_findings(report: Report) -> list[Finding]:
    """Flag data loading in the workload's own process, and the work of its child
    processes (where py-spy sampled them, else how much CPU it did not see)."""
    return (findings.data_loading(report) + findings.optimizer_loop(report)
            + findings.children(report))


@hookimpl
def perfstack_backends() -> list[Backend]:
    """Provide the pyspy backend."""
    return [PySpyBackend()]
