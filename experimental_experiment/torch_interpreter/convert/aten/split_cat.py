"""Pieces of tensors: slice, select, narrow, split, chunk, unbind, cat, stack."""

from __future__ import annotations

import operator
from typing import Sequence

import torch

from ....xbuilder import GraphBuilder
from ....xbuilder.dtypes import i64
from ...errors import UnsupportedOpError
from ..node_context import NodeContext
from ..registry import converter
from ._helpers import INT64, aten, cast_to, rank_of, shape_tensor
from .shape import I64_MAX, as_1d, ints


@converter(aten.slice.Tensor, aten.slice_copy.Tensor)
def aten_slice(
    g: GraphBuilder,
    x: str,
    dim: int = 0,
    start: int | str | None = None,
    end: int | str | None = None,
    step: int | str = 1,
) -> str:
    """slice.Tensor(Tensor(a) self, int dim=0, SymInt? start=None, SymInt? end=None,
    SymInt step=1) -> Tensor(a)"""
    start = 0 if start is None else start
    end = I64_MAX if end is None else end
    if (
        isinstance(start, int)
        and start == 0
        and isinstance(end, int)
        and end >= I64_MAX
        and (isinstance(step, int) and step == 1)
    ):
        return g.op.Identity(x)
    dim %= max(rank_of(g, x), 1)
    return g.op.Slice(x, as_1d(g, start), as_1d(g, end), ints([dim]), as_1d(g, step))


@converter(aten.select.int, aten.select_copy.int)
def aten_select(g: GraphBuilder, x: str, dim: int, index: int | str) -> str:
    """select.int(Tensor(a) self, int dim, SymInt index) -> Tensor(a)"""
    dim %= rank_of(g, x)
    index = i64(index) if isinstance(index, int) else cast_to(g, index, INT64)
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
def aten_split(g: GraphBuilder, x: str, split_size: int | str, dim: int = 0, *, ctx: NodeContext):
    """split.Tensor(Tensor(a -> *) self, SymInt split_size, int dim=0) -> Tensor(a)[]"""
    n = len(ctx.val)
    return _split(
        g, x, dim, lambda d: [split_size] * (n - 1) + [_last_size(g, d, split_size, n)], ctx=ctx
    )


@converter(aten.split_with_sizes.default, aten.split_with_sizes_copy.default)
def aten_split_with_sizes(
    g: GraphBuilder, x: str, split_sizes: Sequence[int | str], dim: int = 0, *, ctx: NodeContext
):
    """split_with_sizes(Tensor(a -> *) self, SymInt[] split_sizes, int dim=0) -> Tensor(a)[]"""
    return _split(g, x, dim, lambda d: list(split_sizes), ctx=ctx)


@converter(aten.chunk.default, aten.unsafe_chunk.default)
def aten_chunk(g: GraphBuilder, x: str, chunks: int, dim: int = 0, *, ctx: NodeContext):
    """chunk(Tensor(a -> *) self, int chunks, int dim=0) -> Tensor(a)[]"""
    n = len(ctx.val)

    def runtime(d):
        if n == chunks and g.main_opset >= 18:
            return None  # Split(num_outputs=n) has chunks of ceil(d / n) as torch
        size = g.op.Div(g.op.Add(d, ints([chunks - 1])), ints([chunks]))
        return [size] * (n - 1) + [_last_size(g, d, size, n)]

    return _split(g, x, dim, runtime, ctx=ctx)


@converter(aten.tensor_split.sections)
def aten_tensor_split(
    g: GraphBuilder, x: str, sections: int | str, dim: int = 0, *, ctx: NodeContext
):
    """tensor_split.sections(Tensor(a -> *) self, SymInt sections, int dim=0) -> Tensor(a)[]"""
    n = len(ctx.val)

    def runtime(d):
        # the first d % n parts have one more element: size_i = (d + n - 1 - i) // n
        return [g.op.Div(g.op.Add(d, ints([n - 1 - i])), ints([n])) for i in range(n)]

    return _split(g, x, dim, runtime, ctx=ctx)


def _index_at(g: GraphBuilder, indices: str, i: int) -> str:
    """``indices[i]`` as a 1-D int64 tensor of one element."""
    return g.op.Slice(cast_to(g, indices, INT64), ints([i]), ints([i + 1]))


@converter(aten.tensor_split.tensor_indices_or_sections)
def aten_tensor_split_tensor(
    g: GraphBuilder, x: str, tensor_indices_or_sections: str, dim: int = 0, *, ctx: NodeContext
):
    """tensor_split.tensor_indices_or_sections(Tensor(a -> *) self,
    Tensor tensor_indices_or_sections, int dim=0) -> Tensor(a)[]

    A 1-D tensor of k indices gives k + 1 slices ``x[i_(j-1):i_j]`` along ``dim`` whose
    sizes depend on the indices' values (clamped and wrapped as Python slices)."""
    indices = tensor_indices_or_sections
    if rank_of(g, indices) != 1:
        raise UnsupportedOpError(
            "tensor_split: the number of sections is a 0-D tensor, so the number of "
            "outputs would depend on its value; pass the number of sections as a Python "
            "int, or the split indices as a 1-D tensor"
        )
    n = len(ctx.val)
    dim %= rank_of(g, x)
    pieces = []
    for i in range(n):
        start = ints([0]) if i == 0 else _index_at(g, indices, i - 1)
        end = ints([I64_MAX]) if i == n - 1 else _index_at(g, indices, i)
        pieces.append(g.op.Slice(x, start, end, ints([dim])))
    return tuple(pieces)


def _split_piece_offset(g: GraphBuilder, piece: torch.fx.Node, ctx: NodeContext):
    """Storage offset of ``piece = tensor_split(base, indices, dim)[i]`` (a contiguous
    base): the start of the slice, wrapped and clamped, times the stride of ``dim``;
    None for any other producer."""
    if piece.target is not operator.getitem:
        return None
    split, i = piece.args
    if getattr(split, "target", None) is not aten.tensor_split.tensor_indices_or_sections:
        return None
    base_node, indices_node = split.args[:2]
    base_val = base_node.meta.get("val")
    if not (
        isinstance(base_val, torch.Tensor)
        and base_val.is_contiguous()
        and isinstance(base_val.storage_offset(), int)
        and base_val.storage_offset() == 0
    ):
        return None
    if i == 0:
        return g.make_constant(i64(0))
    env = ctx.interpreter.env
    base, indices = env[base_node.name], env[indices_node.name]
    rank = rank_of(g, base)
    dim = (split.args[2] if len(split.args) > 2 else split.kwargs.get("dim", 0)) % rank
    size = g.op.Shape(base, start=dim, end=dim + 1)
    start = _index_at(g, indices, i - 1)
    start = g.op.Where(g.op.Less(start, ints([0])), g.op.Add(start, size), start)
    start = g.op.Min(g.op.Max(start, ints([0])), size)
    stride = (
        g.op.ReduceProd(g.op.Shape(base, start=dim + 1), keepdims=1)
        if dim + 1 < rank
        else ints([1])
    )
    return g.op.Squeeze(g.op.Mul(start, stride), ints([0]))


@converter(aten.sym_storage_offset.default)
def aten_sym_storage_offset(g: GraphBuilder, x: str, *, ctx: NodeContext):
    """sym_storage_offset(Tensor self) -> SymInt: an int64 scalar. ONNX tensors have no
    storage; the offset torch would see is known when static, or computed for the
    pieces of tensor_split with tensor indices (torch checks it is >= 0)."""
    source = ctx.node.args[0]
    val = source.meta.get("val")
    offset = val.storage_offset() if isinstance(val, torch.Tensor) else None
    if isinstance(offset, int):
        return g.make_constant(i64(offset))
    found = _split_piece_offset(g, source, ctx)
    if found is None:
        raise UnsupportedOpError(
            f"sym_storage_offset: the storage offset of {source.name!r} is symbolic "
            f"({offset}) and it is not a piece of tensor_split with tensor indices; ONNX "
            "tensors have no storage, remove the use of storage_offset() from the model "
            "or make the view's start static"
        )
    return found


@converter(aten.unbind.int, aten.unbind_copy.int)
def aten_unbind(g: GraphBuilder, x: str, dim: int = 0, *, ctx: NodeContext):
    """unbind.int(Tensor(a -> *) self, int dim=0) -> Tensor(a)[]"""
    n = len(ctx.val)
    dim %= rank_of(g, x)
    axes = ints([dim])
    if n == 1:
        return (g.op.Squeeze(x, axes),)
    parts = g.op.Split(x, ints([1] * n), axis=dim, outputs=n)
    return tuple(g.op.Squeeze(p, axes) for p in parts)


@converter(aten.cat.default, aten.concat.default, aten.concatenate.default)
def aten_cat(g: GraphBuilder, tensors: Sequence[str], dim: int = 0, *, ctx: NodeContext) -> str:
    """cat(Tensor[] tensors, int dim=0) -> Tensor (1-D empty tensors are skipped)"""
    t = ctx.dtype()
    rank = len(ctx.shape(0))
    kept = [x for x in tensors if g.get_shape(x) != (0,)] if rank > 1 else list(tensors)
    kept = [cast_to(g, x, t) for x in (kept or tensors[:1])]
    if len(kept) == 1:
        return g.op.Identity(kept[0])
    return g.op.Concat(*kept, axis=dim % rank)


@converter(aten.stack.default)
def aten_stack(g: GraphBuilder, tensors: Sequence[str], dim: int = 0, *, ctx: NodeContext) -> str:
    """stack(Tensor[] tensors, int dim=0) -> Tensor"""
    t = ctx.dtype()
    dim %= len(ctx.shape(0))
    parts = [g.op.Unsqueeze(cast_to(g, x, t), ints([dim])) for x in tensors]
    return parts[0] if len(parts) == 1 else g.op.Concat(*parts, axis=dim)
