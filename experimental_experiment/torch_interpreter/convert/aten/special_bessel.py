"""Bessel functions of the first and second kind (J0, J1, Y0, Y1) and modified Bessel
functions of the second kind (K0, K1, and their exponentially scaled forms), composed of
elementwise ONNX ops in float64, then cast to the output type.

Method: the polynomial and rational approximations of Abramowitz and Stegun (chapter 9):
9.4.1-9.4.6 for J and Y (absolute error below 1.1e-7), 9.8.5-9.8.8 for K (relative error
below 2.2e-7), with the I0/I1 of :mod:`.special` inside K for small arguments. Outside
the domain, the values torch gives: Y and K are NaN for a negative argument, -inf (Y)
and +inf (K) at zero.
"""

from __future__ import annotations

import math

from ....xbuilder import GraphBuilder
from ..node_context import NodeContext
from ..registry import converter
from ._helpers import aten
from .special import _c, _f64, _out, _poly, bessel_i

# Abramowitz-Stegun 9.4.1-9.4.6, coefficients from the highest power down (see _poly)
_J0_SMALL = [0.0002100, -0.0039444, 0.0444479, -0.3163866, 1.2656208, -2.2499997, 1.0]
_Y0_SMALL = [-0.00024846, 0.00427916, -0.04261214, 0.25300117, -0.74350384, 0.60559366, 0.36746691]
_J1_SMALL = [0.00001109, -0.00031761, 0.00443319, -0.03954289, 0.21093573, -0.56249985, 0.5]
_Y1_SMALL = [0.0027873, -0.0400976, 0.3123951, -1.3164827, 2.1682709, 0.2212091, -0.6366198]
_F0 = [0.00014476, -0.00072805, 0.00137237, -0.00009512, -0.00552740, -0.00000077, 0.79788456]
_T0 = [0.00013558, -0.00029333, -0.00054125, 0.00262573, -0.00003954, -0.04166397, -0.78539816]
_F1 = [-0.00020033, 0.00113653, -0.00249511, 0.00017105, 0.01659667, 0.00000156, 0.79788456]
_T1 = [-0.00029166, 0.00079824, 0.00074348, -0.00637879, 0.00005650, 0.12499612, -2.35619449]
# Abramowitz-Stegun 9.8.5-9.8.8
_K0_SMALL = [0.00000740, 0.00010750, 0.00262698, 0.03488590, 0.23069756, 0.42278420, -0.57721566]
_K0_LARGE = [0.00053208, -0.00251540, 0.00587872, -0.01062446, 0.02189568, -0.07832358, 1.25331414]
_K1_SMALL = [-0.00004686, -0.00110404, -0.01919402, -0.18156897, -0.67278579, 0.15443144, 1.0]
_K1_LARGE = [-0.00068245, 0.00325614, -0.00780353, 0.01504268, -0.03655620, 0.23498619, 1.25331414]


def _asymptotic(g: GraphBuilder, ax: str, order: int) -> tuple[str, str]:
    """(amplitude, phase) of J and Y for ``ax >= 3``: J = amp cos(phase), Y = amp sin."""
    safe = g.op.Max(ax, _c(3))
    t = g.op.Div(_c(3), safe)
    amp = g.op.Div(_poly(g, t, _F0 if order == 0 else _F1), g.op.Sqrt(safe))
    phase = g.op.Add(safe, _poly(g, t, _T0 if order == 0 else _T1))
    return amp, phase


def bessel_j(g: GraphBuilder, x: str, order: int) -> str:
    """J0 (even) or J1 (odd) of a float64 tensor."""
    ax = g.op.Abs(x)
    t2 = g.op.Mul(g.op.Div(x, _c(3)), g.op.Div(x, _c(3)))
    if order == 0:
        small = _poly(g, t2, _J0_SMALL)
    else:
        small = g.op.Mul(x, _poly(g, t2, _J1_SMALL))
    amp, phase = _asymptotic(g, ax, order)
    large = g.op.Mul(amp, g.op.Cos(phase))
    if order == 1:
        large = g.op.Mul(large, g.op.Sign(x))
    return g.op.Where(g.op.Less(ax, _c(3)), small, large)


def bessel_y(g: GraphBuilder, x: str, order: int) -> str:
    """Y0 or Y1 of a float64 tensor (NaN below 0, -inf at 0)."""
    t2 = g.op.Mul(g.op.Div(x, _c(3)), g.op.Div(x, _c(3)))
    log_half = g.op.Mul(g.op.Log(g.op.Div(x, _c(2))), _c(2 / math.pi))
    j = bessel_j(g, x, order)
    if order == 0:
        small = g.op.Add(g.op.Mul(log_half, j), _poly(g, t2, _Y0_SMALL))
    else:  # x Y1 = (2/pi) x ln(x/2) J1 + P(x/3): divided by x, -inf at 0
        small = g.op.Add(g.op.Mul(log_half, j), g.op.Div(_poly(g, t2, _Y1_SMALL), x))
    amp, phase = _asymptotic(g, x, order)
    large = g.op.Mul(amp, g.op.Sin(phase))
    value = g.op.Where(g.op.Less(x, _c(3)), small, large)
    return g.op.Where(g.op.Less(x, _c(0)), _c(math.nan), value)


def bessel_k(g: GraphBuilder, x: str, order: int, scaled: bool) -> str:
    """K0 or K1 of a float64 tensor, times exp(x) when ``scaled`` (NaN below 0,
    +inf at 0)."""
    h2 = g.op.Mul(g.op.Div(x, _c(2)), g.op.Div(x, _c(2)))
    log_half = g.op.Log(g.op.Div(x, _c(2)))
    i = bessel_i(g, x, order, False)
    if order == 0:
        small = g.op.Sub(_poly(g, h2, _K0_SMALL), g.op.Mul(log_half, i))
    else:  # x K1 = x ln(x/2) I1 + P(x/2): divided by x, +inf at 0
        small = g.op.Add(g.op.Mul(log_half, i), g.op.Div(_poly(g, h2, _K1_SMALL), x))
    safe = g.op.Max(x, _c(2))
    large = g.op.Div(
        _poly(g, g.op.Div(_c(2), safe), _K0_LARGE if order == 0 else _K1_LARGE), g.op.Sqrt(safe)
    )  # K(x) exp(x)
    if scaled:
        small = g.op.Mul(small, g.op.Exp(x))
    else:
        large = g.op.Mul(large, g.op.Exp(g.op.Neg(safe)))
    value = g.op.Where(g.op.Less(x, _c(2)), small, large)
    value = g.op.Where(g.op.Equal(x, _c(0)), _c(math.inf), value)
    return g.op.Where(g.op.Less(x, _c(0)), _c(math.nan), value)


@converter(aten.special_bessel_j0.default)
def aten_special_bessel_j0(g: GraphBuilder, x: str, *, ctx: NodeContext) -> str:
    """special_bessel_j0(Tensor self) -> Tensor"""
    return _out(g, bessel_j(g, _f64(g, x), 0), ctx=ctx)


@converter(aten.special_bessel_j1.default)
def aten_special_bessel_j1(g: GraphBuilder, x: str, *, ctx: NodeContext) -> str:
    """special_bessel_j1(Tensor self) -> Tensor"""
    return _out(g, bessel_j(g, _f64(g, x), 1), ctx=ctx)


@converter(aten.special_bessel_y0.default)
def aten_special_bessel_y0(g: GraphBuilder, x: str, *, ctx: NodeContext) -> str:
    """special_bessel_y0(Tensor self) -> Tensor"""
    return _out(g, bessel_y(g, _f64(g, x), 0), ctx=ctx)


@converter(aten.special_bessel_y1.default)
def aten_special_bessel_y1(g: GraphBuilder, x: str, *, ctx: NodeContext) -> str:
    """special_bessel_y1(Tensor self) -> Tensor"""
    return _out(g, bessel_y(g, _f64(g, x), 1), ctx=ctx)


@converter(aten.special_modified_bessel_k0.default)
def aten_special_modified_bessel_k0(g: GraphBuilder, x: str, *, ctx: NodeContext) -> str:
    """special_modified_bessel_k0(Tensor self) -> Tensor"""
    return _out(g, bessel_k(g, _f64(g, x), 0, False), ctx=ctx)


@converter(aten.special_modified_bessel_k1.default)
def aten_special_modified_bessel_k1(g: GraphBuilder, x: str, *, ctx: NodeContext) -> str:
    """special_modified_bessel_k1(Tensor self) -> Tensor"""
    return _out(g, bessel_k(g, _f64(g, x), 1, False), ctx=ctx)


@converter(aten.special_scaled_modified_bessel_k0.default)
def aten_special_scaled_modified_bessel_k0(g: GraphBuilder, x: str, *, ctx: NodeContext):
    """special_scaled_modified_bessel_k0(Tensor x) -> Tensor: K0(x) exp(x)"""
    return _out(g, bessel_k(g, _f64(g, x), 0, True), ctx=ctx)


@converter(aten.special_scaled_modified_bessel_k1.default)
def aten_special_scaled_modified_bessel_k1(g: GraphBuilder, x: str, *, ctx: NodeContext):
    """special_scaled_modified_bessel_k1(Tensor x) -> Tensor: K1(x) exp(x)"""
    return _out(g, bessel_k(g, _f64(g, x), 1, True), ctx=ctx)
