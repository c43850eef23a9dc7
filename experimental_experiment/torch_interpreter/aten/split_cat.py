"""Pieces of tensors: slice, select, narrow, split, chunk, unbind, cat, stack."""

from __future__ import annotations

from ...xbuilder import GraphBuilder
from ...xbuilder.dtypes import i64
from ..node_context import NodeContext
from ..registry import converter
from ._helpers import INT64, aten, cast_to, rank_of, shape_tensor
from .shape import I64_MAX, as_1d, ints


@converter(aten.slice.Tensor, aten.slice_copy.Tensor)
def aten_slice(g: GraphBuilder, x, dim=0, start=None, end=None, step=1):
    """slice.Tensor(Tensor(a) self, int dim=0, SymInt? start=None, SymInt? end=None,
    SymInt step=1) -> Tensor(a)"""
    start = 0 if start is None else start
    end = I64_MAX if end is None else end
    if isinstance(start, int) and start == 0 and isinstance(end, int) and end >= I64_MAX and (
        isinstance(step, int) and step == 1
    ):
        return g.op.Identity(x)
    dim %= max(rank_of(g, x), 1)
    return g.op.Slice(x, as_1d(g, start), as_1d(g, end), ints([dim]), as_1d(g, step))


@converter(aten.select.int, aten.select_copy.int)
def aten_select(g: GraphBuilder, x, dim, index):
    """select.int(Tensor(a) self, int dim, SymInt index) -> Tensor(a)"""
    dim %= rank_of(g, x)
    index = i64(index) if isinstance(index, int) else cast_to(
        g, index, INT64
    )
    return g.op.Gather(x, index, axis=dim)


@converter(aten.narrow.default, aten.narrow.Tensor, aten.narrow_copy.default)
def aten_narrow(g: GraphBuilder, x, dim, start, length):
    """narrow(Tensor(a) self, int dim, SymInt start, SymInt length) -> Tensor(a)"""
    if isinstance(start, int) and isinstance(length, int):
        end = start + length
        if start < 0 and end >= 0:
            end = I64_MAX  # narrow(x, d, -k, k): up to the end
    elif isinstance(start, int) and start == 0:
        end = length
    else:
        end = g.op.Add(cast_to(g, start, INT64), cast_to(g, length, INT64))
    return aten_slice(g, x, dim, start, end, 1)


def _split(g: GraphBuilder, x, dim: int, runtime_sizes, *, ctx: NodeContext) -> tuple:
    """Splits along ``dim`` in as many outputs as torch has; the sizes come from torch's
    output shapes when static, else from ``runtime_sizes(dim_size)`` (a list of ints and
    int64 scalar or 1-D names, or None to split in equal parts)."""
    n = len(ctx.val)
    rank = rank_of(g, x)
    dim %= rank
    if n == 1:
        return (g.op.Identity(x),)
    sizes = [ctx.shape(i)[dim] for i in range(n)]
    if all(isinstance(s, int) for s in sizes):
        return g.op.Split(x, ints(sizes), axis=dim, outputs=n)
    dim_size = g.op.Shape(x, start=dim, end=dim + 1)
    sizes = runtime_sizes(dim_size)
    if sizes is None:
        return g.op.Split(x, axis=dim, num_outputs=n, outputs=n)
    return g.op.Split(x, shape_tensor(g, sizes), axis=dim, outputs=n)


def _last_size(g: GraphBuilder, dim_size: str, size, n: int):
    """dim_size - size * (n - 1), 1-D."""
    used = g.op.Mul(as_1d(g, size), ints([n - 1]))
    return g.op.Sub(dim_size, used)


@converter(aten.split.Tensor, aten.split_copy.Tensor, aten.unsafe_split.Tensor)
def aten_split(g: GraphBuilder, x, split_size, dim=0, *, ctx: NodeContext):
    """split.Tensor(Tensor(a -> *) self, SymInt split_size, int dim=0) -> Tensor(a)[]"""
    n = len(ctx.val)
    return _split(g, x, dim, lambda d: [split_size] * (n - 1) + [
        _last_size(g, d, split_size, n)], ctx=ctx)


@converter(aten.split_with_sizes.default, aten.split_with_sizes_copy.default)
def aten_split_with_sizes(g: GraphBuilder, x, split_sizes, dim=0, *, ctx: NodeContext):
    """split_with_sizes(Tensor(a -> *) self, SymInt[] split_sizes, int dim=0) -> Tensor(a)[]"""
    return _split(g, x, dim, lambda d: list(split_sizes), ctx=ctx)


@converter(aten.chunk.default, aten.unsafe_chunk.default)
def aten_chunk(g: GraphBuilder, x, chunks, dim=0, *, ctx: NodeContext):
    """chunk(Tensor(a -> *) self, int chunks, int dim=0) -> Tensor(a)[]"""
    n = len(ctx.val)

    def runtime(d):
        if n == chunks and g.main_opset >= 18:
            return None  # Split(num_outputs=n) has chunks of ceil(d / n) as torch
        size = g.op.Div(g.op.Add(d, ints([chunks - 1])), ints([chunks]))
        return [size] * (n - 1) + [_last_size(g, d, size, n)]

    return _split(g, x, dim, runtime, ctx=ctx)


@converter(aten.tensor_split.sections)
def aten_tensor_split(g: GraphBuilder, x, sections, dim=0, *, ctx: NodeContext):
    """tensor_split.sections(Tensor(a -> *) self, SymInt sections, int dim=0) -> Tensor(a)[]"""
    n = len(ctx.val)

    def runtime(d):
        # the first d % n parts have one more element: size_i = (d + n - 1 - i) // n
        return [g.op.Div(g.op.Add(d, ints([n - 1 - i])), ints([n])) for i in range(n)]

    return _split(g, x, dim, runtime, ctx=ctx)


@converter(aten.unbind.int, aten.unbind_copy.int)
def aten_unbind(g: GraphBuilder, x, dim=0, *, ctx: NodeContext):
    """unbind.int(Tensor(a -> *) self, int dim=0) -> Tensor(a)[]"""
    n = len(ctx.val)
    dim %= rank_of(g, x)
    axes = ints([dim])
    if n == 1:
        return (g.op.Squeeze(x, axes),)
    parts = g.op.Split(x, ints([1] * n), axis=dim, outputs=n)
    return tuple(g.op.Squeeze(p, axes) for p in parts)


@converter(aten.cat.default, aten.concat.default, aten.concatenate.default)
def aten_cat(g: GraphBuilder, tensors, dim=0, *, ctx: NodeContext):
    """cat(Tensor[] tensors, int dim=0) -> Tensor (1-D empty tensors are skipped)"""
    t = ctx.dtype()
    rank = len(ctx.shape(0))
    kept = [x for x in tensors if g.get_shape(x) != (0,)] if rank > 1 else list(tensors)
    kept = [cast_to(g, x, t) for x in (kept or tensors[:1])]
    if len(kept) == 1:
        return g.op.Identity(kept[0])
    return g.op.Concat(*kept, axis=dim % rank)


@converter(aten.stack.default)
def aten_stack(g: GraphBuilder, tensors, dim=0, *, ctx: NodeContext):
    """stack(Tensor[] tensors, int dim=0) -> Tensor"""
    t = ctx.dtype()
    dim %= len(ctx.shape(0))
    parts = [g.op.Unsqueeze(cast_to(g, x, t), ints([dim])) for x in tensors]
    return parts[0] if len(parts) == 1 else g.op.Concat(*parts, axis=dim)
