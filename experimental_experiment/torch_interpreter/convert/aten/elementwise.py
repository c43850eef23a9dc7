"""Elementwise arithmetic, comparisons, logic and math functions."""

from __future__ import annotations

from onnx import TensorProto

from ....xbuilder import GraphBuilder
from ....xbuilder.dtypes import FLOAT_TYPES
from ..node_context import NodeContext
from ..registry import converter
from ._helpers import BOOL, aten, binary, cast_to, compute_type, promote


def _alpha(g, y, alpha, *, ctx: NodeContext):
    if alpha is None or alpha == 1:
        return y
    return g.op.Mul(cast_to(g, y, ctx.dtype()), cast_to(g, alpha, ctx.dtype()))


@converter(aten.add.Tensor, aten.add.Scalar)
def aten_add(g: GraphBuilder, x, y, *, alpha=1, ctx: NodeContext):
    """add(Tensor self, Tensor other, *, Scalar alpha=1) -> Tensor"""
    if ctx.dtype() == BOOL:
        return g.op.Or(x, y)
    return binary(g, "Add", x, _alpha(g, y, alpha, ctx=ctx), ctx=ctx)


@converter(aten.sub.Tensor, aten.sub.Scalar)
def aten_sub(g: GraphBuilder, x, y, *, alpha=1, ctx: NodeContext):
    """sub(Tensor self, Tensor other, *, Scalar alpha=1) -> Tensor"""
    return binary(g, "Sub", x, _alpha(g, y, alpha, ctx=ctx), ctx=ctx)


@converter(aten.rsub.Tensor, aten.rsub.Scalar)
def aten_rsub(g: GraphBuilder, x, y, *, alpha=1, ctx: NodeContext):
    """rsub(Tensor self, Tensor other, *, Scalar alpha=1) -> Tensor"""
    return binary(g, "Sub", y, _alpha(g, x, alpha, ctx=ctx), ctx=ctx)


@converter(aten.mul.Tensor, aten.mul.Scalar)
def aten_mul(g: GraphBuilder, x, y, *, ctx: NodeContext):
    """mul(Tensor self, Tensor other) -> Tensor"""
    if ctx.dtype() == BOOL:
        return g.op.And(x, y)
    return binary(g, "Mul", x, y, ctx=ctx)


@converter(aten.div.Tensor, aten.div.Scalar)
def aten_div(g: GraphBuilder, x, y, *, ctx: NodeContext):
    """div(Tensor self, Tensor other) -> Tensor (true division)"""
    return binary(g, "Div", x, y, ctx=ctx)


@converter(aten.div.Tensor_mode, aten.div.Scalar_mode)
def aten_div_mode(g: GraphBuilder, x, y, *, rounding_mode=None, ctx: NodeContext):
    """div(Tensor self, Tensor other, *, str? rounding_mode) -> Tensor"""
    t = ctx.dtype()
    if rounding_mode is None:
        return binary(g, "Div", x, y, ctx=ctx)
    ct = compute_type(t) if t in FLOAT_TYPES else TensorProto.DOUBLE
    q = g.op.Div(cast_to(g, x, ct), cast_to(g, y, ct))
    q = g.op.Floor(q) if rounding_mode == "floor" else _trunc(g, q)
    return cast_to(g, q, t)


def _trunc(g, x):
    return g.op.Mul(g.op.Sign(x), g.op.Floor(g.op.Abs(x)))


@converter(aten.floor_divide.default, aten.floor_divide.Scalar)
def aten_floor_divide(g: GraphBuilder, x, y, *, ctx: NodeContext):
    """floor_divide(Tensor self, Tensor other) -> Tensor"""
    return aten_div_mode(g, x, y, rounding_mode="floor", ctx=ctx)


@converter(aten.remainder.Tensor, aten.remainder.Scalar, aten.remainder.Scalar_Tensor)
def aten_remainder(g: GraphBuilder, x, y, *, ctx: NodeContext):
    """remainder(Tensor self, Tensor other) -> Tensor (sign of the divisor)"""
    t = ctx.dtype()
    x, y = cast_to(g, x, t), cast_to(g, y, t)
    if t in FLOAT_TYPES:
        return g.op.Sub(x, g.op.Mul(g.op.Floor(g.op.Div(x, y)), y))
    return g.op.Mod(x, y, fmod=0)


@converter(aten.fmod.Tensor, aten.fmod.Scalar)
def aten_fmod(g: GraphBuilder, x, y, *, ctx: NodeContext):
    """fmod(Tensor self, Tensor other) -> Tensor (sign of the dividend)"""
    t = ctx.dtype()
    return g.op.Mod(cast_to(g, x, t), cast_to(g, y, t), fmod=1)


@converter(aten.pow.Tensor_Tensor, aten.pow.Tensor_Scalar, aten.pow.Scalar)
def aten_pow(g: GraphBuilder, x, y, *, ctx: NodeContext):
    """pow(Tensor self, Tensor exponent) -> Tensor"""
    t = ctx.dtype()
    if y == 2 and isinstance(x, str):
        x = cast_to(g, x, t)
        return g.op.Mul(x, x)
    if y == 0.5 and isinstance(x, str):
        return g.op.Sqrt(cast_to(g, x, t))
    return g.op.Pow(cast_to(g, x, t), cast_to(g, y, t))


@converter(aten.maximum.default, aten.max.other)
def aten_maximum(g: GraphBuilder, x, y, *, ctx: NodeContext):
    """maximum(Tensor self, Tensor other) -> Tensor"""
    return binary(g, "Or" if ctx.dtype() == BOOL else "Max", x, y, ctx=ctx)


@converter(aten.minimum.default, aten.min.other)
def aten_minimum(g: GraphBuilder, x, y, *, ctx: NodeContext):
    """minimum(Tensor self, Tensor other) -> Tensor"""
    return binary(g, "And" if ctx.dtype() == BOOL else "Min", x, y, ctx=ctx)


def _compare(op: str):
    def fn(g: GraphBuilder, x, y):
        t = promote(g, x, y)
        return getattr(g.op, op)(cast_to(g, x, t), cast_to(g, y, t))

    fn.__name__ = f"aten_{op.lower()}"
    fn.__doc__ = f"{op}: compares in the promoted type, returns bool"
    return fn


converter(aten.eq.Tensor, aten.eq.Scalar)(_compare("Equal"))
converter(aten.lt.Tensor, aten.lt.Scalar)(_compare("Less"))
converter(aten.gt.Tensor, aten.gt.Scalar)(_compare("Greater"))
converter(aten.le.Tensor, aten.le.Scalar)(_compare("LessOrEqual"))
converter(aten.ge.Tensor, aten.ge.Scalar)(_compare("GreaterOrEqual"))


@converter(aten.ne.Tensor, aten.ne.Scalar)
def aten_ne(g: GraphBuilder, x, y):
    """ne(Tensor self, Tensor other) -> Tensor"""
    t = promote(g, x, y)
    return g.op.Not(g.op.Equal(cast_to(g, x, t), cast_to(g, y, t)))


def _logical(op: str):
    def fn(g: GraphBuilder, x, y, *, ctx: NodeContext):
        r = getattr(g.op, op)(cast_to(g, x, BOOL), cast_to(g, y, BOOL))
        return cast_to(g, r, ctx.dtype())

    fn.__name__ = f"aten_logical_{op.lower()}"
    fn.__doc__ = f"logical_{op.lower()}: inputs as bool"
    return fn


converter(aten.logical_and.default)(_logical("And"))
converter(aten.logical_or.default)(_logical("Or"))
converter(aten.logical_xor.default)(_logical("Xor"))


@converter(aten.logical_not.default)
def aten_logical_not(g: GraphBuilder, x: str, *, ctx: NodeContext) -> str:
    """logical_not(Tensor self) -> Tensor"""
    return cast_to(g, g.op.Not(cast_to(g, x, BOOL)), ctx.dtype())


def _bitwise(op: str, bool_op: str):
    def fn(g: GraphBuilder, x, y, *, ctx: NodeContext):
        t = ctx.dtype()
        name = bool_op if t == BOOL else op
        return getattr(g.op, name)(cast_to(g, x, t), cast_to(g, y, t))

    fn.__name__ = f"aten_{op.lower()}"
    fn.__doc__ = f"{op} on integers, {bool_op} on bool"
    return fn


converter(aten.bitwise_and.Tensor, aten.bitwise_and.Scalar, aten.__and__.Tensor)(
    _bitwise("BitwiseAnd", "And")
)
converter(aten.bitwise_or.Tensor, aten.bitwise_or.Scalar, aten.__or__.Tensor)(
    _bitwise("BitwiseOr", "Or")
)
converter(aten.bitwise_xor.Tensor, aten.bitwise_xor.Scalar, aten.__xor__.Tensor)(
    _bitwise("BitwiseXor", "Xor")
)


@converter(aten.bitwise_not.default)
def aten_bitwise_not(g: GraphBuilder, x: str) -> str:
    """bitwise_not(Tensor self) -> Tensor"""
    return g.op.Not(x) if g.get_type(x) == BOOL else g.op.BitwiseNot(x)


def _unary(op: str, *, float_only: bool = True):
    def fn(g: GraphBuilder, x, *, ctx: NodeContext):
        if not float_only:
            return getattr(g.op, op)(x)
        t = ctx.dtype()
        if op in ("Floor", "Ceil") and t not in FLOAT_TYPES:
            return g.op.Identity(x)  # an integer is its own floor
        # bfloat16: computed in float32 and cast back (see compute_type)
        return cast_to(g, getattr(g.op, op)(cast_to(g, x, compute_type(t))), t)

    fn.__name__ = f"aten_{op.lower()}"
    fn.__doc__ = f"{op} elementwise"
    return fn


for _op, _aten in [
    ("Abs", aten.abs.default),
    ("Neg", aten.neg.default),
    ("Exp", aten.exp.default),
    ("Log", aten.log.default),
    ("Sqrt", aten.sqrt.default),
    ("Sin", aten.sin.default),
    ("Cos", aten.cos.default),
    ("Tan", aten.tan.default),
    ("Asin", aten.asin.default),
    ("Acos", aten.acos.default),
    ("Atan", aten.atan.default),
    ("Sinh", aten.sinh.default),
    ("Cosh", aten.cosh.default),
    ("Tanh", aten.tanh.default),
    ("Asinh", aten.asinh.default),
    ("Acosh", aten.acosh.default),
    ("Atanh", aten.atanh.default),
    ("Erf", aten.erf.default),
    ("Floor", aten.floor.default),
    ("Ceil", aten.ceil.default),
    ("Sign", aten.sign.default),
    ("Reciprocal", aten.reciprocal.default),
    ("Sigmoid", aten.sigmoid.default),
]:
    converter(_aten)(_unary(_op))


@converter(aten.rsqrt.default)
def aten_rsqrt(g: GraphBuilder, x: str, *, ctx: NodeContext) -> str:
    """rsqrt(Tensor self) -> Tensor"""
    return g.op.Reciprocal(g.op.Sqrt(cast_to(g, x, ctx.dtype())))


@converter(aten.round.default)
def aten_round(g: GraphBuilder, x: str, *, ctx: NodeContext) -> str:
    """round(Tensor self) -> Tensor (half to even, as ONNX Round)"""
    t = ctx.dtype()
    if t not in FLOAT_TYPES:
        return g.op.Identity(x)
    return cast_to(g, g.op.Round(cast_to(g, x, compute_type(t))), t)


@converter(aten.trunc.default)
def aten_trunc(g: GraphBuilder, x: str, *, ctx: NodeContext) -> str:
    """trunc(Tensor self) -> Tensor"""
    t = ctx.dtype()
    if t not in FLOAT_TYPES:
        return g.op.Identity(x)
    return cast_to(g, _trunc(g, cast_to(g, x, compute_type(t))), t)


@converter(aten.log2.default)
def aten_log2(g: GraphBuilder, x: str, *, ctx: NodeContext) -> str:
    """log2(Tensor self) -> Tensor"""
    import math

    return g.op.Div(g.op.Log(cast_to(g, x, ctx.dtype())), math.log(2.0))


@converter(aten.log10.default)
def aten_log10(g: GraphBuilder, x: str, *, ctx: NodeContext) -> str:
    """log10(Tensor self) -> Tensor"""
    import math

    return g.op.Div(g.op.Log(cast_to(g, x, ctx.dtype())), math.log(10.0))


@converter(aten.log1p.default)
def aten_log1p(g: GraphBuilder, x: str, *, ctx: NodeContext) -> str:
    """log1p(Tensor self) -> Tensor"""
    return g.op.Log(g.op.Add(cast_to(g, x, ctx.dtype()), 1.0))


@converter(aten.expm1.default)
def aten_expm1(g: GraphBuilder, x: str, *, ctx: NodeContext) -> str:
    """expm1(Tensor self) -> Tensor"""
    return g.op.Sub(g.op.Exp(cast_to(g, x, ctx.dtype())), 1.0)


@converter(aten.square.default)
def aten_square(g: GraphBuilder, x: str, *, ctx: NodeContext) -> str:
    """square(Tensor self) -> Tensor"""
    x = cast_to(g, x, ctx.dtype())
    return g.op.Mul(x, x)


@converter(aten.isnan.default)
def aten_isnan(g: GraphBuilder, x: str) -> str:
    """isnan(Tensor self) -> Tensor"""
    return g.op.IsNaN(x)


@converter(aten.isinf.default)
def aten_isinf(g: GraphBuilder, x: str) -> str:
    """isinf(Tensor self) -> Tensor"""
    return g.op.IsInf(x)


@converter(aten.where.self, aten.where.ScalarSelf, aten.where.ScalarOther, aten.where.Scalar)
def aten_where(g: GraphBuilder, condition, x, y, *, ctx: NodeContext):
    """where(Tensor condition, Tensor self, Tensor other) -> Tensor"""
    t = ctx.dtype()
    return g.op.Where(cast_to(g, condition, BOOL), cast_to(g, x, t), cast_to(g, y, t))


@converter(aten.clamp.default, aten.clamp.Tensor, aten.clip.default)
def aten_clamp(g: GraphBuilder, x, min=None, max=None, *, ctx: NodeContext):
    """clamp(Tensor self, Scalar? min=None, Scalar? max=None) -> Tensor"""
    t = ctx.dtype()
    x = cast_to(g, x, t)
    if min is not None:
        x = g.op.Max(x, cast_to(g, min, t))
    if max is not None:
        x = g.op.Min(x, cast_to(g, max, t))
    return x if (min is not None or max is not None) else g.op.Identity(x)


@converter(aten.clamp_min.default, aten.clamp_min.Tensor)
def aten_clamp_min(g: GraphBuilder, x, min, *, ctx: NodeContext):
    """clamp_min(Tensor self, Scalar min) -> Tensor"""
    return aten_clamp(g, x, min, None, ctx=ctx)


@converter(aten.clamp_max.default, aten.clamp_max.Tensor)
def aten_clamp_max(g: GraphBuilder, x, max, *, ctx: NodeContext):
    """clamp_max(Tensor self, Scalar max) -> Tensor"""
    return aten_clamp(g, x, None, max, ctx=ctx)
