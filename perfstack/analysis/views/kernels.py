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

from perfstack.records import datarecord
from perfstack.report import Layer, Report

#: Kinds, in the order a name is tried against them (convolution before GEMM: cuDNN and
#: CUTLASS convolutions are implicit GEMMs and name both).
KINDS: tuple[tuple[str, re.Pattern[str]], ...] = (
    ("communication", re.compile(r"nccl|rccl|allreduce|all_reduce|allgather|all_gather|"
                                 r"reducescatter|reduce_scatter|alltoall|sendrecv|broadcast",
                                 re.I)),
    ("memory", re.compile(r"^(memcpy|memset)\b", re.I)),
    ("attention", re.compile(r"flash|fmha|attention|attn|sdpa|\bmha", re.I)),
    ("convolution", re.compile(r"conv|dgrad|wgrad|fprop|winograd|implicit_gemm|"
                               r"implicit_convolve", re.I)),
    ("GEMM", re.compile(r"gemm|gemv|cutlass|cublas|xmma|matmul|wgmma|mfma|tensorop|^cijk_|"
                        r"s\d{4}gemm|_nn_|_nt_|_tn_", re.I)),
    ("reduction", re.compile(r"reduce|reduction|softmax|norm|bn_|_bn|batch_norm|layer_norm|"
                             r"argmax|argmin|topk|cumsum|scan|sum_|mean", re.I)),
    ("elementwise", re.compile(r"elementwise|pointwise|vectorized|unrolled|triton_poi|"
                               r"functor|_kernel_impl|multi_tensor_apply|index|scatter|gather",
                               re.I)),
)
MEMORY_CATEGORIES = ("gpu_memcpy", "gpu_memset")
#: The kinds of kernel that can run on tensor cores.
MATRIX_KINDS = ("GEMM", "convolution", "attention")


def kernel_kind(name: str, category: str | None = None) -> str:
    """The kind of a device kernel, from its trace category and its name."""
    if category in MEMORY_CATEGORIES:
        return "memory"
    return next((kind for kind, pattern in KINDS if pattern.search(name)), "other")


def _top_level(text: str, stop: str) -> int:
    """The index of the first ``stop`` character outside <...>, or len(text)."""
    depth = 0
    for i, ch in enumerate(text):
        if ch in stop and depth == 0 and i > 0:
            return i
        if ch == "<":
            depth += 1
        elif ch == ">":
            depth = max(depth - 1, 0)
    return len(text)


def short_name(name: str) -> str:
    """A kernel's name as a table shows it: no ``void``, parameter list or namespaces, and a
    generic wrapper (``cutlass::Kernel<cutlass_80_tensorop_s1688gemm_...>``) named by what
    it wraps. The report keeps the whole name."""
    text = name.removeprefix("void ").strip()
    text = text[:_top_level(text, "(")]
    cut = text.find("<")
    base, args = (text, "") if cut < 0 else (text[:cut], text[cut:])
    base = base.rsplit("::", 1)[-1]
    if base.lower() in ("kernel", "kernel2", "device_kernel") and args:
        inner = args[1:]
        inner = inner[:_top_level(inner, ",>")]
        return short_name(inner) if inner else base + args
    return base + args


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
    #: GEMM and convolution time, and the part of it in kernels that ran on tensor cores (the
    #: trace's kernel rows say which: ``attrs.tensor_cores``)
    matrix_s: float = 0.0
    tensor_core_s: float = 0.0


def _base(key: str) -> str:
    """A row's kernel name without the ``rankN:`` prefix a job's rows carry."""
    head, sep, rest = key.partition(":")
    return rest if sep and re.fullmatch(r"rank\d+|node\d+", head) else key


def kernel_view(report: Report, top: int = 5) -> KernelView | None:
    """The kernel view of a report, None when no kernel row carries device time."""
    times: dict[str, float] = {}
    calls: dict[str, int | None] = {}
    kinds: dict[str, str] = {}
    tensor: set[str] = set()
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
        if row.attrs.get("tensor_cores"):
            tensor.add(name)
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
                      sum(times[n] for n in matrix), sum(times[n] for n in matrix if n in tensor))
