"""The ``torch`` backend: torch.profiler in the workload process, its trace in three layers.

Framework rows are ops with their input shapes (calls, self and total CPU time, device time,
FLOPs, allocated memory); kernel rows are the CUDA kernels each op launched, or on a CPU the
leaf ops that run native code; Python rows and op-to-function links come with ``--torch-stack``.
The Chrome trace is kept as an artifact: it opens in Perfetto (ui.perfetto.dev).
"""

from __future__ import annotations

from perfstack import hookimpl
from perfstack.plugin.backend import Backend
from perfstack.report import Finding, Report

from .backend import TorchBackend
from .smallops import small_ops


@hookimpl
def perfstack_findings(report: Report) -> list[Finding]:
    """Flag steps made of many small ops: the Python and dispatch overhead between them
    outweighs the work in them."""
    return small_ops(report)


@hookimpl
def perfstack_backends() -> list[Backend]:
    """Provide the torch backend."""
    return [TorchBackend()]
