"""Elementwise operators composed of several ONNX ops: atan2, copysign, signbit, fmax,
fmin, exp2, hypot, erfc, round with decimals, frexp, angle, heaviside."""

from __future__ import annotations

import math

import numpy as np
from onnx import TensorProto

from ....xbuilder import GraphBuilder
from ....xbuilder.dtypes import FLOAT_TYPES, onnx_to_np_dtype
from ...errors import UnsupportedOpError
from ..node_context import NodeContext
from ..registry import converter
from ._helpers import BOOL, aten, cast_to, promote


def _float_inputs(g: GraphBuilder, *xs, ctx: NodeContext):
    t = ctx.dtype()
    return [cast_to(g, x, t) for x in xs]


def _c(g: GraphBuilder, like: str, value) -> str:
    return g.make_constant(np.asarray(value, dtype=onnx_to_np_dtype(g.get_type(like))))


@converter(aten.atan2.default)
def aten_atan2(g: GraphBuilder, y: str, x: str, *, ctx: NodeContext) -> str:
    """atan2(Tensor self, Tensor other) -> Tensor"""
    y, x = _float_inputs(g, y, x, ctx=ctx)
    zero = _c(g, x, 0)
    safe_x = g.op.Where(g.op.Equal(x, zero), _c(g, x, 1), x)
    base = g.op.Atan(g.op.Div(y, safe_x))
    pi = _c(g, x, math.pi)
    # x < 0: add +-pi depending on the sign of y (signbit keeps -0.)
    shift = g.op.Where(_signbit(g, y), g.op.Neg(pi), pi)
    res = g.op.Where(g.op.Less(x, zero), g.op.Add(base, shift), base)
    # x == 0: +-pi/2 (0 when y == 0, with the sign rules of atan2 for x = +-0)
    half = g.op.Where(_signbit(g, y), _c(g, x, -math.pi / 2), _c(g, x, math.pi / 2))
    on_axis = g.op.Where(
        g.op.Equal(y, zero),
        g.op.Where(_signbit(g, x), g.op.Where(_signbit(g, y), g.op.Neg(pi), pi), y),
        half,
    )
    return g.op.Where(g.op.Equal(x, zero), on_axis, res)


def _signbit(g: GraphBuilder, x: str) -> str:
    """True for negative values, -0. and -inf (1/x tells -0. from 0.)."""
    zero = _c(g, x, 0)
    neg_zero = g.op.And(g.op.Equal(x, zero), g.op.Less(g.op.Reciprocal(x), zero))
    return g.op.Or(g.op.Less(x, zero), neg_zero)


@converter(aten.signbit.default)
def aten_signbit(g: GraphBuilder, x: str) -> str:
    """signbit(Tensor self) -> Tensor"""
    if g.get_type(x) == BOOL:
        return g.op.And(x, g.op.Not(x))  # always False
    if np.dtype(onnx_to_np_dtype(g.get_type(x))).kind in "iu":
        return g.op.Less(x, _c(g, x, 0))
    return _signbit(g, x)


@converter(aten.copysign.Tensor, aten.copysign.Scalar)
def aten_copysign(g: GraphBuilder, x, y, *, ctx: NodeContext):
    """copysign.Tensor(Tensor self, Tensor other) -> Tensor"""
    x = cast_to(g, x, ctx.dtype())
    if not isinstance(y, str):
        y = g.make_constant(np.asarray(y, dtype=onnx_to_np_dtype(ctx.dtype())))
    elif np.dtype(onnx_to_np_dtype(g.get_type(y))).kind != "f":
        y = cast_to(g, y, ctx.dtype())
    mag = g.op.Abs(x)
    return g.op.Where(_signbit(g, y), g.op.Neg(mag), mag)


def _nan_ignoring(g: GraphBuilder, x, y, op: str):
    t = promote(g, x, y)
    x, y = cast_to(g, x, t), cast_to(g, y, t)
    if np.dtype(onnx_to_np_dtype(t)).kind != "f":
        return getattr(g.op, op)(x, y)
    res = getattr(g.op, op)(x, y)
    res = g.op.Where(g.op.IsNaN(x), y, res)
    return g.op.Where(g.op.IsNaN(y), x, res)


@converter(aten.fmax.default)
def aten_fmax(g: GraphBuilder, x: str, y: str) -> str:
    """fmax(Tensor self, Tensor other) -> Tensor (NaN ignored)"""
    return _nan_ignoring(g, x, y, "Max")


@converter(aten.fmin.default)
def aten_fmin(g: GraphBuilder, x: str, y: str) -> str:
    """fmin(Tensor self, Tensor other) -> Tensor (NaN ignored)"""
    return _nan_ignoring(g, x, y, "Min")


@converter(aten.exp2.default)
def aten_exp2(g: GraphBuilder, x: str, *, ctx: NodeContext) -> str:
    """exp2(Tensor self) -> Tensor"""
    (x,) = _float_inputs(g, x, ctx=ctx)
    return g.op.Pow(_c(g, x, 2), x)


@converter(aten.hypot.default)
def aten_hypot(g: GraphBuilder, x: str, y: str, *, ctx: NodeContext) -> str:
    """hypot(Tensor self, Tensor other) -> Tensor"""
    x, y = _float_inputs(g, x, y, ctx=ctx)
    ax, ay = g.op.Abs(x), g.op.Abs(y)
    big, small = g.op.Max(ax, ay), g.op.Min(ax, ay)
    safe = g.op.Where(g.op.Equal(big, _c(g, x, 0)), _c(g, x, 1), big)
    ratio = g.op.Div(small, safe)
    res = g.op.Mul(big, g.op.Sqrt(g.op.Add(_c(g, x, 1), g.op.Mul(ratio, ratio))))
    return g.op.Where(g.op.IsInf(big), big, res)


@converter(aten.erfc.default, aten.special_erfc.default)
def aten_erfc(g: GraphBuilder, x: str, *, ctx: NodeContext) -> str:
    """erfc(Tensor self) -> Tensor"""
    from .special import _f64, erfc

    return cast_to(g, erfc(g, _f64(g, x)), ctx.dtype())


_HALF = (TensorProto.FLOAT16, TensorProto.BFLOAT16)


@converter(aten.round.decimals)
def aten_round_decimals(g: GraphBuilder, x: str, *, decimals: int = 0, ctx: NodeContext) -> str:
    """round.decimals(Tensor self, *, int decimals) -> Tensor (half to even)"""
    t = ctx.dtype()
    if t not in FLOAT_TYPES:  # integers are already rounded
        return g.op.Identity(x)
    # torch computes float16 and bfloat16 in float32 (opmath), Round then Div included
    x = cast_to(g, x, TensorProto.FLOAT if t in _HALF else t)
    if decimals == 0:
        y = g.op.Round(x)
    else:
        scale = _c(g, x, 10.0 ** abs(decimals))
        if decimals > 0:
            y = g.op.Div(g.op.Round(g.op.Mul(x, scale)), scale)
        else:
            y = g.op.Mul(g.op.Round(g.op.Div(x, scale)), scale)
    return cast_to(g, y, t)


@converter(aten.frexp.Tensor)
def aten_frexp(g: GraphBuilder, x: str) -> tuple[str, str]:
    """frexp.Tensor(Tensor self) -> (Tensor mantissa, Tensor exponent)

    exponent = floor(log2|x|) + 1, mantissa = x / 2**exponent in [0.5, 1)."""
    ax = g.op.Abs(x)
    zero = g.op.Equal(ax, _c(g, x, 0))
    special = g.op.Or(zero, g.op.Or(g.op.IsInf(x), g.op.IsNaN(x)))
    safe = g.op.Where(special, _c(g, x, 1), ax)
    e = g.op.Add(g.op.Floor(g.op.Div(g.op.Log(safe), _c(g, x, math.log(2)))), _c(g, x, 1))
    m = g.op.Div(x, g.op.Pow(_c(g, x, 2), e))
    # log rounding: bring the mantissa back into [0.5, 1)
    am = g.op.Abs(m)
    too_big = g.op.GreaterOrEqual(am, _c(g, x, 1))
    too_small = g.op.Less(am, _c(g, x, 0.5))
    e = g.op.Add(
        e, g.op.Sub(g.op.Cast(too_big, to=g.get_type(x)), g.op.Cast(too_small, to=g.get_type(x)))
    )
    m = g.op.Div(x, g.op.Pow(_c(g, x, 2), e))
    m = g.op.Where(special, x, m)
    e = g.op.Where(special, _c(g, x, 0), e)
    return m, g.op.Cast(e, to=6)


@converter(aten.angle.default)
def aten_angle(g: GraphBuilder, x: str, *, ctx: NodeContext) -> str:
    """angle(Tensor self) -> Tensor (real input: pi for negative values, nan kept)"""
    (x,) = _float_inputs(g, x, ctx=ctx)
    res = g.op.Where(g.op.Less(x, _c(g, x, 0)), _c(g, x, math.pi), _c(g, x, 0))
    return g.op.Where(g.op.IsNaN(x), x, res)


@converter(aten.heaviside.default)
def aten_heaviside(g: GraphBuilder, x: str, values: str, *, ctx: NodeContext) -> str:
    """heaviside(Tensor self, Tensor values) -> Tensor"""
    t = ctx.dtype()
    x, values = cast_to(g, x, t), cast_to(g, values, t)
    zero = _c(g, x, 0)
    step = g.op.Where(g.op.Greater(x, zero), _c(g, x, 1), zero)
    res = g.op.Where(g.op.Equal(x, zero), values, step)
    if np.dtype(onnx_to_np_dtype(t)).kind == "f":
        res = g.op.Where(g.op.IsNaN(x), x, res)
    return res


_FLOAT_BITS = {1: (23, -126), 11: (52, -1022)}  # mantissa bits, smallest normal exponent


@converter(aten.nextafter.default)
def aten_nextafter(g: GraphBuilder, x: str, y: str, *, ctx: NodeContext) -> str:
    """nextafter(Tensor self, Tensor other) -> Tensor (float32 and float64)

    The step is one unit in the last place of x, computed from its binary exponent
    (a power of two moving toward zero uses half a unit), in float64."""
    t = ctx.dtype()
    if t not in _FLOAT_BITS:
        raise UnsupportedOpError(f"nextafter for element type {t}", argument="self")
    bits, emin = _FLOAT_BITS[t]
    xd, yd = cast_to(g, x, 11), cast_to(g, y, 11)

    def c(v):
        return np.array(v, dtype=np.float64)

    ax = g.op.Abs(xd)
    safe = g.op.Where(g.op.Equal(ax, c(0)), c(1), ax)
    e = g.op.Floor(g.op.Div(g.op.Log(safe), c(math.log(2))))
    # fix log rounding around exact powers of two
    e = g.op.Add(e, g.op.Cast(g.op.LessOrEqual(g.op.Pow(c(2), g.op.Add(e, c(1))), safe), to=11))
    e = g.op.Sub(e, g.op.Cast(g.op.Greater(g.op.Pow(c(2), e), safe), to=11))
    e = g.op.Max(e, c(emin))
    step = g.op.Pow(c(2), g.op.Sub(e, c(bits)))
    direction = g.op.Sign(g.op.Sub(yd, xd))
    toward_zero = g.op.Less(g.op.Mul(direction, xd), c(0))
    power = g.op.And(g.op.Equal(ax, g.op.Pow(c(2), e)), g.op.Greater(e, c(emin)))
    step = g.op.Where(g.op.And(toward_zero, power), g.op.Div(step, c(2)), step)
    res = g.op.Add(xd, g.op.Mul(direction, step))
    res = g.op.Where(g.op.Equal(xd, yd), yd, res)
    res = g.op.Where(g.op.Or(g.op.IsNaN(xd), g.op.IsNaN(yd)), g.op.Add(xd, yd), res)
    return cast_to(g, res, t)
