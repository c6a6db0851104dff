"""Each op's cost formula against a count made by hand (plugins/torchprof/opcost.py)."""

from __future__ import annotations

from dataclasses import replace

import pytest
from perfstack_plugins.torchprof.opcost import Cost, cost

F, H, B, L = "float", "c10::Half", "c10::BFloat16", "long int"


def _c(found: Cost) -> Cost:
    """The cost without its kind (test_kinds checks those)."""
    return replace(found, kind=None)


def test_matrix_products() -> None:
    # 64x32 @ 32x16: 64*16 outputs, each 32 multiply-adds; reads A and B, writes C, 4 B each
    assert _c(cost("aten::mm", [[64, 32], [32, 16]], [F, F])) == Cost(
        2 * 64 * 16 * 32, 4 * (64 * 32 + 32 * 16 + 64 * 16), "fp32")
    # addmm(bias, A, B, beta, alpha): the bias is read too; the scalars are not tensors
    assert _c(cost("aten::addmm", [[16], [64, 32], [32, 16], [], []],
                [F, F, F, "Scalar", "Scalar"])) == Cost(
        2 * 64 * 16 * 32, 4 * (16 + 64 * 32 + 32 * 16 + 64 * 16), "fp32")
    # bmm in bf16: 8 batches of 10x20 @ 20x30, 2 bytes an element
    assert _c(cost("aten::bmm", [[8, 10, 20], [8, 20, 30]], [B, B])) == Cost(
        2 * 8 * 10 * 30 * 20, 2 * 8 * (10 * 20 + 20 * 30 + 10 * 30), "bf16")
    assert _c(cost("aten::baddbmm", [[8, 10, 30], [8, 10, 20], [8, 20, 30]], [H, H, H])).flops \
        == 2 * 8 * 10 * 30 * 20


def test_convolution_is_torchs_count_and_moves_input_weight_output() -> None:
    # 2x3x8x8 input, 4x3x3x3 weight, stride 1, padding 1: output 2x4x8x8;
    # each output element is 3*3*3 multiply-adds
    dims = [[2, 3, 8, 8], [4, 3, 3, 3], [4], [], [], [], []]
    types = [F, F, F, "ScalarList", "ScalarList", "ScalarList", "Int"]
    inputs = ["", "", "", "[1, 1]", "[1, 1]", "[1, 1]", "1"]
    found = cost("aten::conv2d", dims, types, inputs)
    assert found.flops == 2 * (2 * 4 * 8 * 8) * (3 * 3 * 3)
    assert found.bytes == 4 * (2 * 3 * 8 * 8 + 4 * 3 * 3 * 3 + 4 + 2 * 4 * 8 * 8)
    # stride 2, no padding: (8 - 3) // 2 + 1 = 3 positions a side
    assert cost("aten::conv2d", dims, None, ["", "", "", "[2, 2]", "[0, 0]", "[1, 1]", "1"]).flops \
        == 2 * (2 * 4 * 3 * 3) * 27


def test_attention_counts_the_two_products() -> None:
    # batch 2, 4 heads, 128 queries and keys, 64 wide: QK^T and PV are 2*L*S*E each
    q = [2, 4, 128, 64]
    found = cost("aten::scaled_dot_product_attention", [q, q, q], [F, F, F])
    assert found.flops == 2 * 4 * (2 * 128 * 128 * 64) * 2
    assert found.bytes == 4 * 4 * (2 * 4 * 128 * 64)  # q, k, v read, the output written


def test_elementwise_ops_count_one_per_element_and_move_each_operand_once() -> None:
    # add of two 1000x100 tensors: 1e5 adds, two reads and a write of 4e5 B each
    assert _c(cost("aten::add", [[1000, 100], [1000, 100], []], [F, F, "Scalar"])) == Cost(
        100_000, 3 * 400_000, "fp32")
    # in place: the first operand is read and written, the second read
    assert _c(cost("aten::mul_", [[1000, 100], [1000, 100]], [F, F])).bytes == 3 * 400_000
    # a scalar operand moves nothing; a broadcast row is read once
    assert _c(cost("aten::mul", [[1000, 100], []], [F, "Scalar"])).bytes == 2 * 400_000
    assert _c(cost("aten::sub", [[1000, 100], [100]], [F, F])) == Cost(
        100_000, 4 * (100_000 + 100 + 100_000), "fp32")
    assert _c(cost("aten::relu", [[50, 20]], [H])) == Cost(1000, 2 * 2 * 1000, "fp16")
    # shapes that do not broadcast: no cost rather than a wrong one
    assert _c(cost("aten::sub", [[3, 4], [5]], [F, F])) == Cost(None, None, "fp32")


def test_reductions_softmax_norms_memory_ops() -> None:
    assert _c(cost("aten::sum", [[256, 512], [], [], []], [F, "ScalarList", "Scalar", ""])) == \
        Cost(256 * 512, 4 * 256 * 512, "fp32")
    assert _c(cost("aten::softmax", [[32, 1000], [], []], [F, "Scalar", ""])) == Cost(
        5 * 32_000, 2 * 4 * 32_000, "fp32")
    # layer_norm(x, normalized_shape, weight, bias): 8 per element; x, weight, bias read,
    # the output written
    assert _c(cost("aten::layer_norm", [[32, 768], [], [768], [768], [], []],
                [F, "ScalarList", F, F, "Scalar", "Scalar"])) == Cost(
        8 * 32 * 768, 4 * (2 * 32 * 768 + 2 * 768), "fp32")
    # copy_(dst, src) across types: the fp32 source read, the bf16 destination written
    assert _c(cost("aten::copy_", [[10, 10], [10, 10], []], [B, F, "Scalar"])) == Cost(
        0, 2 * 100 + 4 * 100, "bf16")
    assert _c(cost("aten::fill_", [[1000], []], [F, "Scalar"])) == Cost(0, 4000, "fp32")
    # embedding(weight 50000x256, indices 32x16): 512 rows gathered and written
    assert _c(cost("aten::embedding", [[50000, 256], [32, 16], [], [], []],
                [F, L, "Scalar", "Scalar", "Scalar"])) == Cost(
        0, 4 * 512 * 256 + 8 * 512 + 4 * 512 * 256, "fp32")


@pytest.mark.parametrize("name, dims, types", [
    ("aten::linear", [[4, 8], [16, 8], [16]], [F, F, F]),  # composite: its addmm counts
    ("aten::nonzero", [[10]], [F]),
    ("aten::mm", [[4, 8]], [F]),  # a shape missing
    ("aten::relu", [[]], None),  # no types and no shape: not a tensor we can see
])
def test_unknown_is_not_zero(name: str, dims: list[list[int]], types: list[str] | None) -> None:
    found = cost(name, dims, types)
    assert found.flops is None and found.bytes is None


def test_without_types_flops_stay_and_bytes_are_unknown() -> None:
    # traces recorded without "Input type" (older Kineto) still give torch's FLOPs
    assert _c(cost("aten::mm", [[64, 32], [32, 16]], None)) == Cost(2 * 64 * 16 * 32, None, None)


def test_kinds_name_what_each_formula_counts() -> None:
    assert cost("aten::addmm", [[16], [64, 32], [32, 16]], [F, F, F]).kind == "matmul"
    assert cost("aten::add_", [[4], [4]], [F, F]).kind == "elementwise"
    assert cost("aten::embedding", [[10, 4], [3]], [F, L]).kind == "memory"
    assert cost("aten::linear", [[4, 8], [16, 8]], [F, F]).kind is None
