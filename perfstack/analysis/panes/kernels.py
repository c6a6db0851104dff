"""The kernel view: where a GPU's time goes by kernel and by kind of kernel.

Read from the kernel layer's rows that carry device time (``device``: a GPU trace's kernels,
memcpys and memsets; a CPU run's kernel rows carry none, and have no kernel view). Each
kernel's share is of the summed device time of all of them (kernels on several streams may
overlap, so this is the share of kernel time, not of the wall time: the device breakdown above
it says how busy the device was). A kernel's kind comes from its name, the way HTA and
TraceLens sort them: communication (NCCL/RCCL), memory (memcpy, memset), attention, convolution,
GEMM, reduction (and normalisation, softmax), elementwise; the rest is "other".
"""

from __future__ import annotations

import re

from perfstack.analysis.kernelnames import MATRIX_KINDS, kernel_kind, short_name
from perfstack.records import datarecord
from perfstack.report import Layer, Report

__all__ = ["MATRIX_KINDS", "Kernel", "KernelView", "Kind", "kernel_kind", "kernel_view",
           "short_name"]


@datarecord
class Kernel:
    """One kernel: its time on the device over what was profiled, summed over ranks' rows of
    the same name."""

    name: str
    kind: str
    time_s: float
    share: float  # of all kernels' device time
    calls: int | None
    mean_s: float | None


@datarecord
class Kind:
    """One kind of kernel: its device time, share and how many distinct kernels it holds."""

    kind: str
    time_s: float
    share: float
    kernels: int


@datarecord
class KernelView:
    """The device's kernel time, by kernel (the top ones) and by kind (all of them)."""

    total_s: float
    count: int  # distinct kernels
    top: list[Kernel]
    kinds: list[Kind]
    #: GEMM, convolution and attention time, the part of it in kernels that ran on tensor
    #: cores and the part that did not (the kernel rows say which, from their names:
    #: ``attrs.tensor_cores`` true or false); the rest, the names do not say
    matrix_s: float = 0.0
    tensor_core_s: float = 0.0
    cuda_core_s: float = 0.0
    #: distinct kernels not listed, said under the table (0 with ``--full``, which says
    #: nothing of the rest)
    more: int = 0


def _base(key: str) -> str:
    """A row's kernel name without the ``rankN:`` prefix a job's rows carry."""
    head, sep, rest = key.partition(":")
    return rest if sep and re.fullmatch(r"rank\d+|node\d+", head) else key


def kernel_view(report: Report, top: int = 5) -> KernelView | None:
    """The kernel view of a report, None when no kernel row carries device time."""
    times: dict[str, float] = {}
    calls: dict[str, int | None] = {}
    kinds: dict[str, str] = {}
    tensor: dict[str, bool] = {}
    for row in report.layers.get(Layer.KERNEL, []):
        device = row.values.get("device")
        if device is None or device.value is None:
            continue
        name = _base(row.name)  # the C++ name (demangled where the trace had it mangled)
        times[name] = times.get(name, 0.0) + float(device.value)
        count = row.values.get("calls")
        known = calls.get(name, 0)
        calls[name] = None if count is None or count.value is None or known is None \
            else known + int(count.value)
        kinds[name] = kernel_kind(name, str(row.attrs.get("kind") or ""))
        if isinstance(row.attrs.get("tensor_cores"), bool):
            tensor[name] = bool(row.attrs["tensor_cores"])
    total = sum(times.values())
    if not times or total <= 0:
        return None
    ranked = sorted(times, key=lambda n: -times[n])
    by_kind: dict[str, list[str]] = {}
    for name in ranked:
        by_kind.setdefault(kinds[name], []).append(name)
    kind_rows = sorted((Kind(kind, sum(times[n] for n in names),
                             sum(times[n] for n in names) / total, len(names))
                        for kind, names in by_kind.items()), key=lambda k: -k.time_s)
    top_rows = []
    for name in ranked[:top]:
        n = calls[name]
        top_rows.append(Kernel(name, kinds[name], times[name], times[name] / total, n,
                               times[name] / n if n else None))
    matrix = [n for n in times if kinds[n] in MATRIX_KINDS]
    return KernelView(total, len(times), top_rows, kind_rows,
                      sum(times[n] for n in matrix),
                      sum(times[n] for n in matrix if tensor.get(n) is True),
                      sum(times[n] for n in matrix if tensor.get(n) is False))


def view(report: Report, top: int, full: bool) -> KernelView | None:
    """The pane's figures (its registered entry, ``perfstack.analysis.panes.PANES``): the
    five heaviest kernels, ``top`` with ``full``."""
    kernels = kernel_view(report, top=max(top, 5) if full else 5)
    if kernels is not None and not full:
        kernels.more = kernels.count - len(kernels.top)
    return kernels
