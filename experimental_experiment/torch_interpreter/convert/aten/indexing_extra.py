"""Scatter-like operators with no direct ONNX operator: put, index_reduce."""

from __future__ import annotations

import numpy as np

from ....xbuilder import GraphBuilder
from ....xbuilder.dtypes import onnx_to_np_dtype
from ..node_context import NodeContext
from ..registry import converter
from ._helpers import INT64, aten, cast_to, rank_of

_I64 = np.int64


def _flat(g: GraphBuilder, x: str) -> str:
    return g.op.Reshape(x, np.array([-1], _I64))


@converter(aten.put.default)
def aten_put(g: GraphBuilder, x: str, index: str, source: str, accumulate: bool = False) -> str:
    """put(Tensor self, Tensor index, Tensor source, bool accumulate=False) -> Tensor"""
    flat = _flat(g, x)
    idx = _flat(g, cast_to(g, index, INT64))
    n = g.op.Size(x)
    idx = g.op.Where(g.op.Less(idx, np.array(0, _I64)), g.op.Add(idx, n), idx)
    src = _flat(g, cast_to(g, source, g.get_type(x)))
    res = g.op.ScatterElements(flat, idx, src, axis=0, reduction="add" if accumulate else "none")
    return g.op.Reshape(res, g.op.Shape(x))


_REDUCTIONS = {"prod": "mul", "amax": "max", "amin": "min", "mean": "add"}


def _neutral(elem_type: int, reduce: str) -> np.ndarray:
    dtype = np.dtype(onnx_to_np_dtype(elem_type))
    if reduce == "prod":
        return np.array(1, dtype=dtype)
    if reduce == "mean":
        return np.array(0, dtype=dtype)
    if dtype.kind == "f":
        return np.array(-np.inf if reduce == "amax" else np.inf, dtype=dtype)
    info = np.iinfo(dtype)
    return np.array(info.min if reduce == "amax" else info.max, dtype=dtype)


@converter(aten.index_reduce.default)
def aten_index_reduce(
    g: GraphBuilder,
    x: str,
    dim: int,
    index: str,
    source: str,
    reduce: str,
    *,
    include_self: bool = True,
    ctx: NodeContext,
) -> str:
    """index_reduce(Tensor self, int dim, Tensor index, Tensor source, str reduce, *,
    bool include_self=True) -> Tensor"""
    r = rank_of(g, x)
    if r == 0:
        one = np.array([0], _I64)
        x1 = g.op.Unsqueeze(x, one)
        src = source if rank_of(g, source) else g.op.Unsqueeze(source, one)
        res = aten_index_reduce(
            g, x1, 0, _flat(g, index), src, reduce, include_self=include_self, ctx=ctx
        )
        return g.op.Squeeze(res, one)
    dim %= r
    shape = [1] * r
    shape[dim] = -1
    idx = g.op.Expand(
        g.op.Reshape(cast_to(g, index, INT64), np.array(shape, _I64)), g.op.Shape(source)
    )
    t = ctx.dtype()
    x = cast_to(g, x, t)
    src = cast_to(g, source, t)
    base = x
    if not include_self:
        fill = g.op.Expand(g.make_constant(_neutral(t, reduce)), g.op.Shape(source))
        base = g.op.ScatterElements(x, idx, fill, axis=dim)
    res = g.op.ScatterElements(base, idx, src, axis=dim, reduction=_REDUCTIONS[reduce])
    if reduce == "mean":
        ones = g.op.Expand(g.make_constant(np.array(1, onnx_to_np_dtype(t))), g.op.Shape(source))
        start = g.op.Expand(
            g.make_constant(np.array(1 if include_self else 0, onnx_to_np_dtype(t))), g.op.Shape(x)
        )
        count = g.op.ScatterElements(start, idx, ones, axis=dim, reduction="add")
        safe = g.op.Max(count, g.make_constant(np.array(1, onnx_to_np_dtype(t))))
        if np.dtype(onnx_to_np_dtype(t)).kind == "f":
            res = g.op.Div(res, safe)
        else:
            res = g.op.Cast(
                g.op.Floor(g.op.Div(g.op.Cast(res, to=11), g.op.Cast(safe, to=11))), to=t
            )
        # untouched positions keep self
        res = g.op.Where(g.op.Equal(count, g.op.CastLike(np.array(0, np.float32), count)), x, res)
    return res
