"""Views and layout: reshape, permute, expand, squeeze, flatten, repeat, repeat_interleave,
flip, roll.

Target shapes are built from torch's output shape whenever a dimension is static or
copies the input dimension at the same position (``0`` in Reshape, ``1`` in Expand);
the SymInt arguments are used only for what remains, so the common dynamic cases end
up with constant shapes.
"""

from __future__ import annotations

from typing import Sequence

import numpy as np

from ....xbuilder import GraphBuilder
from ....xbuilder.dtypes import i64
from ...errors import UnsupportedOpError
from ..node_context import NodeContext
from ..registry import converter
from ._helpers import INT64, aten, cast_to, rank_of, shape_tensor

I64_MAX = np.iinfo(np.int64).max
I64_MIN = np.iinfo(np.int64).min


def ints(values) -> np.ndarray:
    """1-D int64 constant array."""
    return i64(list(values))


def as_1d(g: GraphBuilder, value) -> str:
    """A 1-D int64 tensor of one element from an int or an int64 scalar name."""
    if isinstance(value, (int, np.integer)):
        return g.make_constant(ints([int(value)]))
    value = cast_to(g, value, INT64)
    return value if g.get_rank(value) == 1 else g.op.Unsqueeze(value, ints([0]))


def input_dim(g: GraphBuilder, x: str, axis: int):
    """Dimension ``axis`` of ``x``: an int if static, else a 1-D int64 tensor."""
    shape = g.get_shape(x)
    if shape is not None and isinstance(shape[axis], int):
        return shape[axis]
    if axis < 0:
        # Shape(start=-1, end=0) would be empty
        axis += rank_of(g, x)
    return g.op.Shape(x, start=axis, end=axis + 1)


def reshape_to_output(g: GraphBuilder, x: str, sizes: list, *, ctx: NodeContext) -> str:
    """Reshapes ``x`` to torch's output shape.

    ``sizes[i]`` (int, -1, SymInt name, or ``("dim", j)`` for the input dim j) is used
    for the output dimensions neither static nor equal to the input dimension at the
    same position.
    """
    out = ctx.shape(0)
    inp = g.get_shape(x) or ()
    has_zero = any(d == 0 for d in out) or any(isinstance(s, int) and s == 0 for s in sizes)
    dims = []
    for i, o in enumerate(out):
        if isinstance(o, int):
            dims.append(o)
        elif not has_zero and i < len(inp) and inp[i] == o:
            dims.append(0)  # copies the input dimension
        else:
            dims.append(sizes[i])
    dynamic = [i for i, d in enumerate(dims) if not isinstance(d, int)]
    if len(dynamic) == 1 and -1 not in dims and not has_zero:
        dims[dynamic[0]] = -1
    dims = [g.op.Shape(x, start=d[1], end=d[1] + 1) if isinstance(d, tuple) else d for d in dims]
    return g.op.Reshape(x, shape_tensor(g, dims), allowzero=1 if has_zero else None)


@converter(
    aten.view.default, aten._unsafe_view.default, aten.reshape.default, aten.view_copy.default
)
def aten_view(g: GraphBuilder, x: str, size: Sequence[int | str], *, ctx: NodeContext) -> str:
    """view(Tensor(a) self, SymInt[] size) -> Tensor(a)"""
    return reshape_to_output(g, x, list(size), ctx=ctx)


@converter(aten.flatten.using_ints)
def aten_flatten(
    g: GraphBuilder, x: str, start_dim: int = 0, end_dim: int = -1, *, ctx: NodeContext
) -> str:
    """flatten.using_ints(Tensor(a) self, int start_dim=0, int end_dim=-1) -> Tensor(a)"""
    rank = rank_of(g, x)
    if rank == 0:
        return g.op.Reshape(x, ints([1]))
    start, end = start_dim % rank, end_dim % rank
    if start == end:
        return g.op.Identity(x)
    sizes = [("dim", i) for i in range(start)] + [-1]
    sizes += [("dim", i) for i in range(end + 1, rank)]
    return reshape_to_output(g, x, sizes, ctx=ctx)


@converter(aten.unflatten.int)
def aten_unflatten(
    g: GraphBuilder, x: str, dim: int, sizes: Sequence[int | str], *, ctx: NodeContext
) -> str:
    """unflatten.int(Tensor(a) self, int dim, SymInt[] sizes) -> Tensor(a)"""
    rank = rank_of(g, x)
    dim %= rank
    full = [("dim", i) for i in range(dim)] + list(sizes)
    full += [("dim", i) for i in range(dim + 1, rank)]
    return reshape_to_output(g, x, full, ctx=ctx)


@converter(aten.permute.default, aten.permute_copy.default)
def aten_permute(g: GraphBuilder, x: str, dims: Sequence[int]) -> str:
    """permute(Tensor(a) self, int[] dims) -> Tensor(a)"""
    rank = rank_of(g, x)
    perm = [d % rank for d in dims] if rank else []
    if perm == list(range(rank)):
        return g.op.Identity(x)
    return g.op.Transpose(x, perm=perm)


@converter(aten.transpose.int, aten.transpose_copy.int, aten.swapaxes.default)
def aten_transpose(g: GraphBuilder, x, dim0, dim1):
    """transpose.int(Tensor(a) self, int dim0, int dim1) -> Tensor(a)"""
    rank = rank_of(g, x)
    perm = list(range(rank))
    if rank:
        d0, d1 = dim0 % rank, dim1 % rank
        perm[d0], perm[d1] = perm[d1], perm[d0]
    return aten_permute(g, x, perm)


@converter(aten.movedim.int, aten.movedim.intlist)
def aten_movedim(g: GraphBuilder, x, source, destination):
    """movedim.intlist(Tensor(a) self, int[] source, int[] destination) -> Tensor(a)"""
    rank = rank_of(g, x)
    src = [source] if isinstance(source, int) else list(source)
    dst = [destination] if isinstance(destination, int) else list(destination)
    perm = [-1] * rank
    for s, d in zip(src, dst):
        perm[d % rank] = s % rank
    rest = iter(i for i in range(rank) if i not in {s % rank for s in src})
    return aten_permute(g, x, [p if p >= 0 else next(rest) for p in perm])


@converter(aten.expand.default, aten.expand_copy.default)
def aten_expand(
    g: GraphBuilder, x: str, size: Sequence[int | str], *, implicit: bool = False, ctx: NodeContext
) -> str:
    """expand(Tensor(a) self, SymInt[] size, *, bool implicit=False) -> Tensor(a)"""
    out = ctx.shape(0)
    inp = g.get_shape(x) or ()
    offset = len(size) - rank_of(g, x)
    dims = []
    for i, s in enumerate(size):
        j = i - offset
        if isinstance(out[i], int):
            dims.append(out[i])
        elif (isinstance(s, int) and s == -1) or (j >= 0 and j < len(inp) and inp[j] == out[i]):
            dims.append(1)  # keeps the input dimension
        else:
            dims.append(s)
    if (
        offset == 0
        and len(inp) == len(dims)
        and all(isinstance(d, int) and d in (1, inp[i]) for i, d in enumerate(dims))
    ):
        return g.op.Identity(x)
    return g.op.Expand(x, shape_tensor(g, dims))


@converter(aten.expand_as.default)
def aten_expand_as(g: GraphBuilder, x: str, other: str, *, ctx: NodeContext) -> str:
    """expand_as(Tensor(a) self, Tensor other) -> Tensor(a)"""
    out = ctx.shape(0)
    if all(isinstance(d, int) for d in out):
        return g.op.Expand(x, ints(out))
    return g.op.Expand(x, g.op.Shape(other))


def _squeeze(g: GraphBuilder, x, dims, *, ctx: NodeContext):
    rank = rank_of(g, x)
    if rank == 0:
        return g.op.Identity(x)
    shape = g.get_shape(x)
    dims = range(rank) if dims is None else sorted({d % rank for d in dims})
    if shape is None:  # unknown dims: fine if torch squeezes every requested one
        if len(dims) != rank - len(ctx.shape(0)):
            raise UnsupportedOpError(f"squeeze of {x!r}: its shape is unknown", argument="self")
        return g.op.Squeeze(x, ints(dims))
    axes = [d for d in dims if shape[d] == 1]
    if not axes:
        return g.op.Identity(x)
    return g.op.Squeeze(x, ints(axes))


@converter(aten.squeeze.default, aten.squeeze_copy.default)
def aten_squeeze(g: GraphBuilder, x: str, *, ctx: NodeContext) -> str:
    """squeeze(Tensor(a) self) -> Tensor(a)"""
    return _squeeze(g, x, None, ctx=ctx)


@converter(aten.squeeze.dim, aten.squeeze_copy.dim)
def aten_squeeze_dim(g: GraphBuilder, x: str, dim: int, *, ctx: NodeContext) -> str:
    """squeeze.dim(Tensor(a) self, int dim) -> Tensor(a)"""
    return _squeeze(g, x, [dim], ctx=ctx)


@converter(aten.squeeze.dims, aten.squeeze_copy.dims)
def aten_squeeze_dims(g: GraphBuilder, x: str, dim: Sequence[int], *, ctx: NodeContext) -> str:
    """squeeze.dims(Tensor(a) self, int[] dim) -> Tensor(a)"""
    return _squeeze(g, x, list(dim), ctx=ctx)


@converter(aten.unsqueeze.default, aten.unsqueeze_copy.default)
def aten_unsqueeze(g: GraphBuilder, x: str, dim: int) -> str:
    """unsqueeze(Tensor(a) self, int dim) -> Tensor(a)"""
    return g.op.Unsqueeze(x, ints([dim % (rank_of(g, x) + 1)]))


@converter(aten.repeat.default)
def aten_repeat(g: GraphBuilder, x: str, repeats: Sequence[int | str]) -> str:
    """repeat(Tensor self, SymInt[] repeats) -> Tensor"""
    extra = len(repeats) - rank_of(g, x)
    if extra > 0:
        x = g.op.Unsqueeze(x, ints(range(extra)))
    if all(isinstance(r, int) and r == 1 for r in repeats):
        return g.op.Identity(x)
    return g.op.Tile(x, shape_tensor(g, list(repeats)))


@converter(aten.tile.default)
def aten_tile(g: GraphBuilder, x: str, dims: Sequence[int | str]) -> str:
    """tile(Tensor self, SymInt[] dims) -> Tensor"""
    missing = rank_of(g, x) - len(dims)
    return aten_repeat(g, x, [1] * max(missing, 0) + list(dims))


@converter(aten.repeat_interleave.self_int)
def aten_repeat_interleave_int(
    g: GraphBuilder,
    x: str,
    repeats: int | str,
    dim: int | None = None,
    *,
    output_size: int | str | None = None,
    ctx: NodeContext,
) -> str:
    """repeat_interleave.self_int(Tensor self, SymInt repeats, int? dim=None, *,
    SymInt? output_size=None) -> Tensor

    Every element repeated ``repeats`` times along ``dim`` (the flattened tensor when
    None): Unsqueeze after ``dim``, Tile along the new axis, Reshape merging both."""
    if dim is None:
        x = g.op.Reshape(x, ints([-1]))
        dim = 0
    rank = rank_of(g, x)
    if rank == 0:
        x = g.op.Reshape(x, ints([1]))
        rank = 1
    dim %= rank
    y = g.op.Unsqueeze(x, ints([dim + 1]))
    reps = [1] * (rank + 1)
    reps[dim + 1] = repeats
    if not (isinstance(repeats, int) and repeats == 1):
        y = g.op.Tile(y, shape_tensor(g, reps))
    sizes = [("dim", i) for i in range(dim)] + [-1]
    sizes += [("dim", i + 1) for i in range(dim + 1, rank)]
    return reshape_to_output(g, y, sizes, ctx=ctx)


@converter(aten.repeat_interleave.Tensor)
def aten_repeat_interleave_tensor(
    g: GraphBuilder, repeats: str, *, output_size: int | str | None = None
) -> str:
    """repeat_interleave.Tensor(Tensor repeats, *, SymInt? output_size=None) -> Tensor

    Index ``i`` repeated ``repeats[i]`` times (torch decomposes
    ``x.repeat_interleave(tensor, dim)`` into this and ``index_select``). The output
    size depends on the data: position ``p`` of the output takes the number of
    cumulated repeats ``<= p``, a comparison of the ``n`` cumulated sums with the
    ``sum(repeats)`` positions (``n * sum(repeats)`` booleans)."""
    repeats = cast_to(g, g.op.Reshape(repeats, ints([-1])), INT64)
    ends = g.op.CumSum(repeats, ints([0]))
    if output_size is None:
        total = g.op.ReduceSum(repeats, keepdims=0)
    elif isinstance(output_size, int):
        total = g.make_constant(np.array(output_size, dtype=np.int64))
    else:
        total = g.op.Reshape(cast_to(g, output_size, INT64), ints([]))
    positions = g.op.Range(
        g.make_constant(np.array(0, dtype=np.int64)),
        total,
        g.make_constant(np.array(1, dtype=np.int64)),
    )
    passed = g.op.LessOrEqual(g.op.Unsqueeze(ends, ints([0])), g.op.Unsqueeze(positions, ints([1])))
    return g.op.ReduceSum(g.op.Cast(passed, to=7), ints([1]), keepdims=0)


@converter(aten.flip.default)
def aten_flip(g: GraphBuilder, x: str, dims: Sequence[int]) -> str:
    """flip(Tensor self, int[] dims) -> Tensor"""
    rank = rank_of(g, x)
    axes = sorted({d % rank for d in dims}) if rank else []
    if not axes:
        return g.op.Identity(x)
    n = len(axes)
    return g.op.Slice(x, ints([-1] * n), ints([I64_MIN] * n), ints(axes), ints([-1] * n))


def _roll_axis(g: GraphBuilder, x, shift, axis: int):
    """Rolls along one axis: Concat(x[k:], x[:k]) with k = -shift mod size."""
    size = input_dim(g, x, axis)
    if isinstance(size, int) and isinstance(shift, int):
        k = (-shift) % size if size else 0
        if k == 0:
            return x
        k = ints([k])
    else:
        neg = ints([-shift]) if isinstance(shift, int) else g.op.Neg(as_1d(g, shift))
        k = g.op.Mod(neg, as_1d(g, size), fmod=0)
    first = g.op.Slice(x, k, ints([I64_MAX]), ints([axis]))
    second = g.op.Slice(x, ints([0]), k, ints([axis]))
    return g.op.Concat(first, second, axis=axis)


@converter(aten.roll.default)
def aten_roll(
    g: GraphBuilder, x: str, shifts: int | str | Sequence[int | str], dims: int | Sequence[int] = ()
) -> str:
    """roll(Tensor self, SymInt[1] shifts, int[1] dims=[]) -> Tensor"""
    shifts = [shifts] if isinstance(shifts, (int, str)) else list(shifts)
    dims = [dims] if isinstance(dims, int) else list(dims)
    if not dims:
        flat = g.op.Reshape(x, ints([-1]))
        rolled = _roll_axis(g, flat, shifts[0], 0)
        return g.op.Reshape(rolled, g.op.Shape(x))
    rank = rank_of(g, x)
    y = x
    for shift, dim in zip(shifts, dims):
        y = _roll_axis(g, y, shift, dim % rank)
    return g.op.Identity(y) if y == x else y
