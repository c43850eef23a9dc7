"""Order statistics and distances ONNX has no operator for: median, nanmedian, cdist.

median: TopK (ascending, k = n) along the axis then the element at ``(n - 1) // 2``
(torch returns the lower median). nanmedian moves NaNs last (+inf) and takes the
element at ``(m - 1) // 2`` where ``m`` counts the non-NaN values of each row.
"""

from __future__ import annotations

import numpy as np

from ....xbuilder import GraphBuilder
from ...errors import UnsupportedOpError
from ..registry import converter
from ._helpers import INT64, aten, rank_of

_I64 = np.int64


def _sorted(g: GraphBuilder, x: str, axis: int):
    n = g.op.Shape(x, start=axis, end=axis + 1) if axis >= 0 else g.op.Shape(x, start=axis)
    return g.op.TopK(x, n, axis=axis, largest=0, sorted=1, outputs=2), n


def _median(g: GraphBuilder, x: str, dim: int, keepdim: bool, ignore_nan: bool):
    """(values, indices) of the lower median along ``dim``."""
    xs = x
    if ignore_nan:
        xs = g.op.Where(g.op.IsNaN(x), np.array(np.inf, dtype=np.float32), x)
        xs = g.op.CastLike(xs, x)
    (values, indices), n = _sorted(g, xs, dim)
    if ignore_nan:
        m = g.op.ReduceSum(
            g.op.Cast(g.op.Not(g.op.IsNaN(x)), to=INT64), np.array([dim], _I64), keepdims=1
        )
        k = g.op.Div(g.op.Sub(g.op.Max(m, np.array(1, _I64)), np.array(1, _I64)), np.array(2, _I64))
        med = g.op.GatherElements(values, k, axis=dim)
        idx = g.op.GatherElements(indices, k, axis=dim)
        med = g.op.Where(
            g.op.Equal(m, np.array(0, _I64)),
            g.op.CastLike(np.array(np.nan, dtype=np.float32), x),
            med,
        )
    else:
        k = g.op.Div(g.op.Sub(n, np.array(1, _I64)), np.array(2, _I64))
        med = g.op.Gather(values, k, axis=dim)
        idx = g.op.Gather(indices, k, axis=dim)
        # a NaN anywhere makes the median NaN (TopK sorts NaN last)
        has_nan = g.op.ReduceMax(
            g.op.Cast(g.op.IsNaN(x), to=INT64), np.array([dim], _I64), keepdims=1
        )
        med = g.op.Where(
            g.op.Cast(has_nan, to=9), g.op.CastLike(np.array(np.nan, dtype=np.float32), x), med
        )
    if not keepdim:
        med = g.op.Squeeze(med, np.array([dim], _I64))
        idx = g.op.Squeeze(idx, np.array([dim], _I64))
    return med, idx


def _all(g: GraphBuilder, x, ignore_nan: bool):
    if rank_of(g, x) == 0:
        return g.op.Identity(x)
    flat = g.op.Reshape(x, np.array([-1], _I64))
    return _median(g, flat, 0, False, ignore_nan)[0]


def _dim(g: GraphBuilder, x, dim, keepdim, ignore_nan: bool):
    if rank_of(g, x) == 0:
        return g.op.Identity(x), g.make_constant(np.array(0, dtype=_I64))
    return _median(g, x, dim % rank_of(g, x), keepdim, ignore_nan)


@converter(aten.median.default)
def aten_median(g: GraphBuilder, x: str) -> str:
    """median(Tensor self) -> Tensor"""
    return _all(g, x, False)


@converter(aten.nanmedian.default)
def aten_nanmedian(g: GraphBuilder, x: str) -> str:
    """nanmedian(Tensor self) -> Tensor"""
    return _all(g, x, True)


@converter(aten.median.dim)
def aten_median_dim(g: GraphBuilder, x: str, dim: int, keepdim: bool = False) -> tuple[str, str]:
    """median.dim(Tensor self, int dim, bool keepdim=False) -> (Tensor values, Tensor indices)"""
    return _dim(g, x, dim, keepdim, False)


@converter(aten.nanmedian.dim)
def aten_nanmedian_dim(g: GraphBuilder, x: str, dim: int, keepdim: bool = False):
    """nanmedian.dim(Tensor self, int dim, bool keepdim=False) -> (Tensor values,
    Tensor indices)"""
    return _dim(g, x, dim, keepdim, True)


@converter(aten.cdist.default, aten._cdist_forward.default)
def aten_cdist(
    g: GraphBuilder, x1: str, x2: str, p: float = 2.0, compute_mode: int | None = None
) -> str:
    """cdist(Tensor x1, Tensor x2, float p=2., int? compute_mode=None) -> Tensor

    Computed from the differences ``x1[..., :, None, :] - x2[..., None, :, :]``
    (exact, memory ``P * R * M``) rather than the matrix-product expansion."""
    diff = g.op.Abs(
        g.op.Sub(g.op.Unsqueeze(x1, np.array([-2], _I64)), g.op.Unsqueeze(x2, np.array([-3], _I64)))
    )
    axes = np.array([-1], _I64)

    def reduce(op, t):
        return getattr(g.op, op)(t, axes, keepdims=0)

    if p == 2:
        return reduce("ReduceL2", diff)
    if p == 1:
        return reduce("ReduceSum", diff)
    if p == float("inf"):
        return reduce("ReduceMax", diff)
    if p == 0:
        nz = g.op.CastLike(
            g.op.Not(g.op.Equal(diff, g.op.CastLike(np.array(0, dtype=np.float32), diff))), diff
        )
        return reduce("ReduceSum", nz)
    powered = g.op.Pow(diff, g.op.CastLike(np.array(p, dtype=np.float32), diff))
    return g.op.Pow(
        reduce("ReduceSum", powered), g.op.CastLike(np.array(1 / p, dtype=np.float32), diff)
    )


@converter(aten.pdist.default, aten._pdist_forward.default)
def aten_pdist(g: GraphBuilder, x: str, p: float = 2.0):
    """pdist(Tensor self, float p=2.) -> Tensor: distances of the pairs i < j of rows
    (the number of rows must be static)."""
    shape = g.get_shape(x)
    if shape is None or not isinstance(shape[0], int):
        raise UnsupportedOpError("pdist needs a static number of rows", argument="input")
    n = shape[0]
    ii, jj = np.triu_indices(n, k=1)
    a = g.op.Gather(x, ii.astype(_I64), axis=0)
    b = g.op.Gather(x, jj.astype(_I64), axis=0)
    # cdist of each pair with itself: reuse the p-norm of the difference
    diff = g.op.Unsqueeze(g.op.Sub(a, b), np.array([1], _I64))
    zero = g.op.Mul(diff, g.op.CastLike(np.array(0, dtype=np.float32), diff))
    return g.op.Reshape(aten_cdist(g, diff, zero, p), np.array([-1], _I64))


@converter(aten.mode.default)
def aten_mode(g: GraphBuilder, x: str, dim: int = -1, keepdim: bool = False) -> tuple[str, str]:
    """mode(Tensor self, int dim=-1, bool keepdim=False) -> (Tensor values, Tensor indices)

    The smallest of the most frequent values and the index of its last occurrence;
    counts come from comparing every pair along ``dim`` (memory ``n**2``)."""
    r = rank_of(g, x)
    if r == 0:
        return g.op.Identity(x), g.make_constant(np.array(0, dtype=_I64))
    dim %= r
    a = g.op.Unsqueeze(x, np.array([dim + 1], _I64))  # [..., n, 1, ...]
    b = g.op.Unsqueeze(x, np.array([dim], _I64))  # [..., 1, n, ...]
    counts = g.op.ReduceSum(
        g.op.Cast(g.op.Equal(a, b), to=INT64), np.array([dim + 1], _I64), keepdims=0
    )
    best = g.op.Equal(counts, g.op.ReduceMax(counts, np.array([dim], _I64), keepdims=1))
    big = g.op.ReduceMax(x, np.array([dim], _I64), keepdims=1)
    value = g.op.ReduceMin(g.op.Where(best, x, big), np.array([dim], _I64), keepdims=1)
    n = g.op.Shape(x, start=dim, end=dim + 1)
    shape = [1] * r
    shape[dim] = -1
    pos = g.op.Reshape(
        g.op.Range(np.array(0, _I64), g.op.Squeeze(n), np.array(1, _I64)), np.array(shape, _I64)
    )
    idx = g.op.ReduceMax(
        g.op.Where(g.op.Equal(x, value), pos, np.array(-1, _I64)), np.array([dim], _I64), keepdims=1
    )
    if not keepdim:
        value = g.op.Squeeze(value, np.array([dim], _I64))
        idx = g.op.Squeeze(idx, np.array([dim], _I64))
    return value, idx
