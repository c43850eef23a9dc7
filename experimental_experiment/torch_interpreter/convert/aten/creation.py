"""Tensor creation: zeros, ones, full, *_like, new_*, scalar_tensor, arange, linspace, eye, fill."""

from __future__ import annotations

import numpy as np
import torch
from onnx import TensorProto, numpy_helper

from ....xbuilder import GraphBuilder
from ....xbuilder.dtypes import INT_TYPES, i64, onnx_to_np_dtype
from ...errors import UnsupportedOpError
from ..node_context import NodeContext
from ..registry import converter
from ._helpers import INT64, aten, cast_to, shape_tensor

DOUBLE = TensorProto.DOUBLE


_FUNCTIONALIZE = (
    "What to try: give to_onnx the nn.Module or the ExportedProgram rather than a raw "
    "graph module (they are functionalized before conversion), or use out-of-place "
    "operators in the model."
)


def inplace_guard(g: GraphBuilder, *, ctx: NodeContext) -> None:
    """Refuses an in-place op whose mutation a functional result cannot carry.

    The functional result only replaces the mutated tensor for the nodes using the
    in-place node; the conversion is wrong if the mutated tensor is a view of another
    one or is read again, under its old name, after the mutation.
    """
    node = ctx.node
    target = node.args[0]
    if not isinstance(target, torch.fx.Node):
        return
    if isinstance(target.target, torch._ops.OpOverload) and any(
        r.alias_info is not None and not r.alias_info.is_write
        for r in target.target._schema.returns
    ):
        raise UnsupportedOpError(
            f"{node.target} mutates {target.name!r}, a view ({target.target}), "
            f"the mutation of the base tensor is lost. {_FUNCTIONALIZE}"
        )
    later, n = set(), node.next
    while n.op != "root":
        later.add(n)
        n = n.next
    if any(u in later for u in target.users):
        raise UnsupportedOpError(
            f"{node.target} mutates {target.name!r} which is used again after the "
            f"mutation. {_FUNCTIONALIZE}"
        )


def value_attr(value, elem_type: int):
    """The ``value`` attribute of ConstantOfShape: one element of ``elem_type``."""
    arr = np.array([value]).astype(onnx_to_np_dtype(elem_type))
    return numpy_helper.from_array(arr, name="value")


def _shape_of(g: GraphBuilder, x: str) -> str:
    """1-D int64 shape of ``x``: a constant when static."""
    if g.is_static_shape(x):
        return g.make_constant(i64(g.get_shape(x)))
    return g.op.Shape(x)


def full_of_shape(g: GraphBuilder, shape: str, value, elem_type: int) -> str:
    """A tensor of shape ``shape`` (1-D int64 name) filled with ``value``.

    ``value`` is a python scalar or the name of a 0-D tensor (a SymInt, SymFloat or
    a tensor argument).
    """
    if isinstance(value, str):
        return g.op.Expand(cast_to(g, value, elem_type), shape)
    if elem_type == TensorProto.BFLOAT16 and g.main_opset < 20:
        # ConstantOfShape accepts bfloat16 from opset 20
        return g.op.Expand(cast_to(g, value, elem_type), shape)
    return g.op.ConstantOfShape(shape, value=value_attr(value, elem_type))


def _sizes(size) -> list:
    if isinstance(size, (int, str)):
        return [size]
    return list(size)


@converter(
    aten.zeros.default,
    aten.empty.memory_format,
    aten.empty_permuted.default,
    aten.empty_strided.default,
)
def aten_zeros(
    g: GraphBuilder,
    size,
    *args,
    dtype=None,
    layout=None,
    device=None,
    pin_memory=None,
    memory_format=None,
    ctx: NodeContext,
):
    """zeros(SymInt[] size, *, ScalarType? dtype=None, ...) -> Tensor (empty as zeros)"""
    return full_of_shape(g, shape_tensor(g, _sizes(size)), 0, ctx.dtype())


@converter(aten.ones.default)
def aten_ones(
    g: GraphBuilder,
    size,
    *,
    dtype=None,
    layout=None,
    device=None,
    pin_memory=None,
    ctx: NodeContext,
):
    """ones(SymInt[] size, *, ScalarType? dtype=None, ...) -> Tensor"""
    return full_of_shape(g, shape_tensor(g, _sizes(size)), 1, ctx.dtype())


@converter(aten.full.default)
def aten_full(
    g: GraphBuilder,
    size,
    fill_value,
    *,
    dtype=None,
    layout=None,
    device=None,
    pin_memory=None,
    ctx: NodeContext,
):
    """full(SymInt[] size, Scalar fill_value, *, ScalarType? dtype=None, ...) -> Tensor"""
    return full_of_shape(g, shape_tensor(g, _sizes(size)), fill_value, ctx.dtype())


@converter(aten.zeros_like.default, aten.empty_like.default)
def aten_zeros_like(
    g: GraphBuilder,
    x,
    *,
    dtype=None,
    layout=None,
    device=None,
    pin_memory=None,
    memory_format=None,
    ctx: NodeContext,
):
    """zeros_like(Tensor self, *, ScalarType? dtype=None, ...) -> Tensor"""
    return full_of_shape(g, _shape_of(g, x), 0, ctx.dtype())


@converter(aten.ones_like.default)
def aten_ones_like(
    g: GraphBuilder,
    x,
    *,
    dtype=None,
    layout=None,
    device=None,
    pin_memory=None,
    memory_format=None,
    ctx: NodeContext,
):
    """ones_like(Tensor self, *, ScalarType? dtype=None, ...) -> Tensor"""
    return full_of_shape(g, _shape_of(g, x), 1, ctx.dtype())


@converter(aten.full_like.default)
def aten_full_like(
    g: GraphBuilder,
    x,
    fill_value,
    *,
    dtype=None,
    layout=None,
    device=None,
    pin_memory=None,
    memory_format=None,
    ctx: NodeContext,
):
    """full_like(Tensor self, Scalar fill_value, *, ScalarType? dtype=None, ...) -> Tensor"""
    return full_of_shape(g, _shape_of(g, x), fill_value, ctx.dtype())


@converter(aten.new_zeros.default, aten.new_empty.default, aten.new_empty_strided.default)
def aten_new_zeros(
    g: GraphBuilder,
    x,
    size,
    *args,
    dtype=None,
    layout=None,
    device=None,
    pin_memory=None,
    ctx: NodeContext,
):
    """new_zeros(Tensor self, SymInt[] size, *, ScalarType? dtype=None, ...) -> Tensor"""
    return full_of_shape(g, shape_tensor(g, _sizes(size)), 0, ctx.dtype())


@converter(aten.new_ones.default)
def aten_new_ones(
    g: GraphBuilder,
    x,
    size,
    *,
    dtype=None,
    layout=None,
    device=None,
    pin_memory=None,
    ctx: NodeContext,
):
    """new_ones(Tensor self, SymInt[] size, *, ScalarType? dtype=None, ...) -> Tensor"""
    return full_of_shape(g, shape_tensor(g, _sizes(size)), 1, ctx.dtype())


@converter(aten.new_full.default)
def aten_new_full(
    g: GraphBuilder,
    x,
    size,
    fill_value,
    *,
    dtype=None,
    layout=None,
    device=None,
    pin_memory=None,
    ctx: NodeContext,
):
    """new_full(Tensor self, SymInt[] size, Scalar fill_value, *, ...) -> Tensor"""
    return full_of_shape(g, shape_tensor(g, _sizes(size)), fill_value, ctx.dtype())


@converter(aten.scalar_tensor.default)
def aten_scalar_tensor(
    g: GraphBuilder, s, *, dtype=None, layout=None, device=None, pin_memory=None, ctx: NodeContext
):
    """scalar_tensor(Scalar s, *, ScalarType? dtype=None, ...) -> Tensor"""
    t = ctx.dtype()
    if isinstance(s, str):
        s = cast_to(g, s, t)
        return s if g.get_rank(s) == 0 else g.op.Reshape(s, i64([]))
    return g.make_constant(np.array(s).astype(onnx_to_np_dtype(t)))


@converter(aten.fill.Scalar, aten.fill.Tensor)
def aten_fill(g: GraphBuilder, x, value, *, ctx: NodeContext):
    """fill(Tensor self, Scalar value) -> Tensor"""
    return full_of_shape(g, _shape_of(g, x), value, ctx.dtype())


@converter(aten.fill_.Scalar, aten.fill_.Tensor)
def aten_fill_(g: GraphBuilder, x, value, *, ctx: NodeContext):
    """fill_(Tensor(a!) self, Scalar value) -> Tensor(a!) (functional when safe)"""
    inplace_guard(g, ctx=ctx)
    return aten_fill(g, x, value, ctx=ctx)


def _is_int(g: GraphBuilder, a) -> bool:
    if isinstance(a, str):
        return g.get_type(a) in INT_TYPES
    return isinstance(a, int) and not isinstance(a, bool)


def _range_arg(g: GraphBuilder, a, t: int) -> str:
    a = cast_to(g, a, t)
    return a if g.get_rank(a) == 0 else g.op.Reshape(a, i64([]))


@converter(aten.arange.default, aten.arange.start, aten.arange.start_step)
def aten_arange(
    g: GraphBuilder, *args, dtype=None, layout=None, device=None, pin_memory=None, ctx: NodeContext
):
    """arange(Scalar start=0, Scalar end, Scalar step=1, *, ScalarType? dtype=None, ...)"""
    if len(args) == 1:
        start, end, step = 0, args[0], 1
    elif len(args) == 2:
        (start, end), step = args, 1
    else:
        start, end, step = args
    # integers in int64, anything else in double as torch does, then cast
    ct = INT64 if all(_is_int(g, a) for a in (start, end, step)) else DOUBLE
    r = g.op.Range(*(_range_arg(g, a, ct) for a in (start, end, step)))
    return cast_to(g, r, ctx.dtype())


@converter(
    aten.linspace.default,
    aten.linspace.Tensor_Tensor,
    aten.linspace.Tensor_Scalar,
    aten.linspace.Scalar_Tensor,
)
def aten_linspace(
    g: GraphBuilder,
    start,
    end,
    steps,
    *,
    dtype=None,
    layout=None,
    device=None,
    pin_memory=None,
    ctx: NodeContext,
):
    """linspace(Scalar start, Scalar end, int steps, *, ScalarType? dtype=None, ...)"""
    t = ctx.dtype()
    s, e = _range_arg(g, start, DOUBLE), _range_arg(g, end, DOUBLE)
    if steps == 1:
        return cast_to(g, g.op.Reshape(s, i64([1])), t)
    n = _range_arg(g, steps, DOUBLE)
    idx = g.op.Range(cast_to(g, 0.0, DOUBLE), n, cast_to(g, 1.0, DOUBLE))
    n1 = g.op.Sub(n, 1.0)
    step = g.op.Div(g.op.Sub(e, s), n1)
    # the first half counts from start, the second half from end (as torch does)
    half = g.op.Floor(g.op.Div(n, 2.0))
    low = g.op.Add(s, g.op.Mul(idx, step))
    high = g.op.Sub(e, g.op.Mul(g.op.Sub(n1, idx), step))
    res = g.op.Where(g.op.Less(idx, half), low, high)
    return cast_to(g, res, t)


@converter(aten.eye.default, aten.eye.m)
def aten_eye(
    g: GraphBuilder,
    n,
    m=None,
    *,
    dtype=None,
    layout=None,
    device=None,
    pin_memory=None,
    ctx: NodeContext,
):
    """eye(SymInt n, SymInt m, *, ScalarType? dtype=None, ...) -> Tensor"""
    one = cast_to(g, 1, INT64)
    zero = cast_to(g, 0, INT64)
    rows = g.op.Range(zero, _range_arg(g, n, INT64), one)
    cols = g.op.Range(zero, _range_arg(g, n if m is None else m, INT64), one)
    eq = g.op.Equal(g.op.Unsqueeze(rows, i64([1])), cols)
    return cast_to(g, eq, ctx.dtype())
