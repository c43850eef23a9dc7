"""Reductions: sum, mean, prod, max/min, arg*, var/std, logsumexp, all/any, norms.

Opset 18: every Reduce* takes its axes as a second input; no axes input with
``noop_with_empty_axes=0`` reduces every axis (what ``dim=None`` or ``dim=[]`` mean).
Half precision inputs are reduced in float32 (as torch accumulates) then cast back.
"""

from __future__ import annotations

import math
from typing import Sequence

import numpy as np
import torch
from onnx import TensorProto

from ....xbuilder import GraphBuilder
from ....xbuilder.dtypes import i64
from ...errors import UnsupportedOpError
from ..node_context import NodeContext
from ..registry import converter
from ._helpers import BOOL, INT64, aten, axes_tensor, cast_to, onnx_dtype

FLOAT = TensorProto.FLOAT
_HALF = frozenset({TensorProto.FLOAT16, TensorProto.BFLOAT16})
# element types onnxruntime's CPU provider reduces with ReduceMax/ReduceMin/ArgMax
_MINMAX_TYPES = frozenset(
    {FLOAT, TensorProto.DOUBLE, INT64, TensorProto.INT32, TensorProto.INT8, TensorProto.UINT8}
)


def _axes(g: GraphBuilder, x: str, dim) -> list[int] | None:
    """Axes to reduce as a list, None for every axis (dim None, [] or a 0-D input)."""
    if dim is None:
        return None
    dims = [dim] if isinstance(dim, int) else list(dim)
    if not dims or g.get_rank(x) == 0:
        return None
    return dims


def reduce(g: GraphBuilder, op: str, x: str, axes: list[int] | None, keepdim) -> str:
    """``op`` over ``axes`` (None: every axis)."""
    if axes is None:
        return getattr(g.op, op)(x, keepdims=int(bool(keepdim)))
    return getattr(g.op, op)(x, axes_tensor(g, axes), keepdims=int(bool(keepdim)))


def _compute_type(elem_type: int) -> int:
    """Type a sum-like reduction runs in: float32 for half types."""
    return FLOAT if elem_type in _HALF else elem_type


def _minmax_type(elem_type: int) -> int:
    """Type a max/min reduction runs in (exact for every torch dtype it is used on)."""
    if elem_type in _MINMAX_TYPES:
        return elem_type
    if elem_type in _HALF:
        return FLOAT
    return TensorProto.INT32 if elem_type == BOOL else INT64


def _sum_like(
    g: GraphBuilder, op: str, x: str, dim, keepdim, dtype=None, *, ctx: NodeContext
) -> str:
    """Casts to the output type (or ``dtype``), reduces, casts back from float32."""
    t = onnx_dtype(dtype, ctx.dtype())
    xc = cast_to(g, x, _compute_type(t))
    return cast_to(g, reduce(g, op, xc, _axes(g, xc, dim), keepdim), ctx.dtype())


# sum, mean, prod


@converter(aten.sum.default)
def aten_sum(g: GraphBuilder, x: str, *, dtype: torch.dtype | None = None, ctx: NodeContext) -> str:
    """sum(Tensor self, *, ScalarType? dtype=None) -> Tensor"""
    return _sum_like(g, "ReduceSum", x, None, False, dtype, ctx=ctx)


@converter(aten.sum.dim_IntList)
def aten_sum_dim(
    g: GraphBuilder,
    x: str,
    dim: int | Sequence[int] | None,
    keepdim: bool = False,
    *,
    dtype: torch.dtype | None = None,
    ctx: NodeContext,
):
    """sum.dim_IntList(Tensor self, int[1]? dim, bool keepdim=False, *, ScalarType? dtype=None)"""
    return _sum_like(g, "ReduceSum", x, dim, keepdim, dtype, ctx=ctx)


@converter(aten.mean.default)
def aten_mean(
    g: GraphBuilder, x: str, *, dtype: torch.dtype | None = None, ctx: NodeContext
) -> str:
    """mean(Tensor self, *, ScalarType? dtype=None) -> Tensor"""
    return _sum_like(g, "ReduceMean", x, None, False, dtype, ctx=ctx)


@converter(aten.mean.dim)
def aten_mean_dim(
    g: GraphBuilder,
    x: str,
    dim: int | Sequence[int] | None,
    keepdim: bool = False,
    *,
    dtype: torch.dtype | None = None,
    ctx: NodeContext,
):
    """mean.dim(Tensor self, int[1]? dim, bool keepdim=False, *, ScalarType? dtype=None)"""
    return _sum_like(g, "ReduceMean", x, dim, keepdim, dtype, ctx=ctx)


@converter(aten.prod.default)
def aten_prod(
    g: GraphBuilder, x: str, *, dtype: torch.dtype | None = None, ctx: NodeContext
) -> str:
    """prod(Tensor self, *, ScalarType? dtype=None) -> Tensor"""
    return _sum_like(g, "ReduceProd", x, None, False, dtype, ctx=ctx)


@converter(aten.prod.dim_int)
def aten_prod_dim(
    g: GraphBuilder,
    x: str,
    dim: int,
    keepdim: bool = False,
    *,
    dtype: torch.dtype | None = None,
    ctx: NodeContext,
):
    """prod.dim_int(Tensor self, int dim, bool keepdim=False, *, ScalarType? dtype=None)"""
    return _sum_like(g, "ReduceProd", x, dim, keepdim, dtype, ctx=ctx)


def _not_nan(g: GraphBuilder, x: str) -> str:
    return g.op.Where(g.op.IsNaN(x), cast_to(g, 0.0, g.get_type(x)), x)


@converter(aten.nansum.default)
def aten_nansum(
    g: GraphBuilder,
    x: str,
    dim: int | Sequence[int] | None = None,
    keepdim: bool = False,
    *,
    dtype: torch.dtype | None = None,
    ctx: NodeContext,
):
    """nansum(Tensor self, int[1]? dim=None, bool keepdim=False, *, ScalarType? dtype=None)"""
    t = onnx_dtype(dtype, ctx.dtype())
    xc = cast_to(g, x, _compute_type(t))
    if g.get_type(xc) in (FLOAT, TensorProto.DOUBLE):
        xc = _not_nan(g, xc)
    return cast_to(g, reduce(g, "ReduceSum", xc, _axes(g, xc, dim), keepdim), ctx.dtype())


@converter(aten.nanmean.default)
def aten_nanmean(
    g: GraphBuilder,
    x: str,
    dim: int | Sequence[int] | None = None,
    keepdim: bool = False,
    *,
    dtype: torch.dtype | None = None,
    ctx: NodeContext,
):
    """nanmean(Tensor self, int[1]? dim=None, bool keepdim=False, *, ScalarType? dtype=None)"""
    ct = _compute_type(onnx_dtype(dtype, ctx.dtype()))
    xc = cast_to(g, x, ct)
    axes = _axes(g, xc, dim)
    total = reduce(g, "ReduceSum", _not_nan(g, xc), axes, keepdim)
    count = reduce(g, "ReduceSum", g.op.Cast(g.op.Not(g.op.IsNaN(xc)), to=ct), axes, keepdim)
    return cast_to(g, g.op.Div(total, count), ctx.dtype())


# max, min, arg*


def _minmax(g: GraphBuilder, op: str, x: str, dim, keepdim, *, ctx: NodeContext) -> str:
    xc = cast_to(g, x, _minmax_type(g.get_type(x)))
    return cast_to(g, reduce(g, op, xc, _axes(g, xc, dim), keepdim), ctx.dtype())


@converter(aten.amax.default)
def aten_amax(
    g: GraphBuilder,
    x: str,
    dim: int | Sequence[int] = (),
    keepdim: bool = False,
    *,
    ctx: NodeContext,
) -> str:
    """amax(Tensor self, int[1] dim=[], bool keepdim=False) -> Tensor"""
    return _minmax(g, "ReduceMax", x, dim, keepdim, ctx=ctx)


@converter(aten.amin.default)
def aten_amin(
    g: GraphBuilder,
    x: str,
    dim: int | Sequence[int] = (),
    keepdim: bool = False,
    *,
    ctx: NodeContext,
) -> str:
    """amin(Tensor self, int[1] dim=[], bool keepdim=False) -> Tensor"""
    return _minmax(g, "ReduceMin", x, dim, keepdim, ctx=ctx)


@converter(aten.max.default)
def aten_max(g: GraphBuilder, x: str, *, ctx: NodeContext) -> str:
    """max(Tensor self) -> Tensor"""
    return _minmax(g, "ReduceMax", x, None, False, ctx=ctx)


@converter(aten.min.default)
def aten_min(g: GraphBuilder, x: str, *, ctx: NodeContext) -> str:
    """min(Tensor self) -> Tensor"""
    return _minmax(g, "ReduceMin", x, None, False, ctx=ctx)


@converter(aten.aminmax.default)
def aten_aminmax(
    g: GraphBuilder, x: str, *, dim: int | None = None, keepdim: bool = False, ctx: NodeContext
) -> tuple[str, str]:
    """aminmax(Tensor self, *, int? dim=None, bool keepdim=False) -> (Tensor min, Tensor max)"""
    xc = cast_to(g, x, _minmax_type(g.get_type(x)))
    axes = _axes(g, xc, dim)
    return (
        cast_to(g, reduce(g, "ReduceMin", xc, axes, keepdim), ctx.dtype(0)),
        cast_to(g, reduce(g, "ReduceMax", xc, axes, keepdim), ctx.dtype(1)),
    )


def _arg(g: GraphBuilder, op: str, x: str, dim, keepdim) -> str:
    """ArgMax/ArgMin, first index on ties; ``dim=None`` flattens first."""
    rank = g.get_rank(x)
    if rank == 0:
        return g.op.Identity(g.make_constant(i64(0)))  # 0-D: index 0
    xc = cast_to(g, x, _minmax_type(g.get_type(x)))
    if dim is None:
        flat = g.op.Reshape(xc, i64([-1]))
        idx = getattr(g.op, op)(flat, axis=0, keepdims=0, select_last_index=0)
        if keepdim and rank is not None:
            idx = g.op.Reshape(idx, np.ones((rank,), dtype=np.int64))
        return idx
    return getattr(g.op, op)(xc, axis=dim, keepdims=int(bool(keepdim)), select_last_index=0)


@converter(aten.argmax.default)
def aten_argmax(g: GraphBuilder, x: str, dim: int | None = None, keepdim: bool = False) -> str:
    """argmax(Tensor self, int? dim=None, bool keepdim=False) -> Tensor"""
    return _arg(g, "ArgMax", x, dim, keepdim)


@converter(aten.argmin.default)
def aten_argmin(g: GraphBuilder, x: str, dim: int | None = None, keepdim: bool = False) -> str:
    """argmin(Tensor self, int? dim=None, bool keepdim=False) -> Tensor"""
    return _arg(g, "ArgMin", x, dim, keepdim)


def _minmax_dim(
    g: GraphBuilder, red: str, arg: str, x: str, dim: int, keepdim, *, ctx: NodeContext
):
    return _minmax(g, red, x, dim, keepdim, ctx=ctx), _arg(g, arg, x, dim, keepdim)


@converter(aten.max.dim)
def aten_max_dim(
    g: GraphBuilder, x: str, dim: int, keepdim: bool = False, *, ctx: NodeContext
) -> tuple[str, str]:
    """max.dim(Tensor self, int dim, bool keepdim=False) -> (Tensor values, Tensor indices)"""
    return _minmax_dim(g, "ReduceMax", "ArgMax", x, dim, keepdim, ctx=ctx)


@converter(aten.min.dim)
def aten_min_dim(
    g: GraphBuilder, x: str, dim: int, keepdim: bool = False, *, ctx: NodeContext
) -> tuple[str, str]:
    """min.dim(Tensor self, int dim, bool keepdim=False) -> (Tensor values, Tensor indices)"""
    return _minmax_dim(g, "ReduceMin", "ArgMin", x, dim, keepdim, ctx=ctx)


# var, std


def _count(g: GraphBuilder, x: str, axes: list[int] | None, elem_type: int) -> str | float:
    """Number of elements reduced over ``axes``: a float for static dims, else a scalar
    of ``elem_type`` computed from the shape."""
    shape = g.get_shape(x)
    rank = g.get_rank(x)
    if axes is not None and rank is not None:
        axes = sorted({a % rank for a in axes})
    if shape is not None:
        dims = [shape[a] for a in (axes if axes is not None else range(len(shape)))]
        if all(isinstance(d, int) for d in dims):
            return float(np.prod(dims)) if dims else 1.0
    if axes is None:
        return g.op.Cast(g.op.Size(x), to=elem_type)
    dims = g.op.Gather(g.op.Shape(x), axes_tensor(g, axes), axis=0)
    return g.op.Cast(g.op.ReduceProd(dims, keepdims=0), to=elem_type)


def _var_mean(
    g: GraphBuilder, x: str, dim, correction, keepdim, *, want_mean=False, ctx: NodeContext
):
    """(variance, mean or None) in the compute type of the output."""
    ct = _compute_type(ctx.dtype())
    xc = cast_to(g, x, ct)
    axes = _axes(g, xc, dim)
    mean = reduce(g, "ReduceMean", xc, axes, True)
    diff = g.op.Sub(xc, mean)
    sq = g.op.Mul(diff, diff)
    if correction is None:
        correction = 1
    if correction == 0:
        var = reduce(g, "ReduceMean", sq, axes, keepdim)
    else:
        n = _count(g, xc, axes, ct)
        n = (
            max(n - correction, 0.0)
            if isinstance(n, float)
            else g.op.Max(g.op.Sub(n, float(correction)), 0.0)
        )
        var = g.op.Div(reduce(g, "ReduceSum", sq, axes, keepdim), n)
    if not want_mean:
        return var, None
    if not keepdim:
        mean = (
            g.op.Reshape(mean, i64([]))
            if axes is None
            else g.op.Squeeze(mean, axes_tensor(g, axes))
        )
    return var, mean


def _finish_var(
    g: GraphBuilder, x, dim, correction, keepdim, *, std: bool, with_mean: bool, ctx: NodeContext
):
    var, mean = _var_mean(g, x, dim, correction, keepdim, want_mean=with_mean, ctx=ctx)
    res = cast_to(g, g.op.Sqrt(var) if std else var, ctx.dtype(0))
    if not with_mean:
        return res
    return res, cast_to(g, mean, ctx.dtype(1))


def _register_var(name: str, *, std: bool, with_mean: bool):
    packet = getattr(aten, name)

    def default(g: GraphBuilder, x, unbiased=True, *, ctx: NodeContext):
        return _finish_var(
            g, x, None, int(bool(unbiased)), False, std=std, with_mean=with_mean, ctx=ctx
        )

    def dim(g: GraphBuilder, x, dim, unbiased=True, keepdim=False, *, ctx: NodeContext):
        return _finish_var(
            g, x, dim, int(bool(unbiased)), keepdim, std=std, with_mean=with_mean, ctx=ctx
        )

    def correction(
        g: GraphBuilder, x, dim=None, *, correction=None, keepdim=False, ctx: NodeContext
    ):
        return _finish_var(g, x, dim, correction, keepdim, std=std, with_mean=with_mean, ctx=ctx)

    for overload, fn in [("default", default), ("dim", dim), ("correction", correction)]:
        fn.__name__ = f"aten_{name}_{overload}"
        fn.__doc__ = str(getattr(packet, overload)._schema)
        converter(getattr(packet, overload))(fn)


_register_var("var", std=False, with_mean=False)
_register_var("std", std=True, with_mean=False)
_register_var("var_mean", std=False, with_mean=True)
_register_var("std_mean", std=True, with_mean=True)


@converter(aten.logsumexp.default)
def aten_logsumexp(
    g: GraphBuilder, x: str, dim: int | Sequence[int], keepdim: bool = False, *, ctx: NodeContext
) -> str:
    """logsumexp(Tensor self, int[1] dim, bool keepdim=False) -> Tensor"""
    return _sum_like(g, "ReduceLogSumExp", x, dim, keepdim, ctx=ctx)


# all, any, count_nonzero


def _nonzero(g: GraphBuilder, x: str) -> str:
    """Bool tensor: x != 0 (NaN counts as true)."""
    return x if g.get_type(x) == BOOL else g.op.Not(g.op.Equal(x, 0))


def _logical(g: GraphBuilder, op: str, x: str, dim, keepdim, *, ctx: NodeContext) -> str:
    """all (ReduceMin) or any (ReduceMax) of 0/1 flags, compared with 0: over an empty
    axis ReduceMin gives the largest int32 (all -> True) and ReduceMax the smallest
    (any -> False), as torch; a cast of the reduction to bool would give True for both."""
    flags = g.op.Cast(_nonzero(g, x), to=TensorProto.INT32)
    reduced = reduce(g, op, flags, _axes(g, flags, dim), keepdim)
    return cast_to(g, g.op.Greater(reduced, np.array(0, dtype=np.int32)), ctx.dtype())


@converter(aten.all.default, aten._is_all_true.default)
def aten_all(g: GraphBuilder, x: str, *, ctx: NodeContext):
    """all(Tensor self) -> Tensor; _is_all_true(Tensor self) -> Tensor"""
    return _logical(g, "ReduceMin", x, None, False, ctx=ctx)


@converter(aten.all.dim, aten.all.dims)
def aten_all_dim(g: GraphBuilder, x, dim=None, keepdim=False, *, ctx: NodeContext):
    """all.dims(Tensor self, int[]? dim=None, bool keepdim=False) -> Tensor"""
    return _logical(g, "ReduceMin", x, dim, keepdim, ctx=ctx)


@converter(aten.any.default, aten._is_any_true.default)
def aten_any(g: GraphBuilder, x: str, *, ctx: NodeContext):
    """any(Tensor self) -> Tensor; _is_any_true(Tensor self) -> Tensor"""
    return _logical(g, "ReduceMax", x, None, False, ctx=ctx)


@converter(aten.any.dim, aten.any.dims)
def aten_any_dim(g: GraphBuilder, x, dim=None, keepdim=False, *, ctx: NodeContext):
    """any.dims(Tensor self, int[]? dim=None, bool keepdim=False) -> Tensor"""
    return _logical(g, "ReduceMax", x, dim, keepdim, ctx=ctx)


@converter(aten.count_nonzero.default, aten.count_nonzero.dim_IntList)
def aten_count_nonzero(g: GraphBuilder, x, dim=None):
    """count_nonzero(Tensor self, int? dim=None) -> Tensor"""
    flags = g.op.Cast(_nonzero(g, x), to=INT64)
    return reduce(g, "ReduceSum", flags, _axes(g, flags, dim), False)


# norms


def vector_norm(g: GraphBuilder, x: str, ord, dim, keepdim, dtype=None, *, ctx: NodeContext) -> str:
    """p-norm over ``dim`` (None: every axis), computed in float32 for half types."""
    ct = _compute_type(onnx_dtype(dtype, ctx.dtype()))
    xc = cast_to(g, x, ct)
    axes = _axes(g, xc, dim)
    ord = 2.0 if ord is None else float(ord)
    if ord == 2:
        res = reduce(g, "ReduceL2", xc, axes, keepdim)
    elif ord == 1:
        res = reduce(g, "ReduceL1", xc, axes, keepdim)
    elif math.isinf(ord):
        res = reduce(g, "ReduceMax" if ord > 0 else "ReduceMin", g.op.Abs(xc), axes, keepdim)
    elif ord == 0:
        res = reduce(g, "ReduceSum", g.op.Cast(_nonzero(g, xc), to=ct), axes, keepdim)
    else:
        total = reduce(g, "ReduceSum", g.op.Pow(g.op.Abs(xc), ord), axes, keepdim)
        res = g.op.Pow(total, 1.0 / ord)
    return cast_to(g, res, ctx.dtype())


@converter(aten.linalg_vector_norm.default)
def aten_linalg_vector_norm(
    g: GraphBuilder,
    x: str,
    ord: float | str = 2,
    dim: int | Sequence[int] | None = None,
    keepdim: bool = False,
    *,
    dtype: torch.dtype | None = None,
    ctx: NodeContext,
) -> str:
    """linalg_vector_norm(Tensor self, Scalar ord=2, int[1]? dim=None, bool keepdim=False,
    *, ScalarType? dtype=None) -> Tensor"""
    return vector_norm(g, x, ord, dim, keepdim, dtype, ctx=ctx)


@converter(aten.norm.Scalar, aten.norm.ScalarOpt_dtype)
def aten_norm(g: GraphBuilder, x, p=2, *, dtype=None, ctx: NodeContext):
    """norm.Scalar(Tensor self, Scalar p=2) -> Tensor"""
    return vector_norm(g, x, p, None, False, dtype, ctx=ctx)


@converter(aten.norm.ScalarOpt_dim, aten.norm.ScalarOpt_dim_dtype)
def aten_norm_dim(g: GraphBuilder, x, p, dim, keepdim=False, *, dtype=None, ctx: NodeContext):
    """norm.ScalarOpt_dim(Tensor self, Scalar? p, int[1] dim, bool keepdim=False) -> Tensor"""
    return vector_norm(g, x, p, dim, keepdim, dtype, ctx=ctx)


@converter(aten.frobenius_norm.dim)
def aten_frobenius_norm(
    g: GraphBuilder, x: str, dim: int | Sequence[int], keepdim: bool = False, *, ctx: NodeContext
) -> str:
    """frobenius_norm.dim(Tensor self, int[1] dim, bool keepdim=False) -> Tensor"""
    return vector_norm(g, x, 2, dim, keepdim, ctx=ctx)


@converter(aten.linalg_norm.default, aten.linalg_norm.ord_str)
def aten_linalg_norm(
    g: GraphBuilder, x, ord=None, dim=None, keepdim=False, *, dtype=None, ctx: NodeContext
):
    """linalg_norm(Tensor self, Scalar? ord=None, int[1]? dim=None, bool keepdim=False,
    *, ScalarType? dtype=None) -> Tensor (vector norms, matrix norms fro, 1, -1, inf, -inf)"""
    dims = None if dim is None else ([dim] if isinstance(dim, int) else list(dim))
    matrix = len(dims) == 2 if dims is not None else g.get_rank(x) == 2
    if not matrix or ord is None or ord == "fro":
        return vector_norm(g, x, None if ord == "fro" else ord, dims, keepdim, dtype, ctx=ctx)
    if ord in ("nuc", 2, -2):
        raise UnsupportedOpError(f"linalg_norm with ord={ord!r} needs a SVD", argument="ord")
    dims = dims or [0, 1]
    # induced norms: 1 sums over rows then max over columns, inf the opposite
    along, across = (dims[0], dims[1]) if abs(ord) == 1 else (dims[1], dims[0])
    ct = _compute_type(onnx_dtype(dtype, ctx.dtype()))
    sums = reduce(g, "ReduceSum", g.op.Abs(cast_to(g, x, ct)), [along], True)
    res = reduce(g, "ReduceMax" if ord > 0 else "ReduceMin", sums, [along, across], keepdim)
    return cast_to(g, res, ctx.dtype())
