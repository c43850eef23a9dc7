"""Padding: constant_pad_nd, pad (constant, reflect, replicate, circular) and the
reflection / replication / circular pad operators."""

from __future__ import annotations

from typing import Sequence

import numpy as np

from ....xbuilder import GraphBuilder
from ....xbuilder.dtypes import i64
from ...errors import UnsupportedOpError
from ..registry import converter
from ._helpers import aten, cast_to, rank_of, shape_tensor


def _onnx_pads(g: GraphBuilder, x, pad) -> str:
    """torch pads (last axis first, (begin, end) pairs) as ONNX pads (all begins, all ends)."""
    rank = rank_of(g, x)
    if len(pad) % 2 or len(pad) // 2 > rank:
        raise ValueError(f"pad={pad} does not fit a tensor of rank {rank}")
    begins, ends = [0] * rank, [0] * rank
    for i in range(len(pad) // 2):
        begins[rank - 1 - i], ends[rank - 1 - i] = pad[2 * i], pad[2 * i + 1]
    return shape_tensor(g, begins + ends)


@converter(aten.constant_pad_nd.default)
def aten_constant_pad_nd(
    g: GraphBuilder, x: str, pad: Sequence[int | str], value: float | str = 0
) -> str:
    """constant_pad_nd(Tensor self, SymInt[] pad, Scalar value=0) -> Tensor"""
    value = cast_to(g, 0 if value is None else value, g.get_type(x))
    return g.op.Pad(x, _onnx_pads(g, x, pad), value, mode="constant")


def _negative(v) -> bool:
    return isinstance(v, int) and v < 0


def _edge_pad(g: GraphBuilder, x, pad) -> str:
    """Replicate padding; torch also accepts negative pads (they crop): output index i
    of such an axis reads input index clip(i - left, 0, n - 1), a Gather."""
    if not any(_negative(v) for v in pad):
        return g.op.Pad(x, _onnx_pads(g, x, pad), mode="edge")
    rank = rank_of(g, x)
    rest = list(pad)
    zero, one = i64(0), i64(1)
    for i in range(len(pad) // 2):
        left, right = pad[2 * i], pad[2 * i + 1]
        if not (_negative(left) or _negative(right)):
            continue
        axis = rank - 1 - i
        n, left = g.op.Shape(x, start=axis, end=axis + 1), _as_1d(g, left)
        size = g.op.Add(g.op.Add(n, left), _as_1d(g, right))
        positions = g.op.Range(zero, g.op.Squeeze(size, i64([0])), one)
        src = g.op.Min(g.op.Max(g.op.Sub(positions, left), zero), g.op.Sub(n, one))
        x = g.op.Gather(x, src, axis=axis)
        rest[2 * i] = rest[2 * i + 1] = 0
    if all(isinstance(v, int) and v == 0 for v in rest):
        return x
    return g.op.Pad(x, _onnx_pads(g, x, rest), mode="edge")


def _mode_pad(mode: str):
    def fn(g: GraphBuilder, x, padding):
        if mode == "edge":
            return _edge_pad(g, x, padding)
        return g.op.Pad(x, _onnx_pads(g, x, padding), mode=mode)

    return fn


for _n in (1, 2, 3):
    _fn = _mode_pad("reflect")
    _fn.__name__ = f"aten_reflection_pad{_n}d"
    _fn.__doc__ = f"reflection_pad{_n}d(Tensor self, SymInt[{2 * _n}] padding) -> Tensor"
    converter(getattr(aten, f"reflection_pad{_n}d").default)(_fn)
    _fn = _mode_pad("edge")
    _fn.__name__ = f"aten_replication_pad{_n}d"
    _fn.__doc__ = f"replication_pad{_n}d(Tensor self, SymInt[{2 * _n}] padding) -> Tensor"
    converter(getattr(aten, f"replication_pad{_n}d").default)(_fn)


def _as_1d(g: GraphBuilder, v) -> str:
    if isinstance(v, int):
        return g.make_constant(i64([v]))
    return shape_tensor(g, [v])


@converter(aten._pad_circular.default)
def aten_pad_circular(g: GraphBuilder, x: str, pad: Sequence[int | str]) -> str:
    """_pad_circular(Tensor self, SymInt[] pad) -> Tensor (Slice + Concat per axis)"""
    rank = rank_of(g, x)
    if any(_negative(v) for v in pad):
        # torch crops first (negative pads), then wraps around the cropped tensor
        pad = list(pad)
        for i in range(len(pad) // 2):
            left, right = pad[2 * i], pad[2 * i + 1]
            if not (_negative(left) or _negative(right)):
                continue
            start = -left if _negative(left) else 0
            end = right if _negative(right) else np.iinfo(np.int64).max
            x = g.op.Slice(x, i64([start]), i64([end]), i64([rank - 1 - i]))
            pad[2 * i], pad[2 * i + 1] = max(left, 0), max(right, 0)
    # Pad(mode="wrap") exists from opset 19 but onnxruntime 1.32's CPU kernel rejects it
    # ("Unexpected mode of 3"): the slices are concatenated instead
    big = i64([np.iinfo(np.int64).max])
    zero = i64([0])
    for i in range(len(pad) // 2):
        axis = rank - 1 - i
        left, right = pad[2 * i], pad[2 * i + 1]
        axes = i64([axis])
        parts = []
        if not (isinstance(left, int) and left == 0):
            parts.append(g.op.Slice(x, g.op.Neg(_as_1d(g, left)), big, axes))
        parts.append(x)
        if not (isinstance(right, int) and right == 0):
            parts.append(g.op.Slice(x, zero, _as_1d(g, right), axes))
        x = g.op.Concat(*parts, axis=axis) if len(parts) > 1 else x
    return g.op.Identity(x) if all(isinstance(p, int) and p == 0 for p in pad) else x


@converter(aten.pad.default)
def aten_pad(
    g: GraphBuilder,
    x: str,
    pad: Sequence[int | str],
    mode: str = "constant",
    value: float | None = None,
) -> str:
    """pad(Tensor self, SymInt[] pad, str mode="constant", float? value=None) -> Tensor"""
    if mode == "constant":
        return aten_constant_pad_nd(g, x, pad, 0 if value is None else value)
    if mode == "circular":
        return aten_pad_circular(g, x, pad)
    if mode == "replicate":
        return _edge_pad(g, x, pad)
    if mode != "reflect":
        raise UnsupportedOpError(f"pad mode={mode!r}", argument="mode")
    return g.op.Pad(x, _onnx_pads(g, x, pad), mode="reflect")
