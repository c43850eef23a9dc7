"""Symbolic scalars: sizes of tensors and python arithmetic on SymInt/SymFloat/SymBool.

torch.export keeps the computations on dynamic dimensions as nodes calling
``operator.*``, ``torch.sym_*`` or ``math.*``. Every SymInt is an int64 0-D tensor,
a SymFloat a float32 0-D tensor, a SymBool a bool 0-D tensor.
"""

from __future__ import annotations

import math
import operator

import torch
from onnx import TensorProto

from ....xbuilder import GraphBuilder
from ....xbuilder.dtypes import FLOAT_TYPES, i64
from ..node_context import NodeContext
from ..registry import converter
from ._helpers import BOOL, INT64, aten, cast_to, promote, rank_of

FLOAT = TensorProto.FLOAT


@converter(aten.sym_size.int)
def aten_sym_size(g: GraphBuilder, x: str, dim: int):
    """sym_size.int(Tensor self, int dim) -> SymInt"""
    dim = dim % max(rank_of(g, x), 1)
    return g.op.Gather(g.op.Shape(x), i64(dim), axis=0)


@converter(aten.sym_numel.default)
def aten_sym_numel(g: GraphBuilder, x: str):
    """sym_numel(Tensor self) -> SymInt"""
    return g.op.Size(x)


@converter(
    aten._assert_scalar.default,
    aten.sym_constrain_range_for_size.default,
    aten.sym_constrain_range.default,
    aten._assert_async.msg,
    aten._assert_async.default,
)
def aten_assert_scalar(g: GraphBuilder, *args, **kwargs):
    """_assert_scalar(Scalar self, str assert_msg) -> () (runtime checks: dropped)"""
    return None


def _binary(op: str, *, compute: str = "out"):
    """``compute``: "out" computes in the output type, "float" in float32, "promote"
    in the type of both inputs (comparisons)."""

    def fn(g: GraphBuilder, x, y, *, ctx: NodeContext):
        if compute == "float":
            t = FLOAT
        elif compute == "promote":
            t = promote(g, x, y)
        else:
            t = ctx.dtype()
        return getattr(g.op, op)(cast_to(g, x, t), cast_to(g, y, t))

    fn.__name__ = f"sym_{op.lower()}"
    fn.__doc__ = f"{op} on symbolic scalars"
    return fn


converter(operator.add)(_binary("Add"))
converter(operator.sub)(_binary("Sub"))
converter(operator.mul)(_binary("Mul"))
converter(operator.truediv)(_binary("Div", compute="float"))
converter(torch.sym_max)(_binary("Max"))
converter(torch.sym_min)(_binary("Min"))
converter(operator.eq)(_binary("Equal", compute="promote"))
converter(operator.lt)(_binary("Less", compute="promote"))
converter(operator.le)(_binary("LessOrEqual", compute="promote"))
converter(operator.gt)(_binary("Greater", compute="promote"))
converter(operator.ge)(_binary("GreaterOrEqual", compute="promote"))


@converter(operator.ne)
def sym_ne(g: GraphBuilder, x, y):
    """x != y on symbolic scalars"""
    t = promote(g, x, y)
    return g.op.Not(g.op.Equal(cast_to(g, x, t), cast_to(g, y, t)))


@converter(operator.and_, operator.or_)
def sym_and_or(g: GraphBuilder, x, y, *, ctx: NodeContext):
    """x & y, x | y on SymBool (logical) or SymInt (bitwise)"""
    t = ctx.dtype()
    name = {operator.and_: "And", operator.or_: "Or"}[ctx.node.target]
    if t != BOOL:
        name = "Bitwise" + name
    return getattr(g.op, name)(cast_to(g, x, t), cast_to(g, y, t))


@converter(operator.floordiv)
def sym_floordiv(g: GraphBuilder, x, y, *, ctx: NodeContext):
    """x // y: rounds toward minus infinity, as python does"""
    t = ctx.dtype()
    x, y = cast_to(g, x, t), cast_to(g, y, t)
    if t in FLOAT_TYPES:
        return g.op.Floor(g.op.Div(x, y))
    # ONNX Div truncates integers; x - (x mod y) is an exact multiple of y
    return g.op.Div(g.op.Sub(x, g.op.Mod(x, y, fmod=0)), y)


@converter(operator.mod)
def sym_mod(g: GraphBuilder, x, y, *, ctx: NodeContext):
    """x % y: the sign of the divisor, as python does"""
    t = ctx.dtype()
    x, y = cast_to(g, x, t), cast_to(g, y, t)
    if t in FLOAT_TYPES:
        return g.op.Sub(x, g.op.Mul(g.op.Floor(g.op.Div(x, y)), y))
    return g.op.Mod(x, y, fmod=0)


@converter(operator.pow)
def sym_pow(g: GraphBuilder, x, y, *, ctx: NodeContext):
    """x ** y on symbolic scalars"""
    t = ctx.dtype()
    return g.op.Pow(cast_to(g, x, t), cast_to(g, y, t))


@converter(operator.neg)
def sym_neg(g: GraphBuilder, x, *, ctx: NodeContext):
    """-x on a symbolic scalar"""
    return g.op.Neg(cast_to(g, x, ctx.dtype()))


@converter(operator.not_, torch.sym_not)
def sym_not(g: GraphBuilder, x):
    """not x on a SymBool"""
    return g.op.Not(cast_to(g, x, BOOL))


@converter(torch.sym_sum)
def sym_sum(g: GraphBuilder, *args, ctx: NodeContext):
    """sym_sum([a, b, ...]) or sym_sum(a, b, ...): n-ary add"""
    values = list(args[0]) if len(args) == 1 and isinstance(args[0], (list, tuple)) else args
    t = ctx.dtype()
    result = cast_to(g, values[0], t)
    for v in values[1:]:  # ONNX Sum has no integer kernel
        result = g.op.Add(result, cast_to(g, v, t))
    return g.op.Identity(result) if len(values) == 1 else result


@converter(torch.sym_ite)
def sym_ite(g: GraphBuilder, cond, x, y, *, ctx: NodeContext):
    """sym_ite(b, t, f): t if b else f"""
    t = ctx.dtype()
    return g.op.Where(cast_to(g, cond, BOOL), cast_to(g, x, t), cast_to(g, y, t))


@converter(torch._sym_sqrt, math.sqrt)
def sym_sqrt(g: GraphBuilder, x):
    """sym_sqrt(x) -> SymFloat"""
    return g.op.Sqrt(cast_to(g, x, FLOAT))


@converter(torch.sym_float)
def sym_float(g: GraphBuilder, x):
    """sym_float(x) -> SymFloat (float32)"""
    return _cast_or_identity(g, x, FLOAT)


@converter(torch.sym_int)
def sym_int(g: GraphBuilder, x):
    """sym_int(x) -> SymInt (rounds toward zero)"""
    if isinstance(x, str) and g.get_type(x) in FLOAT_TYPES:
        x = g.op.Mul(g.op.Sign(x), g.op.Floor(g.op.Abs(x)))
    return _cast_or_identity(g, x, INT64)


def _rounding(op: str):
    def fn(g: GraphBuilder, x):
        if isinstance(x, str) and g.get_type(x) in FLOAT_TYPES:
            x = getattr(g.op, op)(x)
        return _cast_or_identity(g, x, INT64)

    fn.__name__ = f"math_{op.lower()}"
    fn.__doc__ = f"math.{op.lower()}(x) -> SymInt"
    return fn


converter(math.ceil)(_rounding("Ceil"))
converter(math.floor)(_rounding("Floor"))
converter(math.trunc)(sym_int)


def _cast_or_identity(g: GraphBuilder, x, elem_type: int) -> str:
    y = cast_to(g, x, elem_type)
    return g.op.Identity(y) if y == x else y
