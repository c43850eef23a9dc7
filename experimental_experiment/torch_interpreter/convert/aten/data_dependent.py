"""Operators whose output size depends on the data or that search in sorted data:
masked_select, unique (flattened or along a dim), unique_consecutive, nonzero_static,
searchsorted, bucketize, histc."""

from __future__ import annotations

import numpy as np

from ....xbuilder import GraphBuilder
from ...errors import UnsupportedOpError
from ..node_context import NodeContext
from ..registry import converter
from ._helpers import INT64, aten, cast_to, rank_of

_I64 = np.int64


def _flat(g: GraphBuilder, x: str) -> str:
    return g.op.Reshape(x, np.array([-1], _I64))


def _empty_i64(g: GraphBuilder) -> str:
    return g.make_constant(np.zeros((0,), dtype=_I64))


@converter(aten.masked_select.default)
def aten_masked_select(g: GraphBuilder, x: str, mask: str) -> str:
    """masked_select(Tensor self, Tensor mask) -> Tensor"""
    xb = g.op.Where(mask, x, x)  # broadcast both
    mb = g.op.Expand(mask, g.op.Shape(xb))
    return g.op.Compress(_flat(g, xb), _flat(g, mb), axis=0)


@converter(aten._unique2.default)
def aten__unique2(
    g: GraphBuilder,
    x: str,
    sorted: bool = True,
    return_inverse: bool = False,
    return_counts: bool = False,
):
    """_unique2(Tensor self, bool sorted=True, bool return_inverse=False,
    bool return_counts=False) -> (Tensor, Tensor, Tensor) (always sorted here)"""
    values, _, inverse, counts = g.op.Unique(_flat(g, x), sorted=1, outputs=4)
    inverse = g.op.Reshape(inverse, g.op.Shape(x)) if return_inverse else _empty_i64(g)
    return values, inverse, counts if return_counts else _empty_i64(g)


@converter(aten.unique_dim.default)
def aten_unique_dim(
    g: GraphBuilder,
    x: str,
    dim: int,
    sorted: bool = True,
    return_inverse: bool = False,
    return_counts: bool = False,
) -> tuple[str, str, str]:
    """unique_dim(Tensor self, int dim, bool sorted=True, bool return_inverse=False,
    bool return_counts=False) -> (Tensor, Tensor, Tensor)"""
    values, _, inverse, counts = g.op.Unique(x, axis=dim, sorted=1, outputs=4)
    return (
        values,
        inverse if return_inverse else _empty_i64(g),
        counts if return_counts else _empty_i64(g),
    )


@converter(aten.unique_consecutive.default)
def aten_unique_consecutive(
    g: GraphBuilder,
    x: str,
    return_inverse: bool = False,
    return_counts: bool = False,
    dim: int | None = None,
):
    """unique_consecutive(Tensor self, bool return_inverse=False, bool return_counts=False,
    int? dim=None) -> (Tensor, Tensor, Tensor) (dim=None only)"""
    if dim is not None and rank_of(g, x) > 1:
        raise UnsupportedOpError(
            "unique_consecutive with dim on a tensor of rank > 1", argument="dim"
        )
    flat = _flat(g, x)
    n = g.op.Shape(flat)
    one, big = np.array([1], _I64), np.array([2**62], _I64)
    cur = g.op.Slice(flat, one, big, np.array([0], _I64))
    prev = g.op.Slice(flat, np.array([0], _I64), np.array([-1], _I64), np.array([0], _I64))
    first = g.op.Expand(np.array([True]), g.op.Min(n, one))
    change = g.op.Concat(first, g.op.Not(g.op.Equal(cur, prev)), axis=0)
    values = g.op.Compress(flat, change, axis=0)
    inverse = _empty_i64(g)
    if return_inverse:
        inverse = g.op.Sub(
            g.op.CumSum(g.op.Cast(change, to=INT64), np.array(0, _I64)), np.array(1, _I64)
        )
        inverse = g.op.Reshape(inverse, g.op.Shape(x))
    counts = _empty_i64(g)
    if return_counts:
        pos = g.op.Compress(
            g.op.Range(np.array(0, _I64), g.op.Squeeze(n), np.array(1, _I64)), change, axis=0
        )
        nxt = g.op.Concat(g.op.Slice(pos, one, big, np.array([0], _I64)), n, axis=0)
        counts = g.op.Sub(nxt, pos)
    return values, inverse, counts


@converter(aten.nonzero_static.default)
def aten_nonzero_static(g: GraphBuilder, x: str, *, size: int | str, fill_value: int = -1) -> str:
    """nonzero_static(Tensor self, *, SymInt size, int fill_value=-1) -> Tensor"""
    r = rank_of(g, x)
    sz = (
        np.array([size], _I64)
        if isinstance(size, int)
        else g.op.Reshape(cast_to(g, size, INT64), np.array([1], _I64))
    )
    if r == 0:  # no coordinate to give
        return g.op.Expand(
            np.zeros((1, 0), dtype=_I64), g.op.Concat(sz, np.array([0], _I64), axis=0)
        )
    nz = g.op.Transpose(g.op.NonZero(x), perm=[1, 0])  # [k, r]
    fill = g.op.Expand(np.array(fill_value, _I64), g.op.Concat(sz, np.array([r], _I64), axis=0))
    both = g.op.Concat(nz, fill, axis=0)
    return g.op.Slice(both, np.array([0], _I64), sz, np.array([0], _I64))


def _count_before(g: GraphBuilder, seq: str, values: str, right: bool, out_int32: bool):
    """Number of elements of the sorted last axis of ``seq`` below each value (or below
    or equal with ``right``): searchsorted's insertion index."""
    if any(d == 0 for t in (seq, values) for d in (g.get_shape(t) or ())):
        # empty: onnxruntime's ReduceSum gets the output shape wrong there
        zeros = g.op.Expand(np.array(0, _I64), g.op.Shape(values))
        return g.op.Cast(zeros, to=6) if out_int32 else zeros
    if rank_of(g, seq) == 1:
        s = seq  # [M] broadcast against values[..., None]
    else:
        s = g.op.Unsqueeze(seq, np.array([-2], _I64))  # [..., 1, M]
    v = g.op.Unsqueeze(values, np.array([-1], _I64))
    cmp = g.op.LessOrEqual(s, v) if right else g.op.Less(s, v)
    count = g.op.ReduceSum(g.op.Cast(cmp, to=INT64), np.array([-1], _I64), keepdims=0)
    return g.op.Cast(count, to=6) if out_int32 else count


@converter(aten.searchsorted.Tensor, aten.searchsorted.Scalar)
def aten_searchsorted(
    g: GraphBuilder, seq, values, *, out_int32=False, right=False, side=None, sorter=None
):
    """searchsorted.Tensor(Tensor sorted_sequence, Tensor self, *, bool out_int32=False,
    bool right=False, str? side=None, Tensor? sorter=None) -> Tensor"""
    if sorter is not None:
        seq = g.op.GatherElements(seq, sorter, axis=-1)
    if not isinstance(values, str):
        values = g.make_constant(np.array(values, dtype=np.float32))
        values = g.op.CastLike(values, seq)
    right = right or side == "right"
    t = g.get_type(seq)
    values = cast_to(g, values, t)
    return _count_before(g, seq, values, right, out_int32)


@converter(aten.bucketize.Tensor)
def aten_bucketize(
    g: GraphBuilder, x: str, boundaries: str, *, out_int32: bool = False, right: bool = False
) -> str:
    """bucketize.Tensor(Tensor self, Tensor boundaries, *, bool out_int32=False,
    bool right=False) -> Tensor"""
    x = cast_to(g, x, g.get_type(boundaries))
    return _count_before(g, boundaries, x, right, out_int32)


@converter(aten.histc.default)
def aten_histc(
    g: GraphBuilder,
    x: str,
    bins: int = 100,
    min: float | str = 0,
    max: float | str = 0,
    *,
    ctx: NodeContext,
) -> str:
    """histc(Tensor self, int bins=100, Scalar min=0, Scalar max=0) -> Tensor"""
    t = ctx.dtype()
    flat = _flat(g, cast_to(g, x, t))

    def const(v):
        return cast_to(g, float(v), t)

    if min == max:
        lo = g.op.ReduceMin(flat, keepdims=0)
        hi = g.op.ReduceMax(flat, keepdims=0)
        same = g.op.Equal(lo, hi)
        lo = g.op.Where(same, g.op.Sub(lo, const(1)), lo)
        hi = g.op.Where(same, g.op.Add(hi, const(1)), hi)
    else:
        lo, hi = const(min), const(max)
    inside = g.op.And(g.op.GreaterOrEqual(flat, lo), g.op.LessOrEqual(flat, hi))
    pos = g.op.Div(g.op.Mul(g.op.Sub(flat, lo), const(bins)), g.op.Sub(hi, lo))
    idx = g.op.Cast(g.op.Floor(pos), to=INT64)
    idx = g.op.Min(idx, np.array(bins - 1, _I64))
    idx = g.op.Where(inside, idx, np.array(-1, _I64))
    onehot = g.op.Equal(
        g.op.Unsqueeze(idx, np.array([1], _I64)), np.arange(bins, dtype=_I64).reshape((1, bins))
    )
    counts = g.op.ReduceSum(g.op.Cast(onehot, to=INT64), np.array([0], _I64), keepdims=0)
    return g.op.Cast(counts, to=t)
