"""Floating-point operations of an op, from its input shapes, with torch's own formulas.

torch computes FLOPs only in ``key_averages()``; the Chrome trace carries the shapes and the
scalar inputs but not the count. These are the formulas of torch's ``computeFlops``
(torch/csrc/profiler/util.cpp) for the ops it counts: matrix products, convolutions and
element-wise add/mul. Other ops have no FLOP count (unknown, not zero).
"""

from __future__ import annotations

import json
import math
from typing import Any


def _prod(values: list[int]) -> int:
    return math.prod(values) if values else 0


def _int_list(text: Any, default: list[int]) -> list[int]:
    try:
        value = json.loads(text) if isinstance(text, str) and text else text
    except ValueError:
        return default
    if isinstance(value, int):
        return [value]
    return [int(v) for v in value] if isinstance(value, list) and value else default


def _conv(dims: list[list[int]], inputs: Any) -> int | None:
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
    return 2 * x[0] * _prod(out) * _prod(w[2:]) * x[1] * w[0] // max(groups, 1)


def flops(name: str, dims: list[list[int]], inputs: Any = None) -> int | None:
    """Return the op's FLOPs as torch counts them, or None when torch does not count it."""
    try:
        if name == "aten::mm" and len(dims) >= 2:
            (m, k), (_, n) = dims[0], dims[1]
            return 2 * m * k * n
        if name == "aten::addmm" and len(dims) >= 3:
            (m, k), (_, n) = dims[1], dims[2]
            return 2 * m * k * n
        if name == "aten::bmm" and len(dims) >= 2:
            (b, m, k), (_, _, n) = dims[0], dims[1]
            return 2 * b * m * k * n
        if name == "aten::baddbmm" and len(dims) >= 3:
            (b, m, k), (_, _, n) = dims[1], dims[2]
            return 2 * b * m * k * n
        if name in ("aten::conv1d", "aten::conv2d", "aten::conv3d"):
            return _conv(dims, inputs)
        if name in ("aten::add", "aten::mul", "aten::add_", "aten::mul_") and dims and dims[0]:
            return _prod(dims[0])
    except (TypeError, ValueError):
        return None
    return None
