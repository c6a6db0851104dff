"""What a GPU kernel's name says: its kind, whether it ran on tensor (matrix) cores, and for a
copy its direction and the host memory it used.

Names are what the vendors' libraries give their kernels, as traces record them (Kineto,
rocprof): cuBLAS (``volta_sgemm_*``, ``sm80_xmma_gemm_*``, Hopper and Blackwell's
``nvjet_sm90_*`` / ``nvjet_sm100_*``), CUTLASS 2 and 3 (``cutlass_80_tensorop_*``,
``cutlass3x_sm90_tensorop_*``), cuDNN (``sm90_xmma_fprop_*``, its v9 engines
``cudnn_generated_fort_native_sdpa_*``), FlashAttention 2 to 4 (``flash_fwd_kernel``,
``flash::FlashAttnFwdSm90``), torch's own (``at::native::*``), Triton and inductor
(``triton_poi_*``, ``triton_red_*``, ``triton_tem_fused_mm_*``), and AMD's rocBLAS /
hipBLASLt (Tensile's ``Cijk_*``) and Composable Kernel (``ck::kernel_gemm_xdl_*``). The
test table (tests/test_kernelnames.py) holds names taken from real traces, ours and public
ones. A pure module: no report, no trace.
"""

from __future__ import annotations

import re

#: Kinds, in the order a name is tried against them: attention before convolution and GEMM
#: (cuDNN's attention engines and FlashAttention run GEMMs inside), convolution before GEMM
#: (cuDNN and CUTLASS convolutions are implicit GEMMs and name both).
KINDS: tuple[tuple[str, re.Pattern[str]], ...] = (
    ("communication", re.compile(r"nccl|rccl|allreduce|all_reduce|allgather|all_gather|"
                                 r"reducescatter|reduce_scatter|alltoall|sendrecv|broadcast",
                                 re.I)),
    ("memory", re.compile(r"^(memcpy|memset)\b", re.I)),
    ("attention", re.compile(r"flash|fmha|attention|attn|sdpa|\bmha|paged_?attention", re.I)),
    ("convolution", re.compile(r"conv|dgrad|wgrad|fprop|winograd|implicit_gemm|"
                               r"implicit_convolve|[sh]cudnn_", re.I)),
    ("GEMM", re.compile(r"gemm|gemv|cutlass|cublas|xmma|gmma|matmul|wgmma|mfma|tensorop|"
                        r"nvjet|^(custom_)?cijk_|gemm_xdl|triton_tem_fused_.*(mm|addmm)|"
                        r"s\d{4}gemm|_nn_|_nt_|_tn_", re.I)),
    ("reduction", re.compile(r"reduce|reduction|softmax|norm|bn_|_bn|batch_norm|layer_norm|"
                             r"argmax|argmin|topk|cumsum|scan|sum_|mean|triton_(red|per)_",
                             re.I)),
    ("elementwise", re.compile(r"elementwise|pointwise|vectorized|unrolled|triton_poi|"
                               r"functor|_kernel_impl|multi_tensor_apply|index|scatter|gather|"
                               r"nchwtonhwc|nhwctonchw|transpose|permute|cat_?array", re.I)),
)
#: The trace categories of copies and fills (Kineto's).
MEMORY_CATEGORIES = ("gpu_memcpy", "gpu_memset")
#: The kinds of kernel that can run on tensor cores.
MATRIX_KINDS = ("GEMM", "convolution", "attention")

#: Names that say the kernel issues matrix instructions: NVIDIA's MMA families (``hmma``,
#: ``imma``, Hopper's ``gmma``/``wgmma``, CUTLASS's ``tensorop``, the instruction shapes
#: ``s1688``/``h16816``...), TF32/BF16/FP16/FP8 variants of cuBLAS and cuDNN's ``xmma``
#: kernels, cuBLAS's JIT GEMMs of Hopper and Blackwell (``nvjet``: tensor-core types only),
#: FlashAttention and cuDNN's attention engines (fp16/bf16/fp8 only), AMD's matrix cores
#: (Tensile's ``_MI16x16x1``, CK's ``xdl`` (xdlops), ``mfma``, ``wmma``).
_TENSOR = re.compile(
    r"tensorop|hmma|imma|gmma|wgmma|wmma|mfma|_mma_|s1688|s16816|h1688|h16816|i8816|"
    r"tf32|bf16|f16|fp16|e4m3|e5m2|fp8|nvjet|flash_?(fwd|bwd|fprop|bprop|attn)|"
    r"flashattn|_mi\d+x\d+x\d+|gemm_xdl|_xdl_|xdlops", re.I)
#: Names that say it did not: FP32 fused multiply-add on the CUDA cores (``..._ffma``),
#: CUTLASS's SIMT GEMMs, the classic SGEMM/DGEMM kernels, and the FP32 variant of torch's
#: memory-efficient attention.
_NOT_TENSOR = re.compile(r"ffma|_simt_|simt_sgemm|(^|_)(volta|maxwell|kepler|ampere)_[sd]gemm|"
                         r"^[sd]gemm|dgemm|fmha_cutlass[fb]_f32|scudnn_", re.I)


def kernel_kind(name: str, category: str | None = None) -> str:
    """The kind of a device kernel, from its trace category and its name."""
    if category in MEMORY_CATEGORIES:
        return "memory"
    return next((kind for kind, pattern in KINDS if pattern.search(name)), "other")


def tensor_cores(name: str) -> bool | None:
    """Whether a matrix kernel ran on tensor (matrix) cores, as its name says: True, False,
    or None where the name does not say (a Triton template, a library's generic name)."""
    if _NOT_TENSOR.search(name):
        return False
    if _TENSOR.search(name):
        return True
    return None


#: Kineto's name of a copy: ``Memcpy HtoD (Pageable -> Device)``.
_COPY = re.compile(r"^Memcpy (?P<dir>HtoD|DtoH|DtoD|HtoH|PtoP|DtoA|AtoD)"
                   r"(?: \((?P<src>\w+) -> (?P<dst>\w+)\))?")
#: Copies between the host and a device (or between devices): their roof is the link.
LINK_DIRECTIONS = ("HtoD", "DtoH", "HtoH", "PtoP")


def copy_of(name: str) -> tuple[str, str | None] | None:
    """A copy's direction (``HtoD``, ``DtoH``, ``DtoD``, ...) and the host memory it used
    (``pageable``, ``pinned``, None where neither end is the host or the trace does not say),
    from Kineto's name; None for anything but a copy."""
    m = _COPY.match(name)
    if m is None:
        return None
    ends = {str(m["src"] or "").lower(), str(m["dst"] or "").lower()}
    host = "pageable" if "pageable" in ends else "pinned" if "pinned" in ends else None
    return m["dir"], host


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


#: Generic wrappers a kernel is named by what they wrap: CUTLASS's ``Kernel``/``Kernel2``/
#: ``device_kernel``, FlashAttention 3's ``enable_sm90_or_later``.
_WRAPPER = re.compile(r"^(kernel2?|device_kernel|enable_sm\w*)$", re.I)


def short_name(name: str) -> str:
    """A kernel's name as a table shows it: no ``void``, parameter list or namespaces, and a
    generic wrapper (``cutlass::Kernel<cutlass_80_tensorop_s1688gemm_...>``) named by what
    it wraps. A copy or a fill keeps its whole name: ``(Pageable -> Device)`` is what its fix
    depends on. The report keeps the whole name."""
    if name.startswith(("Memcpy ", "Memset ")):
        return name
    text = name.removeprefix("void ").strip()
    text = text[:_top_level(text, "(")]
    cut = text.find("<")
    base, args = (text, "") if cut < 0 else (text[:cut], text[cut:])
    base = base.rsplit("::", 1)[-1]
    if _WRAPPER.match(base) and args:
        inner = args[1:]
        inner = inner[:_top_level(inner, ",>")]
        return short_name(inner) if inner else base + args
    return base + args
