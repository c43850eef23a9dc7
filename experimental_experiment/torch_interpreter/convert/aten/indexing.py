"""Indexing: index, index_put, gather, scatter, masked ops, take, index_*."""

from __future__ import annotations

from typing import Sequence

import numpy as np
from onnx import TensorProto

from ....xbuilder import GraphBuilder
from ....xbuilder.dtypes import FLOAT_TYPES, i64, onnx_to_np_dtype
from ...errors import UnsupportedOpError
from ..node_context import NodeContext
from ..registry import converter
from ._helpers import BOOL, INT64, aten, cast_to, rank_of
from .creation import inplace_guard, value_attr

_LOW_FLOATS = (TensorProto.FLOAT16, TensorProto.BFLOAT16)


def _expand_masks(g: GraphBuilder, indices) -> list:
    """Index entries aligned with the dims of the indexed tensor: None or int64 names.

    A bool (or uint8) mask of rank k stands for k dims: it becomes the k rows of
    NonZero(mask), one 1-D index per dim.
    """
    out = []
    for idx in indices:
        if idx is None:
            out.append(None)
            continue
        if g.get_type(idx) not in (BOOL, TensorProto.UINT8):
            out.append(cast_to(g, idx, INT64))
            continue
        k = rank_of(g, idx)
        if k == 0:
            raise UnsupportedOpError(
                "indexing with a 0-D bool mask is not supported", argument="indices"
            )
        nz = g.op.NonZero(cast_to(g, idx, BOOL))
        out.extend(g.op.Gather(nz, i64(i), axis=0) for i in range(k))
    while out and out[-1] is None:
        out.pop()
    return out


def _broadcast(g: GraphBuilder, names: list[str]) -> list[str]:
    """Index tensors broadcast to their common shape."""
    shapes = [g.get_shape(n) for n in names]
    if shapes[0] is not None and all(s == shapes[0] for s in shapes):
        return names
    common = names[0]
    for n in names[1:]:
        common = g.op.Expand(common, g.op.Shape(n))
    shape = g.op.Shape(common)
    return [g.op.Expand(n, shape) for n in names]


class _Advanced:
    """Layout of an advanced indexing: x transposed so that indexed dims come first.

    ``stacked`` has shape [*B, k] (B the broadcast shape of the k index tensors),
    GatherND/ScatterND on ``xt`` work in layout [*B, *rest]; torch puts B where the
    indexed dims were when they are adjacent, first otherwise.
    """

    def __init__(self, g: GraphBuilder, x: str, entries: list):
        self.rank = rank_of(g, x)
        self.adv = [i for i, e in enumerate(entries) if e is not None]
        rest = [d for d in range(self.rank) if d not in self.adv]
        self.perm = self.adv + rest
        self.xt = x if self.perm == list(range(self.rank)) else g.op.Transpose(x, perm=self.perm)
        self.nb = max(rank_of(g, entries[i]) for i in self.adv)
        idx = _broadcast(g, [entries[i] for i in self.adv])
        self.b_shape_of = idx[0]
        self.stacked = g.op.Concat(*[g.op.Unsqueeze(i, i64([-1])) for i in idx], axis=-1)
        k, p = len(self.adv), self.adv[0]
        self.n_rest = len(rest)
        # position of B in torch's result
        self.pos = p if self.adv == list(range(p, p + k)) else 0

    def to_torch(self, g: GraphBuilder, res: str) -> str:
        """[*B, *rest] -> torch's layout."""
        if self.pos == 0:
            return res
        nb, p = self.nb, self.pos
        perm = [nb + i for i in range(p)] + list(range(nb)) + list(range(nb + p, nb + self.n_rest))
        return g.op.Transpose(res, perm=perm)

    def from_torch(self, g: GraphBuilder, values: str) -> str:
        """Values in torch's result layout (broadcastable) -> [*B, *rest], expanded."""
        r = self.nb + self.n_rest
        vr = rank_of(g, values)
        if vr < r:
            values = g.op.Unsqueeze(values, i64(list(range(r - vr))))
        if self.pos > 0:
            nb, p = self.nb, self.pos
            perm = list(range(p, p + nb)) + list(range(p)) + list(range(p + nb, r))
            values = g.op.Transpose(values, perm=perm)
        k = len(self.adv)
        shape = g.op.Concat(g.op.Shape(self.b_shape_of), g.op.Shape(self.xt, start=k), axis=0)
        return g.op.Expand(values, shape)

    def back(self, g: GraphBuilder, xt: str) -> str:
        """Undoes the transposition of x."""
        if self.perm == list(range(self.rank)):
            return xt
        return g.op.Transpose(xt, perm=[int(i) for i in np.argsort(self.perm)])


@converter(aten.index.Tensor, aten._unsafe_index.Tensor)
def aten_index(g: GraphBuilder, x: str, indices: Sequence[str | None]) -> str:
    """index.Tensor(Tensor self, Tensor?[] indices) -> Tensor"""
    entries = _expand_masks(g, indices)
    pos = [i for i, e in enumerate(entries) if e is not None]
    if not pos:
        return g.op.Identity(x)
    if len(pos) == 1:
        return g.op.Gather(x, entries[pos[0]], axis=pos[0])
    adv = _Advanced(g, x, entries)
    return adv.to_torch(g, g.op.GatherND(adv.xt, adv.stacked))


def _compute_type(g: GraphBuilder, t: int, reduction: str | None) -> int:
    """onnxruntime has no float16 kernels for scatter reductions: float32 instead."""
    if reduction is None:
        return t
    need = 18 if reduction in ("max", "min") else 16
    if g.main_opset < need:
        raise UnsupportedOpError(
            f"a scatter with reduction={reduction!r} needs opset {need}", argument="reduction"
        )
    return TensorProto.FLOAT if t in _LOW_FLOATS else t


def _mask_at_front(g: GraphBuilder, x, indices, values) -> bool:
    """x[mask] = scalar with a mask over the leading dims: a Where is enough."""
    if len(indices) != 1 or indices[0] is None or g.get_type(indices[0]) != BOOL:
        return False
    shape = g.get_shape(values)
    return shape is not None and all(d == 1 for d in shape)


@converter(aten.index_put.default, aten._unsafe_index_put.default)
def aten_index_put(
    g: GraphBuilder,
    x: str,
    indices: Sequence[str | None],
    values: str,
    accumulate: bool = False,
    *,
    ctx: NodeContext,
):
    """index_put(Tensor self, Tensor?[] indices, Tensor values, bool accumulate=False)"""
    t = ctx.dtype()
    values = cast_to(g, values, t)
    if _mask_at_front(g, x, indices, values):
        mask = indices[0]
        extra = rank_of(g, x) - rank_of(g, mask)
        if extra:
            mask = g.op.Unsqueeze(mask, i64(list(range(-extra, 0))))
        if rank_of(g, values) > 0:
            values = g.op.Reshape(values, i64([]))
        if accumulate:
            return g.op.Add(x, g.op.Where(mask, values, cast_to(g, 0, t)))
        return g.op.Where(mask, values, x)
    entries = _expand_masks(g, indices)
    adv = _Advanced(g, x, entries)
    upd = adv.from_torch(g, values)
    reduction = "add" if accumulate else None
    ct = _compute_type(g, t, reduction)
    res = g.op.ScatterND(
        cast_to(g, adv.xt, ct), adv.stacked, cast_to(g, upd, ct), reduction=reduction
    )
    return adv.back(g, cast_to(g, res, t))


@converter(aten.index_put_.default)
def aten_index_put_(
    g: GraphBuilder,
    x: str,
    indices: Sequence[str | None],
    values: str,
    accumulate: bool = False,
    *,
    ctx: NodeContext,
):
    """index_put_(Tensor(a!) self, Tensor?[] indices, Tensor values, bool accumulate=False)"""
    inplace_guard(g, ctx=ctx)
    return aten_index_put(g, x, indices, values, accumulate, ctx=ctx)


@converter(aten.index_select.default)
def aten_index_select(g: GraphBuilder, x: str, dim: int, index: str) -> str:
    """index_select(Tensor self, int dim, Tensor index) -> Tensor"""
    if rank_of(g, x) == 0:  # a 0-d tensor is its own selection
        return g.op.Identity(x)
    if rank_of(g, index) == 0:
        index = g.op.Unsqueeze(index, i64([0]))
    return g.op.Gather(x, index, axis=dim)


@converter(aten.gather.default)
def aten_gather(g: GraphBuilder, x: str, dim: int, index: str, *, sparse_grad: bool = False) -> str:
    """gather(Tensor self, int dim, Tensor index, *, bool sparse_grad=False) -> Tensor"""
    return g.op.GatherElements(x, index, axis=dim)


def _shape_with_one(g: GraphBuilder, x: str, dim: int) -> str:
    """Shape of x with dimension ``dim`` replaced by 1."""
    r = rank_of(g, x)
    dim %= r
    parts = [g.op.Shape(x, start=0, end=dim)] if dim > 0 else []
    parts.append(g.make_constant(i64([1])))
    if dim + 1 < r:
        parts.append(g.op.Shape(x, start=dim + 1))
    return g.op.Concat(*parts, axis=0)


@converter(aten.take_along_dim.default)
def aten_take_along_dim(g: GraphBuilder, x: str, indices: str, dim: int | None = None) -> str:
    """take_along_dim(Tensor self, Tensor indices, int? dim=None) -> Tensor"""
    if dim is None:
        flat = i64([-1])
        return g.op.GatherElements(g.op.Reshape(x, flat), g.op.Reshape(indices, flat), axis=0)
    sx, si = g.get_shape(x), g.get_shape(indices)
    r = rank_of(g, x)
    same = (
        sx is not None
        and si is not None
        and None not in sx + si
        and all(a == b for i, (a, b) in enumerate(zip(sx, si)) if i != dim % r)
    )
    if not same:
        # broadcast every dim but ``dim``
        x, indices = (
            g.op.Expand(x, _shape_with_one(g, indices, dim)),
            g.op.Expand(indices, _shape_with_one(g, x, dim)),
        )
    return g.op.GatherElements(x, indices, axis=dim)


@converter(aten.take.default)
def aten_take(g: GraphBuilder, x: str, index: str) -> str:
    """take(Tensor self, Tensor index) -> Tensor"""
    return g.op.Gather(g.op.Reshape(x, i64([-1])), index, axis=0)


def _scatter(g: GraphBuilder, x, dim, index, src, reduction=None, *, ctx: NodeContext):
    """ScatterElements with torch's conventions (src may be larger than index)."""
    t = ctx.dtype()
    ct = _compute_type(g, t, reduction)
    if isinstance(src, str) and g.get_rank(src) == rank_of(g, index):
        si, ss = g.get_shape(index), g.get_shape(src)
        if si is None or si != ss:
            r = rank_of(g, index)
            src = g.op.Slice(src, i64([0] * r), g.op.Shape(index), i64(list(range(r))))
    else:  # a scalar
        src = g.op.Expand(cast_to(g, src, ct), g.op.Shape(index))
    res = g.op.ScatterElements(
        cast_to(g, x, ct), index, cast_to(g, src, ct), axis=dim, reduction=reduction
    )
    return cast_to(g, res, t)


@converter(aten.scatter.src, aten.scatter.value)
def aten_scatter(g: GraphBuilder, x, dim, index, src, *, ctx: NodeContext):
    """scatter.src(Tensor self, int dim, Tensor index, Tensor src) -> Tensor"""
    return _scatter(g, x, dim, index, src, ctx=ctx)


_REDUCE = {
    "add": "add",
    "sum": "add",
    "multiply": "mul",
    "prod": "mul",
    "amax": "max",
    "amin": "min",
}


@converter(aten.scatter.reduce, aten.scatter.value_reduce)
def aten_scatter_reduce_one(g: GraphBuilder, x, dim, index, src, *, reduce, ctx: NodeContext):
    """scatter.reduce(Tensor self, int dim, Tensor index, Tensor src, *, str reduce)"""
    return _scatter(g, x, dim, index, src, _REDUCE[reduce], ctx=ctx)


@converter(aten.scatter_add.default)
def aten_scatter_add(
    g: GraphBuilder, x: str, dim: int, index: str, src: str, *, ctx: NodeContext
) -> str:
    """scatter_add(Tensor self, int dim, Tensor index, Tensor src) -> Tensor"""
    return _scatter(g, x, dim, index, src, "add", ctx=ctx)


def _neutral(t: int, reduce: str):
    """Neutral element of a reduction in type ``t``."""
    if reduce in ("sum", "mean"):
        return 0
    if reduce == "prod":
        return 1
    if t in FLOAT_TYPES:
        return -np.inf if reduce == "amax" else np.inf
    if t == BOOL:
        return reduce == "amin"
    info = np.iinfo(onnx_to_np_dtype(t))
    return info.min if reduce == "amax" else info.max


@converter(aten.scatter_reduce.two)
def aten_scatter_reduce(
    g: GraphBuilder,
    x: str,
    dim: int,
    index: str,
    src: str,
    reduce: str,
    *,
    include_self: bool = True,
    ctx: NodeContext,
) -> str:
    """scatter_reduce.two(Tensor self, int dim, Tensor index, Tensor src, str reduce, *,
    bool include_self=True) -> Tensor"""
    t = ctx.dtype()
    if reduce not in _REDUCE and reduce != "mean":
        raise UnsupportedOpError(
            f"scatter_reduce with reduce={reduce!r} is not supported", argument="reduce"
        )
    if not include_self:
        # positions receiving values forget x: they start from the neutral element
        x = _scatter(g, x, dim, index, _neutral(t, reduce), ctx=ctx)
    if reduce != "mean":
        return _scatter(g, x, dim, index, src, _REDUCE[reduce], ctx=ctx)
    total = _scatter(g, x, dim, index, src, "add", ctx=ctx)
    start = g.op.ConstantOfShape(g.op.Shape(x), value=value_attr(int(include_self), INT64))
    count = g.op.ScatterElements(
        start, index, g.op.Expand(i64(1), g.op.Shape(index)), axis=dim, reduction="add"
    )
    count = cast_to(g, g.op.Max(count, i64(1)), t)
    if t in FLOAT_TYPES:
        return g.op.Div(total, count)
    # torch rounds the integer mean toward -inf
    ft = TensorProto.DOUBLE
    return cast_to(g, g.op.Floor(g.op.Div(cast_to(g, total, ft), cast_to(g, count, ft))), t)


@converter(aten.masked_fill.Scalar, aten.masked_fill.Tensor)
def aten_masked_fill(g: GraphBuilder, x, mask, value, *, ctx: NodeContext):
    """masked_fill.Scalar(Tensor self, Tensor mask, Scalar value) -> Tensor"""
    t = ctx.dtype()
    return g.op.Where(cast_to(g, mask, BOOL), cast_to(g, value, t), x)


@converter(aten.masked_fill_.Scalar, aten.masked_fill_.Tensor)
def aten_masked_fill_(g: GraphBuilder, x, mask, value, *, ctx: NodeContext):
    """masked_fill_.Scalar(Tensor(a!) self, Tensor mask, Scalar value) -> Tensor(a!)"""
    inplace_guard(g, ctx=ctx)
    return aten_masked_fill(g, x, mask, value, ctx=ctx)


@converter(aten.masked_scatter.default)
def aten_masked_scatter(g: GraphBuilder, x: str, mask: str, source: str) -> str:
    """masked_scatter(Tensor self, Tensor mask, Tensor source) -> Tensor"""
    mask = cast_to(g, mask, BOOL)
    if g.get_shape(mask) is None or g.get_shape(mask) != g.get_shape(x):
        mask = g.op.Expand(mask, g.op.Shape(x))
    idx = g.op.Transpose(g.op.NonZero(mask), perm=[1, 0])
    n = g.op.Shape(idx, start=0, end=1)
    upd = g.op.Slice(g.op.Reshape(source, i64([-1])), i64([0]), n)
    return g.op.ScatterND(x, idx, upd)


def _dim_selector(g: GraphBuilder, x, dim, index) -> str:
    """Bool tensor of rank(x), True along ``dim`` at the positions in ``index``."""
    r = rank_of(g, x)
    dim %= r
    index = g.op.Reshape(cast_to(g, index, INT64), i64([-1]))
    size = g.op.Shape(x, start=dim, end=dim + 1)
    zeros = g.op.ConstantOfShape(size, value=value_attr(False, BOOL))
    ones = g.op.Expand(cast_to(g, True, BOOL), g.op.Shape(index))
    sel = g.op.ScatterElements(zeros, index, ones, axis=0)
    axes = [i for i in range(r) if i != dim]
    return g.op.Unsqueeze(sel, i64(axes)) if axes else sel


@converter(aten.index_fill.int_Scalar, aten.index_fill.int_Tensor)
def aten_index_fill(g: GraphBuilder, x, dim, index, value, *, ctx: NodeContext):
    """index_fill.int_Scalar(Tensor self, int dim, Tensor index, Scalar value) -> Tensor"""
    if rank_of(g, x) == 0:
        return _rank0(g, aten_index_fill, x, dim, index, value, ctx=ctx)
    return g.op.Where(_dim_selector(g, x, dim, index), cast_to(g, value, ctx.dtype()), x)


def _rank0(g: GraphBuilder, fn, x, dim, index, *args, ctx: NodeContext):
    """Runs ``fn`` on 0-d tensors seen as 1-D ones (torch accepts dim 0 on them)."""
    one = i64([0])
    args = [
        g.op.Unsqueeze(a, one) if isinstance(a, str) and rank_of(g, a) == 0 else a for a in args
    ]
    index = g.op.Reshape(index, i64([-1]))
    return g.op.Squeeze(fn(g, g.op.Unsqueeze(x, one), 0, index, *args, ctx=ctx), one)


def _index_scatter(g: GraphBuilder, x, dim, index, source, reduction, *, ctx: NodeContext):
    r = rank_of(g, x)
    if r == 0:
        return _rank0(
            g,
            lambda g_, *a, ctx: _index_scatter(g_, *a, reduction, ctx=ctx),
            x,
            dim,
            index,
            source,
            ctx=ctx,
        )
    dim %= r
    shape = [1] * r
    shape[dim] = -1
    idx = g.op.Reshape(cast_to(g, index, INT64), i64(shape))
    idx = g.op.Expand(idx, g.op.Shape(source))
    return _scatter(g, x, dim, idx, source, reduction, ctx=ctx)


@converter(aten.index_add.default)
def aten_index_add(
    g: GraphBuilder,
    x: str,
    dim: int,
    index: str,
    source: str,
    *,
    alpha: float | str = 1,
    ctx: NodeContext,
):
    """index_add(Tensor self, int dim, Tensor index, Tensor source, *, Scalar alpha=1)"""
    if alpha != 1:
        source = g.op.Mul(source, cast_to(g, alpha, g.get_type(source)))
    return _index_scatter(g, x, dim, index, source, "add", ctx=ctx)


@converter(aten.index_copy.default)
def aten_index_copy(
    g: GraphBuilder, x: str, dim: int, index: str, source: str, *, ctx: NodeContext
) -> str:
    """index_copy(Tensor self, int dim, Tensor index, Tensor source) -> Tensor"""
    return _index_scatter(g, x, dim, index, source, None, ctx=ctx)
