"""What an op costs, from its input shapes and types: floating-point operations and bytes moved.

torch computes FLOPs only in ``key_averages()``; the Chrome trace carries the shapes, the
types and a few scalar inputs but no count. For the ops torch counts (matrix products,
convolutions, element-wise add and mul) the FLOPs are torch's own formulas
(``computeFlops`` in torch/csrc/profiler/util.cpp), so the two agree exactly; the other
kinds that carry time in training (attention, element-wise, reductions, softmax,
normalisations, embedding, copies) follow the conventions written in docs/roofline.md.
Bytes are the least an op must move: each tensor input read once and the output written
once. An op of no known kind, or whose shapes or types were not recorded, has no cost
(unknown, not zero).
"""

from __future__ import annotations

import json
import math
from typing import Any

from perfstack.records import datarecord

#: Bytes per element of the types the trace names (Kineto writes C++ type names).
ELEMENT_BYTES = {
    "float": 4, "double": 8, "c10::Half": 2, "c10::BFloat16": 2, "c10::Float8_e4m3fn": 1,
    "c10::Float8_e5m2": 1, "long int": 8, "long": 8, "int": 4, "short int": 2, "short": 2,
    "signed char": 1, "unsigned char": 1, "bool": 1, "c10::complex<float>": 8,
    "c10::complex<double>": 16,
}
#: The element types that name a floating-point compute type, and what the report calls it.
COMPUTE_TYPES = {"float": "fp32", "double": "fp64", "c10::Half": "fp16",
                 "c10::BFloat16": "bf16", "signed char": "int8", "unsigned char": "int8"}

MATMUL = {"aten::mm", "aten::addmm", "aten::bmm", "aten::baddbmm"}
CONV = {"aten::conv1d", "aten::conv2d", "aten::conv3d"}
ATTENTION = {"aten::scaled_dot_product_attention"}
#: Element-wise ops of two operands (a tensor and a tensor or a scalar): one FLOP per output
#: element. add and mul are torch's (it counts the first input's elements).
BINARY = {f"aten::{op}{suffix}" for op in (
    "add", "sub", "mul", "div", "maximum", "minimum", "pow", "rsub", "threshold_backward",
    "gelu_backward", "silu_backward", "sigmoid_backward", "tanh_backward", "eq", "ne", "lt",
    "gt", "le", "ge", "where", "lerp", "addcmul", "addcdiv") for suffix in ("", "_")}
#: Element-wise ops of one operand: one FLOP per element (a transcendental counts as one).
UNARY = {f"aten::{op}{suffix}" for op in (
    "relu", "gelu", "silu", "sigmoid", "tanh", "exp", "log", "neg", "abs", "sqrt", "rsqrt",
    "reciprocal", "sin", "cos", "erf", "clamp", "clamp_min", "clamp_max", "hardtanh",
    "leaky_relu", "elu", "square", "sign", "dropout", "native_dropout")
    for suffix in ("", "_")}
#: Reductions over a tensor: one FLOP per input element; the output (no larger) not counted.
REDUCTION = {"aten::sum", "aten::mean", "aten::amax", "aten::amin", "aten::max", "aten::min",
             "aten::prod", "aten::norm", "aten::linalg_vector_norm", "aten::var", "aten::std"}
#: softmax: max, subtract, exponent, sum and divide, five FLOPs per element.
SOFTMAX = {"aten::softmax", "aten::log_softmax", "aten::_softmax", "aten::_log_softmax"}
SOFTMAX_FLOPS = 5
#: Normalisations: mean, variance (subtract, square, add), normalise (subtract, multiply) and
#: the affine scale and shift, eight FLOPs per element.
NORM = {"aten::layer_norm", "aten::batch_norm", "aten::group_norm", "aten::rms_norm",
        "aten::native_layer_norm", "aten::native_batch_norm", "aten::native_group_norm"}
NORM_FLOPS = 8
#: Ops that only move memory: no FLOPs, the bytes read and written.
COPY = {"aten::copy_", "aten::clone", "aten::contiguous"}
FILL = {"aten::fill_", "aten::zero_"}
EMBEDDING = {"aten::embedding"}


@datarecord(frozen=True)
class Cost:
    """What one call of an op costs: FLOPs (None: not counted for this op), the least bytes it
    moves (None: unknown), the element type its arithmetic is in (``fp32``...), its kind."""

    flops: int | None
    bytes: int | None
    dtype: str | None
    #: what kind of op it is (``matmul``, ``convolution``, ``attention``, ``elementwise``,
    #: ``reduction``, ``softmax``, ``normalisation``, ``memory``), None when unknown
    kind: str | None = None


def _prod(values: list[int]) -> int:
    return math.prod(values) if values else 0


def _numel(shape: list[int]) -> int:
    return math.prod(shape)  # a 0-d tensor ([]) has one element


def _int_list(text: Any, default: list[int]) -> list[int]:
    try:
        value = json.loads(text) if isinstance(text, str) and text else text
    except ValueError:
        return default
    if isinstance(value, int):
        return [value]
    return [int(v) for v in value] if isinstance(value, list) and value else default


def _conv(dims: list[list[int]], inputs: Any) -> tuple[int, list[int]] | None:
    """torch's count of a convolution, and its output's shape."""
    if len(dims) < 2 or len(dims[0]) < 3 or len(dims[1]) != len(dims[0]):
        return None
    x, w = dims[0], dims[1]
    spatial = len(x) - 2
    inputs = inputs if isinstance(inputs, list) else []

    def arg(i: int, default: int) -> list[int]:
        values = _int_list(inputs[i], [default] * spatial) if len(inputs) > i else []
        values = values or [default] * spatial
        return values * spatial if len(values) == 1 else values

    stride, padding, dilation = arg(3, 1), arg(4, 0), arg(5, 1)
    groups = _int_list(inputs[6], [1])[0] if len(inputs) > 6 else 1
    out = [
        (x[2 + i] + 2 * padding[i] - dilation[i] * (w[2 + i] - 1) - 1) // stride[i] + 1
        for i in range(spatial)
    ]
    if min(out) <= 0:
        return None
    # 2 (multiply and add) x batch x output positions x kernel size x in x out channels / groups
    count = 2 * x[0] * _prod(out) * _prod(w[2:]) * x[1] * w[0] // max(groups, 1)
    return count, [x[0], w[0], *out]


def _broadcast(shapes: list[list[int]]) -> list[int] | None:
    """The shape of element-wise inputs broadcast together, or None when they do not."""
    ndim = max(len(s) for s in shapes)
    out = []
    for i in range(ndim):
        sizes = {s[len(s) - ndim + i] for s in shapes if len(s) - ndim + i >= 0} - {1}
        if len(sizes) > 1:
            return None
        out.append(sizes.pop() if sizes else 1)
    return out


def cost(name: str, dims: list[list[int]], types: list[str] | None,
         inputs: Any = None) -> Cost:
    """What one call of ``name`` on inputs of these shapes and types costs.

    ``dims`` and ``types`` are the trace's "Input Dims" and "Input type" (a non-tensor input
    has no dims; ``types`` may be None when the trace has none: then bytes are unknown);
    ``inputs`` its "Concrete Inputs" (a convolution's stride, padding...).
    """
    try:
        return _cost(name, dims, types, inputs)
    except (TypeError, ValueError, IndexError):
        return Cost(None, None, None)


class _Inputs:
    """An op's inputs as the trace records them: shapes, types, which are tensors."""

    def __init__(self, dims: list[list[int]], types: list[str] | None) -> None:
        self.dims, self.types = dims, types
        self.tensors = _tensors(dims, types)
        self.dtype = next((COMPUTE_TYPES[types[i]] for i in self.tensors
                           if types is not None and types[i] in COMPUTE_TYPES), None)

    def tensor(self, j: int) -> tuple[int, list[int]]:
        """The j-th tensor input: (its input index, its shape)."""
        return self.tensors[j], self.dims[self.tensors[j]]

    def nbytes(self, *moved: tuple[int, list[int]] | None) -> int | None:
        """Bytes of tensors given as (input index, shape); index -1: an output, in the first
        tensor input's type. None when a type is unknown."""
        if self.types is None or not self.tensors:
            return None
        total = 0
        for entry in moved:
            if entry is None:
                continue
            i, shape = entry
            size = ELEMENT_BYTES.get(self.types[i if i >= 0 else self.tensors[0]], 0)
            if not size:
                return None
            total += _numel(shape) * size
        return total


def _matmul(name: str, x: _Inputs) -> Cost:
    first = 1 if name in ("aten::addmm", "aten::baddbmm") else 0
    a, b = x.dims[first], x.dims[first + 1]
    if name in ("aten::mm", "aten::addmm"):
        (m, k), (_, n) = a, b
        out = [m, n]
    else:
        (batch, m, k), (_, _, n) = a, b
        out = [batch, m, n]
    moved = [(first, a), (first + 1, b), (-1, out)]
    if first:  # the added input is read too
        moved.append((0, x.dims[0]))
    return Cost(2 * _prod(out) * k, x.nbytes(*moved), x.dtype)


def _convolution(x: _Inputs, inputs: Any) -> Cost:
    found = _conv(x.dims, inputs)
    if found is None:
        return Cost(None, None, x.dtype)
    count, out = found
    bias = (2, x.dims[2]) if 2 in x.tensors and x.dims[2] else None
    return Cost(count, x.nbytes((0, x.dims[0]), (1, x.dims[1]), bias, (-1, out)), x.dtype)


def _attention(x: _Inputs) -> Cost:
    q, k, v = x.dims[0], x.dims[1], x.dims[2]
    # QK^T and the product with V, 2 x 2 x batch x heads x L x S x E (the softmax between
    # them, five per score, is small beside them and not counted)
    count = 4 * _prod(q[:-1]) * k[-2] * q[-1]
    out = [*q[:-1], v[-1]]
    return Cost(count, x.nbytes(x.tensor(0), x.tensor(1), x.tensor(2), (-1, out)), x.dtype)


def _elementwise(name: str, x: _Inputs) -> Cost:
    out = _broadcast([x.dims[i] for i in x.tensors])
    if out is None:
        return Cost(None, None, x.dtype)
    torch_counts = name in ("aten::add", "aten::mul", "aten::add_", "aten::mul_")
    count = _numel(x.dims[0]) if torch_counts else _numel(out)
    read = [x.tensor(j) for j in range(len(x.tensors))]
    # in place (add_), the result is written over the first input
    written = x.tensor(0) if name.endswith("_") else (-1, out)
    return Cost(count, x.nbytes(*read, written), x.dtype)


def _memory(name: str, x: _Inputs) -> Cost:
    if name in FILL:
        return Cost(0, x.nbytes(x.tensor(0)), x.dtype)
    if name in EMBEDDING:
        (_, width), index = x.dims[0], x.dims[1]
        gathered = [_numel(index), width]
        return Cost(0, x.nbytes((0, gathered), x.tensor(1), (-1, gathered)), x.dtype)
    if name == "aten::copy_":  # copy_(dst, src): src read, dst written
        return Cost(0, x.nbytes(x.tensor(0), x.tensor(1)), x.dtype)
    return Cost(0, x.nbytes(x.tensor(0), x.tensor(0)), x.dtype)  # read once, written once


def _cost(name: str, dims: list[list[int]], types: list[str] | None, inputs: Any) -> Cost:
    kind = kind_of(name)
    found = _by_kind(name, kind, _Inputs(dims, types), inputs)
    return Cost(found.flops, found.bytes, found.dtype, kind if found.flops is not None
                or found.bytes is not None else None)


def kind_of(name: str) -> str | None:
    """The kind of op ``name`` is, as the cost formulas group them, or None."""
    for kind, names in (("matmul", MATMUL), ("convolution", CONV), ("attention", ATTENTION),
                        ("elementwise", BINARY | UNARY), ("reduction", REDUCTION),
                        ("softmax", SOFTMAX), ("normalisation", NORM),
                        ("memory", COPY | FILL | EMBEDDING)):
        if name in names:
            return kind
    return None


def _by_kind(name: str, kind: str | None, x: _Inputs, inputs: Any) -> Cost:
    if kind == "matmul":
        return _matmul(name, x)
    if kind == "convolution":
        return _convolution(x, inputs)
    if kind == "attention":
        return _attention(x)
    if kind is None or not x.tensors:
        return Cost(None, None, x.dtype)
    if kind == "elementwise":
        return _elementwise(name, x)
    first = x.dims[x.tensors[0]]
    if kind == "reduction":
        return Cost(_numel(first), x.nbytes(x.tensor(0)), x.dtype)
    if kind == "softmax":
        return Cost(SOFTMAX_FLOPS * _numel(first), x.nbytes(x.tensor(0), (-1, first)), x.dtype)
    if kind == "normalisation":
        params = [x.tensor(j) for j in range(1, len(x.tensors))]
        return Cost(NORM_FLOPS * _numel(first), x.nbytes(x.tensor(0), *params, (-1, first)),
                    x.dtype)
    return _memory(name, x)


def _tensors(dims: list[list[int]], types: list[str] | None) -> list[int]:
    """The indices of the inputs that are tensors: those with a shape, or a 0-d tensor's
    element type where the types are known."""
    out = []
    for i, shape in enumerate(dims):
        if not isinstance(shape, list):
            continue
        is_shape = bool(shape) and all(isinstance(v, int) for v in shape)
        zero_d = not shape and types is not None and i < len(types) and types[i] in ELEMENT_BYTES
        if is_shape or zero_d:
            out.append(i)
    return out
