"""The kernels in words, defined once for every renderer: the heading, the kinds, the top
kernels and how much of the matrix work ran on tensor cores."""

from __future__ import annotations

from perfstack.analysis.panes.kernels import KernelView, short_name
from perfstack.report.units import fmt_seconds, pct


def kernels_title(k: KernelView) -> str:
    """The kernel view's heading: how many kernels, their summed device time."""
    return (f"Kernels: {k.count} distinct, {fmt_seconds(k.total_s)} on the device "
            "(shares of kernel time)")


def tensor_core_line(k: KernelView) -> str | None:
    """'tensor cores ran 78% of the GEMM, convolution and attention kernel time' (None
    without such kernels), with the part on the CUDA cores and the part the names do not
    tell."""
    if k.matrix_s <= 0:
        return None
    line = (f"tensor cores ran {pct(100 * k.tensor_core_s / k.matrix_s)} of the GEMM, "
            "convolution and attention kernel time")
    unknown = max(k.matrix_s - k.tensor_core_s - k.cuda_core_s, 0.0)
    rest = []
    if k.cuda_core_s > 0:
        rest.append(f"CUDA cores {pct(100 * k.cuda_core_s / k.matrix_s)}")
    if unknown > 1e-4 * k.matrix_s:
        rest.append(f"not told by the name {pct(100 * unknown / k.matrix_s)}")
    return line + (f" ({', '.join(rest)})" if rest else " (from the kernels' names)")


def kernel_kind_cells(k: KernelView) -> list[list[str]]:
    """One row per kind of kernel: kind, share, time, distinct kernels."""
    return [[kind.kind, pct(100 * kind.share), fmt_seconds(kind.time_s), f"{kind.kernels:,}"]
            for kind in k.kinds]


def kernel_cells(k: KernelView) -> list[list[str]]:
    """One row per top kernel: short name, kind, share, calls, mean time."""
    return [[short_name(t.name), t.kind, pct(100 * t.share),
             f"{t.calls:,}" if t.calls is not None else "n/a",
             fmt_seconds(t.mean_s) if t.mean_s is not None else "n/a"] for t in k.top]
