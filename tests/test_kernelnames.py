"""Kernel names of today's GPUs read as what they are: a table of names taken from real traces
(ours recorded on an H200 in tests/fixtures/gpu-runs, the A100 / V100 / MI250 ones in
tests/fixtures/gpu-traces) and from public profiles of Hopper, Blackwell and AMD Instinct
machines (names as their traces print them), each with its kind and whether its name says it
ran on tensor (matrix) cores."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest

from perfstack.analysis.kernelnames import (
    copy_of,
    kernel_kind,
    short_name,
    tensor_cores,
)

FIXTURES = Path(__file__).parent / "fixtures"

#: name -> (kind, tensor cores: True, False, or None where the name does not say)
TABLE: dict[str, tuple[str, bool | None]] = {
    # cuBLAS on Hopper and Blackwell (public H100/H200/B200 profiles)
    "nvjet_sm90_tst_192x16_64x16_4x1_v_bz_TNT": ("GEMM", True),
    "nvjet_sm90_tst_64x8_64x16_4x1_v_bz_TNT": ("GEMM", True),
    "nvjet_sm90_tst_32x64_64x16_1x2_h_bz_splitK_TNN": ("GEMM", True),
    "nvjet_sm100_tst_128x256_64x6_2x1_2cta_v_bz_TNT": ("GEMM", True),
    "nvjet_sm100_tst_24x64_64x16_4x1_v_bz_TNN": ("GEMM", True),
    "sm80_xmma_gemm_f32f32_f32f32_f32_tn_n_tilesize128x128x8_stage3_ffma": ("GEMM", False),
    # cuBLAS and cuDNN on our H200 (tests/fixtures/gpu-runs/recheck)
    "sm90_xmma_gemm_f32f32_tf32f32_f32_tn_n_tilesize128x128x32_warpgroupsize1x1x1_execute_"
    "segment_k_off_kernel__5x_cublas": ("GEMM", True),
    "sm80_xmma_gemm_f32f32_f32f32_f32_nt_n_tilesize32x32x8_stage3_warpsize1x2x1_ffma_aligna4_"
    "alignc4_execute_kernel__5x_cublas": ("GEMM", False),
    "sm90_xmma_fprop_implicit_gemm_f32f32_tf32f32_f32_nhwckrsc_nhwc_tilesize128x128x32_"
    "warpgroupsize1x1x1_g1_execute_segment_k_off_kernel__5x_cudnn": ("convolution", True),
    "sm90_xmma_wgrad_indexed_implicit_gemm_f32f32_tf32f32_f32_nhwckrsc_nhwc_tilesize128x128x32_"
    "warpgroupsize1x1x1_g1_execute_split_k_kernel__5x_cudnn": ("convolution", True),
    "void cutlass::Kernel2<cutlass_80_tensorop_s1688gemm_128x128_32x3_nt_align4>(cutlass_80_"
    "tensorop_s1688gemm_128x128_32x3_nt_align4::Params)": ("GEMM", True),
    "void cutlass::Kernel2<cutlass_80_simt_sgemm_64x64_8x5_nn_align1>(cutlass_80_simt_sgemm_"
    "64x64_8x5_nn_align1::Params)": ("GEMM", False),
    # A100's (tests/fixtures/gpu-traces/a100_nccl)
    "ampere_sgemm_32x128_nt": ("GEMM", False),
    "cudnn_infer_ampere_scudnn_128x64_relu_xregs_large_nn_v1": ("convolution", False),
    "sm80_xmma_dgrad_implicit_gemm_tf32f32_tf32f32_f32_nhwckrsc_nhwc_tilesize128x128x16_stage4_"
    "warpsize2x2x1_g1_tensor16x8x8_execute_kernel_cudnn_infer": ("convolution", True),
    "volta_sgemm_64x64_nt": ("GEMM", False),
    # CUTLASS 3 (Hopper): the generator's names
    "cutlass3x_sm90_tensorop_s64x128x16gemm_bf16_bf16_f32_bf16_bf16_128x128x64_2x1x1_0_ntn_"
    "align8_warpspecialized_pingpong_epi_tma": ("GEMM", True),
    "cutlass3x_sm90_tensorop_gemm_f16_f16_f32_f16_f32_128x128x64_2x1x1_0_ntn_align8":
        ("GEMM", True),
    # attention: FlashAttention 2 and 3, cuDNN 9's engines, torch's memory-efficient kernel
    "void flash_fwd_kernel<Flash_fwd_kernel_traits<128, 128, 128, 4, false, false, "
    "cutlass::bfloat16_t> >(Flash_fwd_params)": ("attention", True),
    "void pytorch_flash::flash_fwd_kernel<Flash_fwd_kernel_traits<128> >(Params)":
        ("attention", True),
    "void cutlass::device_kernel<flash::enable_sm90_or_later<flash::FlashAttnFwdSm90<flash::"
    "CollectiveMainloopFwdSm90<2, cute::tuple<cute::C<1>, cute::C<1>, cute::C<1> > > > > >"
    "(flash::FlashAttnFwdSm90<>::Params)": ("attention", True),
    "cudnn_generated_fort_native_sdpa_sm90_flash_fprop_wgmma_f16_knob_7_64x128x128_4x":
        ("attention", True),
    "cudnn_generated_fort_native_sdpa_sm100_flash_fprop_f16": ("attention", True),
    "fmha_cutlassF_bf16_aligned_64x128_rf_sm80(PyTorchMemEffAttention::AttentionKernel<"
    "cutlass::bfloat16_t, cutlass::arch::Sm80, true, 64, 128, 128, true, true>::Params)":
        ("attention", True),
    "fmha_cutlassF_f32_aligned_64x64_rf_sm80(PyTorchMemEffAttention::AttentionKernel<float, "
    "cutlass::arch::Sm80, true, 64, 64, 64, true, true>::Params)": ("attention", False),
    # Triton and inductor
    "triton_tem_fused_mm_0": ("GEMM", None),
    "triton_tem_fused_addmm_relu_1": ("GEMM", None),
    "triton_poi_fused_addmm_relu_threshold_backward_0": ("elementwise", None),
    "triton_red_fused_mean_1": ("reduction", None),
    "triton_per_fused_mean_2": ("reduction", None),
    # AMD: rocBLAS / hipBLASLt (Tensile) and Composable Kernel
    "Cijk_Alik_Bljk_SB_Bias_AS_SAV_UserArgs_MT64x16x32_MI16x16x1_SN_LDSB0_AFC1_AFEM1":
        ("GEMM", True),
    "Custom_Cijk_Alik_Bljk_BBS_BH_Bias_HAS_SAV_UserArgs_MT64x16x64_MI16x16x1_SN_LDSB0":
        ("GEMM", True),
    "Cijk_Alik_Bljk_SB_Bias_AS_SAV_UserArgs_MT64x64x16": ("GEMM", None),
    "void ck::kernel_gemm_xdl_cshuffle_v3<ck::GridwiseGemmMultiD_ABScale_xdl_cshuffle_v3<"
    "ck::tensor_layout::gemm::RowMajor> >(Argument)": ("GEMM", True),
    # the rest of a step
    "ncclKernel_AllReduce_RING_LL_Sum_float(ncclDevComm*, unsigned long, ncclWork*)":
        ("communication", None),
    "void at::native::vectorized_elementwise_kernel<4, at::native::CUDAFunctor_add<float>, "
    "std::array<char*, 3ul> >(int, at::native::CUDAFunctor_add<float>)": ("elementwise", None),
    "void cudnn::engines_precompiled::nchwToNhwcKernel<float, float, float, false, true, "
    "(cudnnKernelDataType_t)0>(cudnn::engines_precompiled::nchw2nhwc_params_t<float>)":
        ("elementwise", None),
    "void at::native::reduce_kernel<512, 1, at::native::ReduceOp<float> >(float)":
        ("reduction", None),
    "void cudnn::bn_bw_1C11_kernel_new<float, float, float2, 128, true, 1>(float)":
        ("reduction", None),
}


@pytest.mark.parametrize("name", list(TABLE))
def test_a_kernel_name_says_its_kind_and_its_cores(name: str) -> None:
    kind, cores = TABLE[name]
    assert kernel_kind(name) == kind
    if kind in ("GEMM", "convolution", "attention"):
        assert tensor_cores(name) is cores


def _trace_kernels(path: Path) -> set[str]:
    with gzip.open(path, "rt") as fh:
        return {e["name"] for e in json.load(fh)["traceEvents"] if e.get("cat") == "kernel"}


def test_every_matrix_kernel_of_our_h200_runs_is_read() -> None:
    """The H200's own traces: no GEMM or convolution of them is 'other', and each of their
    kernels named for TF32 or for MMA instructions is on the tensor cores, the ``ffma`` and
    SIMT ones are not."""
    names: set[str] = set()
    for trace in (FIXTURES / "gpu-runs").rglob("*.pt.trace.json.gz"):
        names |= _trace_kernels(trace)
    matrix = [n for n in names if any(w in n for w in ("gemm", "xmma", "tensorop"))]
    assert len(matrix) > 20
    for name in matrix:
        assert kernel_kind(name) in ("GEMM", "convolution"), name
        said = tensor_cores(name)
        if "tf32" in name or "tensorop" in name:
            assert said is True, name
        if "ffma" in name or "simt" in name:
            assert said is False, name


def test_a_copy_keeps_its_direction_and_host_memory() -> None:
    assert copy_of("Memcpy HtoD (Pageable -> Device)") == ("HtoD", "pageable")
    assert copy_of("Memcpy DtoH (Device -> Pinned)") == ("DtoH", "pinned")
    assert copy_of("Memcpy DtoD (Device -> Device)") == ("DtoD", None)
    assert copy_of("Memcpy HtoD (Host -> Device)") == ("HtoD", None)  # ROCm's
    assert copy_of("Memset (Device)") is None
    assert copy_of("ampere_sgemm_32x128_nt") is None
    # the table shows it whole: what the fix depends on is in the parenthesis
    assert short_name("Memcpy HtoD (Pageable -> Device)") == "Memcpy HtoD (Pageable -> Device)"


def test_short_names_unwrap_generic_wrappers() -> None:
    fa3 = next(n for n in TABLE if "FlashAttnFwdSm90" in n)
    assert short_name(fa3).startswith("FlashAttnFwdSm90<")
    assert short_name("void cutlass::Kernel2<cutlass_80_simt_sgemm_64x64_8x5_nn_align1>(x)") \
        == "cutlass_80_simt_sgemm_64x64_8x5_nn_align1"
