"""What functionalization leaves of in-place code: select/slice/diagonal scatter,
diagonal, as_strided, unfold, zero, item.

``x[..., i] = y`` is captured as ``select`` + ``copy`` + ``select_scatter``,
``x[:, :n] = v`` as ``slice_scatter``, ``x.diagonal().fill_(0)`` as
``diagonal_scatter``: the scatter writes the updated view back into its base.
"""

from __future__ import annotations

from typing import Sequence

import numpy as np
import sympy
import torch
from onnx import TensorProto

from ....xbuilder import GraphBuilder
from ....xbuilder.dtypes import i64
from ...errors import UnsupportedOpError
from ..node_context import NodeContext
from ..registry import converter
from ._helpers import BOOL, INT64, aten, cast_to, rank_of
from .creation import full_of_shape
from .shape import I64_MAX, as_1d, input_dim, ints, reshape_to_output

_FLOAT_SCALAR = (TensorProto.FLOAT16, TensorProto.BFLOAT16)


def _scalar(g: GraphBuilder, value) -> str:
    """A 0-D int64 tensor from an int or an int64 scalar / 1-D name."""
    if isinstance(value, (int, np.integer)):
        return g.make_constant(i64(int(value)))
    value = cast_to(g, value, INT64)
    return value if g.get_rank(value) == 0 else g.op.Reshape(value, ints([]))


def _add(g: GraphBuilder, a, b):
    """a + b on ints or int64 names (1-D when a name is involved)."""
    if isinstance(a, int) and isinstance(b, int):
        return a + b
    if isinstance(b, int) and b == 0:
        return a
    return g.op.Add(as_1d(g, a), as_1d(g, b))


def _start_in_range(g: GraphBuilder, start, size):
    """torch's slice start: negative counts from the end, then clamped into [0, size]."""
    if start is None:
        return 0
    if isinstance(start, int) and isinstance(size, int):
        start = start + size if start < 0 else start
        return max(0, min(start, size))
    if isinstance(start, int) and start >= 0:
        # beyond the size, the slice and src are empty: Slice clamps the start itself
        return start
    s, n = as_1d(g, start), as_1d(g, size)
    if isinstance(start, int):  # negative
        return g.op.Max(g.op.Add(n, s), ints([0]))
    s = g.op.Where(g.op.Less(s, 0), g.op.Add(s, n), s)
    return g.op.Min(g.op.Max(s, 0), n)


def _until_end(end, size) -> bool:
    """Tells if a slice ending at ``end`` (step 1) goes up to the end of the dimension."""
    if end is None:
        return True
    if not isinstance(end, int):
        return False
    return end >= I64_MAX // 2 or (isinstance(size, int) and end >= size)


def _along(g: GraphBuilder, positions: str, dim: int, like: str) -> str:
    """1-D ``positions`` laid along ``dim`` and expanded to the shape of ``like``."""
    shape = [1] * rank_of(g, like)
    shape[dim] = -1
    return g.op.Expand(g.op.Reshape(positions, ints(shape)), g.op.Shape(like))


@converter(aten.select_scatter.default)
def aten_select_scatter(
    g: GraphBuilder, x: str, src: str, dim: int, index: int | str, *, ctx: NodeContext
) -> str:
    """select_scatter(Tensor self, Tensor src, int dim, SymInt index) -> Tensor"""
    t = ctx.dtype()
    dim %= rank_of(g, x)
    upd = g.op.Unsqueeze(cast_to(g, src, t), ints([dim]))
    size = input_dim(g, x, dim)
    if isinstance(index, int) and index < 0 and isinstance(size, int):
        index += size
    # ScatterElements accepts negative indices (counted from the end)
    idx = g.op.Expand(g.op.Reshape(as_1d(g, index), ints([1] * rank_of(g, x))), g.op.Shape(upd))
    return g.op.ScatterElements(cast_to(g, x, t), idx, upd, axis=dim)


@converter(aten.slice_scatter.default)
def aten_slice_scatter(
    g: GraphBuilder,
    x: str,
    src: str,
    dim: int = 0,
    start: int | str | None = None,
    end: int | str | None = None,
    step: int | str = 1,
    *,
    ctx: NodeContext,
) -> str:
    """slice_scatter(Tensor self, Tensor src, int dim=0, SymInt? start=None,
    SymInt? end=None, SymInt step=1) -> Tensor

    The length of the slice is the size of ``src`` along ``dim``: ``end`` only tells
    whether the slice reaches the end of the dimension.
    """
    t = ctx.dtype()
    dim %= rank_of(g, x)
    x, src = cast_to(g, x, t), cast_to(g, src, t)
    size = input_dim(g, x, dim)
    start = _start_in_range(g, start, size)
    n = input_dim(g, src, dim)
    if isinstance(step, int) and step == 1:
        pieces = []
        if not (isinstance(start, int) and start == 0):
            pieces.append(g.op.Slice(x, ints([0]), as_1d(g, start), ints([dim])))
        pieces.append(src)
        if not _until_end(end, size):
            after = as_1d(g, _add(g, start, n))
            pieces.append(g.op.Slice(x, after, ints([I64_MAX]), ints([dim])))
        if len(pieces) == 1:
            return g.op.Identity(src)
        return g.op.Concat(*pieces, axis=dim)
    # strided: scatter the slices of src at start, start + step, ...
    if all(isinstance(v, int) for v in (start, n, step)):
        positions = g.make_constant(np.arange(n, dtype=np.int64) * step + start)
    else:
        first, count, stride = _scalar(g, start), _scalar(g, n), _scalar(g, step)
        limit = g.op.Add(first, g.op.Mul(count, stride))
        positions = g.op.Range(first, limit, stride)
    return g.op.ScatterElements(x, _along(g, positions, dim, src), src, axis=dim)


class _Diagonal:
    """x transposed so that dim1, dim2 come last, then flattened into one dimension:
    the diagonal is a Gather of ``flat`` (positions ``(i + r0) * n2 + i + c0``)."""

    def __init__(self, g: GraphBuilder, x: str, offset: int, dim1: int, dim2: int):
        self.rank = r = rank_of(g, x)
        d1, d2 = dim1 % r, dim2 % r
        self.perm = [i for i in range(r) if i not in (d1, d2)] + [d1, d2]
        self.xt = x if self.perm == list(range(r)) else g.op.Transpose(x, perm=self.perm)
        self.offset = offset
        self.n1, self.n2 = input_dim(g, self.xt, r - 2), input_dim(g, self.xt, r - 1)
        static = isinstance(self.n1, int) and isinstance(self.n2, int)
        last = self.n1 * self.n2 if static else -1
        self.flat = g.op.Reshape(self.xt, ints([0] * (r - 2) + [last]))

    def length(self, g: GraphBuilder):
        """Length of the diagonal, an int or a 1-D int64 name."""
        n1, n2, off = self.n1, self.n2, self.offset
        if isinstance(n1, int) and isinstance(n2, int):
            return max(0, min(n1 + min(off, 0), n2 - max(off, 0)))
        a = _add(g, n1, min(off, 0))
        b = _add(g, n2, -max(off, 0))
        return g.op.Max(g.op.Min(as_1d(g, a), as_1d(g, b)), ints([0]))

    def positions(self, g: GraphBuilder, length) -> str:
        """Positions of the diagonal in the flattened last dimension:
        ``i * (n2 + 1) + r0 * n2 + c0`` with ``r0 = max(-offset, 0)``,
        ``c0 = max(offset, 0)``."""
        n2, r0, c0 = self.n2, max(-self.offset, 0), max(self.offset, 0)
        if isinstance(length, int) and isinstance(n2, int):
            return g.make_constant(np.arange(length, dtype=np.int64) * (n2 + 1) + r0 * n2 + c0)
        i = g.op.Range(_scalar(g, 0), _scalar(g, length), _scalar(g, 1))
        if isinstance(n2, int):
            start = r0 * n2 + c0
        else:
            start = c0 if r0 == 0 else n2 if r0 == 1 else g.op.Mul(n2, ints([r0]))
        return g.op.Add(g.op.Mul(i, as_1d(g, _add(g, n2, 1))), as_1d(g, start))

    def back(self, g: GraphBuilder, flat: str) -> str:
        """Flattened layout -> the layout of x."""
        xt = g.op.Reshape(flat, g.op.Shape(self.xt))
        if self.perm == list(range(self.rank)):
            return xt
        return g.op.Transpose(xt, perm=[int(i) for i in np.argsort(self.perm)])


@converter(aten.diagonal.default, aten.diagonal_copy.default)
def aten_diagonal(
    g: GraphBuilder, x: str, offset: int = 0, dim1: int = 0, dim2: int = 1, *, ctx: NodeContext
) -> str:
    """diagonal(Tensor(a) self, int offset=0, int dim1=0, int dim2=1) -> Tensor(a)"""
    d = _Diagonal(g, x, offset, dim1, dim2)
    length = ctx.shape(0)[-1]
    if not isinstance(length, int):
        length = d.length(g)
    return g.op.Gather(d.flat, d.positions(g, length), axis=-1)


@converter(aten.diagonal_scatter.default)
def aten_diagonal_scatter(
    g: GraphBuilder,
    x: str,
    src: str,
    offset: int = 0,
    dim1: int = 0,
    dim2: int = 1,
    *,
    ctx: NodeContext,
) -> str:
    """diagonal_scatter(Tensor self, Tensor src, int offset=0, int dim1=0,
    int dim2=1) -> Tensor"""
    t = ctx.dtype()
    d = _Diagonal(g, cast_to(g, x, t), offset, dim1, dim2)
    src = cast_to(g, src, t)
    idx = g.op.Expand(d.positions(g, input_dim(g, src, rank_of(g, src) - 1)), g.op.Shape(src))
    return d.back(g, g.op.ScatterElements(d.flat, idx, src, axis=-1))


@converter(aten.unfold.default)
def aten_unfold(
    g: GraphBuilder, x: str, dimension: int, size: int, step: int, *, ctx: NodeContext
) -> str:
    """unfold(Tensor(a) self, int dimension, int size, int step) -> Tensor(a)"""
    rank = rank_of(g, x)
    if rank == 0:
        return g.op.Reshape(x, ints([1]))
    dim = dimension % rank
    k = ctx.shape(0)[dim]
    if isinstance(k, int):
        windows = np.arange(k, dtype=np.int64)[:, None] * step + np.arange(size)[None, :]
        idx = g.make_constant(windows.astype(np.int64))
    else:
        n = g.op.Shape(x, start=dim, end=dim + 1)
        count = g.op.Add(g.op.Div(g.op.Sub(n, ints([size])), ints([step])), ints([1]))
        starts = g.op.Mul(g.op.Range(_scalar(g, 0), _scalar(g, count), _scalar(g, 1)), i64(step))
        idx = g.op.Add(g.op.Unsqueeze(starts, ints([1])), ints(range(size)))
    y = g.op.Gather(x, idx, axis=dim)  # [..., k, size, ...]
    if dim == rank - 1:
        return y
    perm = list(range(dim + 1)) + list(range(dim + 2, rank + 1)) + [dim + 1]
    return g.op.Transpose(y, perm=perm)


@converter(aten.zero.default)
def aten_zero(g: GraphBuilder, x: str, *, ctx: NodeContext) -> str:
    """zero(Tensor self) -> Tensor (what ``x.zero_()`` becomes)"""
    shape = g.get_shape(x)
    if shape is not None and all(isinstance(d, int) for d in shape):
        return full_of_shape(g, g.make_constant(ints(shape)), 0, ctx.dtype())
    return full_of_shape(g, g.op.Shape(x), 0, ctx.dtype())


@converter(aten.item.default, aten._local_scalar_dense.default)
def aten_item(g: GraphBuilder, x: str):
    """item(Tensor self) -> Scalar

    A SymInt is an int64 0-D tensor, a SymBool a bool one, a SymFloat keeps the
    float type (float16 and bfloat16 become float32 as a python float would).
    """
    if rank_of(g, x) != 0:
        x = g.op.Reshape(x, ints([]))
    t = g.get_type(x)
    if t == BOOL:
        return g.op.Identity(x)
    if t in _FLOAT_SCALAR:
        return g.op.Cast(x, to=TensorProto.FLOAT)
    if t in (TensorProto.FLOAT, TensorProto.DOUBLE):
        return g.op.Identity(x)
    y = cast_to(g, x, INT64)
    return g.op.Identity(x) if y == x else y


# as_strided


def _expr(v):
    return v.node.expr if isinstance(v, torch.SymInt) else sympy.Integer(int(v))


def _same(a, b) -> bool:
    return sympy.simplify(_expr(a) - _expr(b)) == 0


def _is_contiguous(shape, strides) -> bool:
    """Contiguous strides, dimensions of size 1 having any stride."""
    expected = sympy.Integer(1)
    for d, s in zip(reversed(shape), reversed(strides)):
        if not _same(d, 1) and sympy.simplify(_expr(s) - expected) != 0:
            return False
        expected = expected * _expr(d)
    return True


def _numel(shape):
    out = sympy.Integer(1)
    for d in shape:
        out = out * _expr(d)
    return out


def _sym_args(g: GraphBuilder, i: int, *, ctx: NodeContext) -> list:
    """The i-th argument of the current node, a list of ints and SymInts."""
    return [a.meta["val"] if isinstance(a, torch.fx.Node) else a for a in ctx.node.args[i]]


def _strided_view(g: GraphBuilder, size, stride, storage_offset, first: int, *, ctx: NodeContext):
    """``first``: position of ``size`` in the arguments of the node.

    None if ``as_strided(x, size, stride, storage_offset)`` views the whole input as a
    contiguous tensor, else the positions it reads in the flattened input (static shapes
    only); raises NotImplementedError when neither applies."""
    call = f"as_strided(size={list(size)}, stride={list(stride)}, storage_offset={storage_offset})"
    inp = ctx.node.args[0].meta.get("val")
    if not (
        isinstance(inp, torch.Tensor)
        and _same(inp.storage_offset(), 0)
        and _is_contiguous(inp.shape, inp.stride())
    ):
        raise UnsupportedOpError(
            f"{call} on a tensor which is not contiguous (or a view with a storage "
            "offset): ONNX tensors have no storage to stride over. What to try: call "
            ".contiguous() before as_strided, or use view/unfold/narrow in the model."
        )
    offset_zero = storage_offset is None or (
        isinstance(storage_offset, int) and storage_offset == 0
    )
    sym_size, sym_stride = _sym_args(g, first, ctx=ctx), _sym_args(g, first + 1, ctx=ctx)
    if (
        offset_zero
        and _is_contiguous(sym_size, sym_stride)
        and sympy.simplify(_numel(sym_size) - _numel(inp.shape)) == 0
    ):
        return None
    values = [*inp.shape, *size, *stride, storage_offset or 0]
    if not all(isinstance(v, int) for v in values):
        raise UnsupportedOpError(
            f"{call} is not a contiguous view of the whole input and the shapes are "
            "dynamic: only static shapes can be gathered. What to try: use "
            "view/unfold/narrow in the model."
        )
    pos = i64(storage_offset or 0)
    for n, s in zip(size, stride):
        pos = np.add.outer(pos, np.arange(n, dtype=np.int64) * s)
    if pos.size and pos.max() >= int(np.prod(inp.shape)):
        raise UnsupportedOpError(f"{call} reads beyond the input {tuple(inp.shape)}")
    return pos


@converter(aten.as_strided.default, aten.as_strided_copy.default)
def aten_as_strided(
    g: GraphBuilder,
    x: str,
    size: Sequence[int | str],
    stride: Sequence[int | str],
    storage_offset: int | str | None = None,
    *,
    ctx: NodeContext,
) -> str:
    """as_strided(Tensor(a) self, SymInt[] size, SymInt[] stride,
    SymInt? storage_offset=None) -> Tensor(a)

    ONNX has no storage: only a contiguous input is supported, viewed either as a
    contiguous tensor (a Reshape) or, with static shapes, through any strides (a Gather
    of the flattened input).
    """
    pos = _strided_view(g, size, stride, storage_offset, 1, ctx=ctx)
    if pos is None:
        return reshape_to_output(g, x, list(size), ctx=ctx)
    return g.op.Gather(g.op.Reshape(x, ints([-1])), g.make_constant(pos), axis=0)


@converter(aten.as_strided_scatter.default)
def aten_as_strided_scatter(
    g: GraphBuilder,
    x: str,
    src: str,
    size: Sequence[int | str],
    stride: Sequence[int | str],
    storage_offset: int | str | None = None,
    *,
    ctx: NodeContext,
) -> str:
    """as_strided_scatter(Tensor self, Tensor src, SymInt[] size, SymInt[] stride,
    SymInt? storage_offset=None) -> Tensor (what ``x.fill_diagonal_(v)`` becomes)"""
    t = ctx.dtype()
    src = cast_to(g, src, t)
    pos = _strided_view(g, size, stride, storage_offset, 2, ctx=ctx)
    if pos is None:
        return g.op.Reshape(src, g.op.Shape(x))
    flat = g.op.Reshape(cast_to(g, x, t), ints([-1]))
    upd = g.op.ScatterND(flat, g.make_constant(pos[..., None]), src)
    return g.op.Reshape(upd, g.op.Shape(x))
