"""Cumulative operators ONNX has no operator for: cumprod, cummax, cummin, logcumsumexp.

Composition: the reduced axis is moved last, broadcast against a lower-triangular mask
``j <= i`` built from ``Range`` (shape ``[..., n, n]``), masked values are replaced by
the reduction's neutral element, and a Reduce* over the last axis gives every prefix
at once. Exact (no log/exp trick) and dynamic in ``n``; memory grows as ``n**2``.
"""

from __future__ import annotations

import numpy as np
import torch

from ....xbuilder import GraphBuilder
from ....xbuilder.dtypes import i64, onnx_to_np_dtype
from ..node_context import NodeContext
from ..registry import converter
from ._helpers import INT64, aten, cast_to, rank_of


def _neutral(elem_type: int, kind: str) -> np.ndarray:
    dtype = onnx_to_np_dtype(elem_type)
    if kind == "prod":
        return np.array(1, dtype=dtype)
    if np.dtype(dtype).kind == "b":
        return np.array(kind == "min", dtype=dtype)
    if np.dtype(dtype).kind in "iu":
        info = np.iinfo(dtype)
        return np.array(info.min if kind == "max" else info.max, dtype=dtype)
    return np.array(-np.inf if kind == "max" else np.inf, dtype=dtype)


def _prefix(g: GraphBuilder, x: str, dim: int, kind: str):
    """(masked values [..., n(i), n(j)], mask [n, n], j indices [n], perm) with the
    reduced axis moved last."""
    rank = rank_of(g, x)
    dim %= rank
    perm = [i for i in range(rank) if i != dim] + [dim]
    xt = g.op.Transpose(x, perm=perm) if dim != rank - 1 else x
    n = g.op.Shape(xt, start=-1)
    j = g.op.Range(i64(0), g.op.Squeeze(n, i64([0])), i64(1))
    mask = g.op.LessOrEqual(g.op.Unsqueeze(j, i64([0])), g.op.Unsqueeze(j, i64([1])))
    xj = g.op.Unsqueeze(xt, i64([-2]))
    fill = g.make_constant(_neutral(g.get_type(x), kind))
    return g.op.Where(mask, xj, fill), mask, j, perm, xj


def _back(g: GraphBuilder, y: str, perm: list[int]) -> str:
    if perm == sorted(perm):
        return y
    inv = [perm.index(i) for i in range(len(perm))]
    return g.op.Transpose(y, perm=inv)


def _reduce(g: GraphBuilder, op: str, masked: str) -> str:
    return getattr(g.op, op)(masked, i64([-1]), keepdims=0)


@converter(aten.cumprod.default)
def aten_cumprod(
    g: GraphBuilder, x: str, dim: int, *, dtype: torch.dtype | None = None, ctx: NodeContext
) -> str:
    """cumprod(Tensor self, int dim, *, ScalarType? dtype=None) -> Tensor"""
    x = cast_to(g, x, ctx.dtype())
    if rank_of(g, x) == 0:
        return g.op.Identity(x)
    masked, _, _, perm, _ = _prefix(g, x, dim, "prod")
    return _back(g, _reduce(g, "ReduceProd", masked), perm)


@converter(aten.logcumsumexp.default)
def aten_logcumsumexp(g: GraphBuilder, x: str, dim: int) -> str:
    """logcumsumexp(Tensor self, int dim) -> Tensor"""
    if rank_of(g, x) == 0:
        return g.op.Identity(x)
    masked, _, _, perm, _ = _prefix(g, x, dim, "max")
    return _back(g, _reduce(g, "ReduceLogSumExp", masked), perm)


def _cum_extremum(g: GraphBuilder, x, dim, kind: str):
    if rank_of(g, x) == 0:
        return g.op.Identity(x), g.make_constant(i64(0))
    compute = x
    if g.get_type(x) == 9:  # bool: ReduceMax has no bool kernel
        compute = cast_to(g, x, INT64)
    masked, mask, j, perm, xj = _prefix(g, compute, dim, kind)
    values = _reduce(g, "ReduceMax" if kind == "max" else "ReduceMin", masked)
    # index of the last element equal to the running extremum
    hit = g.op.And(g.op.Equal(xj, g.op.Unsqueeze(values, i64([-1]))), mask)
    idx = _reduce(g, "ReduceMax", g.op.Where(hit, j, i64(-1)))
    values = cast_to(g, values, g.get_type(x))
    return _back(g, values, perm), _back(g, idx, perm)


@converter(aten.cummax.default)
def aten_cummax(g: GraphBuilder, x: str, dim: int) -> tuple[str, str]:
    """cummax(Tensor self, int dim) -> (Tensor values, Tensor indices)"""
    return _cum_extremum(g, x, dim, "max")


@converter(aten.cummin.default)
def aten_cummin(g: GraphBuilder, x: str, dim: int) -> tuple[str, str]:
    """cummin(Tensor self, int dim) -> (Tensor values, Tensor indices)"""
    return _cum_extremum(g, x, dim, "min")
