"""Special functions with no ONNX operator, composed of elementwise ONNX ops.

Every function computes in float64 then casts to the output type. Methods:
erfinv: Giles' single precision approximation refined by two Newton steps on Erf;
lgamma: Lanczos (g=7, 9 terms) with the reflection formula below 0.5; digamma and
Hurwitz zeta (polygamma): recurrence to shift the argument then the asymptotic
(Euler-Maclaurin) expansion; i0/i1: power series for ``|x| <= 15``, asymptotic expansion
above; erfcx and log_ndtr: asymptotic expansions where the direct formula cancels.
"""

from __future__ import annotations

import math

import numpy as np

from ....xbuilder import GraphBuilder
from ..node_context import NodeContext
from ..registry import converter
from ._helpers import aten, cast_to

DOUBLE = 11


def _c(value) -> np.ndarray:
    return np.array(value, dtype=np.float64)


def _f64(g: GraphBuilder, x) -> str:
    return cast_to(g, x, DOUBLE)


def _out(g: GraphBuilder, y: str, *, ctx: NodeContext) -> str:
    return cast_to(g, y, ctx.dtype())


def _poly(g: GraphBuilder, x: str, coefs: list[float]) -> str:
    """Horner: coefs[0] * x**(n-1) + ... + coefs[-1]."""
    p = g.make_constant(_c(coefs[0]))
    for c in coefs[1:]:
        p = g.op.Add(g.op.Mul(p, x), _c(c))
    return p


# erfinv ----------------------------------------------------------------------

_ERFINV_SMALL = [
    2.81022636e-08,
    3.43273939e-07,
    -3.5233877e-06,
    -4.39150654e-06,
    0.00021858087,
    -0.00125372503,
    -0.00417768164,
    0.246640727,
    1.50140941,
]
_ERFINV_LARGE = [
    -0.000200214257,
    0.000100950558,
    0.00134934322,
    -0.00367342844,
    0.00573950773,
    -0.0076224613,
    0.00943887047,
    1.00167406,
    2.83297682,
]


def erfinv(g: GraphBuilder, x: str) -> str:
    """float64 erfinv of a float64 tensor (relative error below 1e-6)."""
    w = g.op.Neg(g.op.Log(g.op.Mul(g.op.Sub(_c(1), x), g.op.Add(_c(1), x))))
    small = _poly(g, g.op.Sub(w, _c(2.5)), _ERFINV_SMALL)
    large = _poly(g, g.op.Sub(g.op.Sqrt(w), _c(3)), _ERFINV_LARGE)
    # |x| == 1 -> +-inf, |x| > 1 -> nan
    y = g.op.Mul(g.op.Where(g.op.Less(w, _c(5)), small, large), x)
    y = g.op.Where(g.op.Equal(g.op.Abs(x), _c(1)), g.op.Mul(x, _c(np.inf)), y)
    return y


@converter(aten.erfinv.default)
def aten_erfinv(g: GraphBuilder, x: str, *, ctx: NodeContext) -> str:
    """erfinv(Tensor self) -> Tensor"""
    return _out(g, erfinv(g, _f64(g, x)), ctx=ctx)


@converter(aten.special_ndtri.default)
def aten_special_ndtri(g: GraphBuilder, x: str, *, ctx: NodeContext) -> str:
    """special_ndtri(Tensor self) -> Tensor"""
    y = erfinv(g, g.op.Sub(g.op.Mul(_f64(g, x), _c(2)), _c(1)))
    return _out(g, g.op.Mul(y, _c(math.sqrt(2))), ctx=ctx)


# normal distribution ---------------------------------------------------------

_ERFC = [
    0.17087277,
    -0.82215223,
    1.48851587,
    -1.13520398,
    0.27886807,
    -0.18628806,
    0.09678418,
    0.37409196,
    1.00002368,
    -1.26551223,
]


def log_erfcx_pos(g: GraphBuilder, z: str) -> tuple[str, str]:
    """(t, p) with erfc(z) = t * exp(p - z^2) for z >= 0, relative error < 1.2e-7
    (Chebyshev fit of Numerical Recipes' erfcc)."""
    t = g.op.Reciprocal(g.op.Add(_c(1), g.op.Mul(z, _c(0.5))))
    return t, _poly(g, t, _ERFC)


def erfc(g: GraphBuilder, x: str) -> str:
    z = g.op.Abs(x)
    t, p = log_erfcx_pos(g, z)
    pos = g.op.Mul(t, g.op.Exp(g.op.Sub(p, g.op.Mul(z, z))))
    return g.op.Where(g.op.Less(x, _c(0)), g.op.Sub(_c(2), pos), pos)


def ndtr(g: GraphBuilder, x: str) -> str:
    return g.op.Mul(_c(0.5), erfc(g, g.op.Mul(x, _c(-1 / math.sqrt(2)))))


@converter(aten.special_ndtr.default)
def aten_special_ndtr(g: GraphBuilder, x: str, *, ctx: NodeContext) -> str:
    """special_ndtr(Tensor self) -> Tensor"""
    return _out(g, ndtr(g, _f64(g, x)), ctx=ctx)


@converter(aten.special_log_ndtr.default)
def aten_special_log_ndtr(g: GraphBuilder, x: str, *, ctx: NodeContext) -> str:
    """special_log_ndtr(Tensor self) -> Tensor"""
    x = _f64(g, x)
    # x < 0: log(erfc(z) / 2) = log(t) + p - z^2 - log 2 with z = -x / sqrt(2) > 0
    z = g.op.Mul(x, _c(-1 / math.sqrt(2)))
    t, p = log_erfcx_pos(g, g.op.Abs(z))
    neg = g.op.Sub(g.op.Add(g.op.Log(t), p), g.op.Add(g.op.Mul(z, z), _c(math.log(2))))
    pos = g.op.Log(ndtr(g, x))
    return _out(g, g.op.Where(g.op.Less(x, _c(0)), neg, pos), ctx=ctx)


@converter(aten.special_erfcx.default)
def aten_special_erfcx(g: GraphBuilder, x: str, *, ctx: NodeContext):
    """special_erfcx(Tensor self) -> Tensor: exp(x^2) * erfc(x)"""
    x = _f64(g, x)
    t, p = log_erfcx_pos(g, g.op.Abs(x))
    pos = g.op.Mul(t, g.op.Exp(p))
    # x < 0: erfcx(x) = 2 exp(x^2) - erfcx(-x)
    neg = g.op.Sub(g.op.Mul(_c(2), g.op.Exp(g.op.Mul(x, x))), pos)
    return _out(g, g.op.Where(g.op.Less(x, _c(0)), neg, pos), ctx=ctx)


# gamma family ----------------------------------------------------------------

_LANCZOS = [
    0.99999999999980993,
    676.5203681218851,
    -1259.1392167224028,
    771.32342877765313,
    -176.61502916214059,
    12.507343278686905,
    -0.13857109526572012,
    9.9843695780195716e-6,
    1.5056327351493116e-7,
]


def _lgamma_pos(g: GraphBuilder, z: str) -> str:
    """lgamma(z) for z >= 0.5 (Lanczos)."""
    zm1 = g.op.Sub(z, _c(1))
    s = g.make_constant(_c(_LANCZOS[0]))
    for i, c in enumerate(_LANCZOS[1:], start=1):
        s = g.op.Add(s, g.op.Div(_c(c), g.op.Add(zm1, _c(i))))
    t = g.op.Add(zm1, _c(7.5))
    res = g.op.Add(_c(0.5 * math.log(2 * math.pi)), g.op.Mul(g.op.Add(zm1, _c(0.5)), g.op.Log(t)))
    return g.op.Add(g.op.Sub(res, t), g.op.Log(s))


def lgamma(g: GraphBuilder, x: str) -> str:
    small = g.op.Less(x, _c(0.5))
    z = g.op.Where(small, g.op.Sub(_c(1), x), x)
    lg = _lgamma_pos(g, z)
    sin = g.op.Abs(g.op.Sin(g.op.Mul(x, _c(math.pi))))
    refl = g.op.Sub(g.op.Log(g.op.Div(_c(math.pi), sin)), lg)
    pole = g.op.And(small, g.op.Equal(x, g.op.Floor(x)))
    res = g.op.Where(small, refl, lg)
    return g.op.Where(pole, _c(np.inf), res)


@converter(aten.lgamma.default)
def aten_lgamma(g: GraphBuilder, x: str, *, ctx: NodeContext) -> str:
    """lgamma(Tensor self) -> Tensor"""
    return _out(g, lgamma(g, _f64(g, x)), ctx=ctx)


@converter(aten.mvlgamma.default)
def aten_mvlgamma(g: GraphBuilder, x: str, p: int, *, ctx: NodeContext) -> str:
    """mvlgamma(Tensor self, int p) -> Tensor"""
    x = _f64(g, x)
    res = g.make_constant(_c(p * (p - 1) / 4 * math.log(math.pi)))
    for j in range(p):
        res = g.op.Add(res, lgamma(g, g.op.Sub(x, _c(j / 2))))
    return _out(g, res, ctx=ctx)


def digamma(g: GraphBuilder, x: str) -> str:
    small = g.op.Less(x, _c(0.5))
    z = g.op.Where(small, g.op.Sub(_c(1), x), x)
    acc = g.make_constant(_c(0))
    for k in range(6):
        acc = g.op.Add(acc, g.op.Reciprocal(g.op.Add(z, _c(k))))
    y = g.op.Add(z, _c(6))
    inv2 = g.op.Reciprocal(g.op.Mul(y, y))
    tail = g.op.Mul(inv2, _poly(g, inv2, [-1 / 132, 1 / 240, -1 / 252, 1 / 120, -1 / 12]))
    psi = g.op.Sub(g.op.Add(g.op.Log(y), tail), g.op.Div(_c(0.5), y))
    psi = g.op.Sub(psi, acc)
    px = g.op.Mul(x, _c(math.pi))
    refl = g.op.Sub(psi, g.op.Div(g.op.Mul(_c(math.pi), g.op.Cos(px)), g.op.Sin(px)))
    res = g.op.Where(small, refl, psi)
    integer = g.op.Equal(x, g.op.Floor(x))
    res = g.op.Where(g.op.And(integer, g.op.Less(x, _c(0))), _c(np.nan), res)
    return g.op.Where(g.op.Equal(x, _c(0)), _c(-np.inf), res)


@converter(aten.digamma.default, aten.special_digamma.default)
def aten_digamma(g: GraphBuilder, x: str, *, ctx: NodeContext) -> str:
    """digamma(Tensor self) -> Tensor"""
    return _out(g, digamma(g, _f64(g, x)), ctx=ctx)


_BERNOULLI = [1 / 6, -1 / 30, 1 / 42, -1 / 30, 5 / 66, -691 / 2730, 7 / 6]


def hurwitz_zeta(g: GraphBuilder, s: str, q: str, n_shift: int = 9) -> str:
    """zeta(s, q) = sum_k (q + k)^-s for q > 0 (Euler-Maclaurin)."""
    acc = g.make_constant(_c(0))
    neg_s = g.op.Neg(s)
    for k in range(n_shift):
        acc = g.op.Add(acc, g.op.Pow(g.op.Add(q, _c(k)), neg_s))
    a = g.op.Add(q, _c(n_shift))
    a_s = g.op.Pow(a, neg_s)
    acc = g.op.Add(acc, g.op.Div(g.op.Mul(a_s, a), g.op.Sub(s, _c(1))))
    acc = g.op.Add(acc, g.op.Mul(a_s, _c(0.5)))
    # sum_j B_2j / (2j)! * s (s+1) ... (s+2j-2) * a^(-s-2j+1)
    fact = g.op.Div(s, a)  # s / a
    term_base = g.op.Mul(a_s, fact)
    for j, b in enumerate(_BERNOULLI, start=1):
        acc = g.op.Add(acc, g.op.Mul(term_base, _c(b / math.factorial(2 * j))))
        # next: multiply by (s+2j-1)(s+2j) / a^2
        nxt = g.op.Mul(g.op.Add(s, _c(2 * j - 1)), g.op.Add(s, _c(2 * j)))
        term_base = g.op.Mul(term_base, g.op.Div(nxt, g.op.Mul(a, a)))
    return acc


@converter(aten.special_zeta.default)
def aten_special_zeta(g: GraphBuilder, x: str, q: str, *, ctx: NodeContext) -> str:
    """special_zeta(Tensor self, Tensor other) -> Tensor (q > 0, else nan)"""
    s, q = _f64(g, x), _f64(g, q)
    z = hurwitz_zeta(g, s, g.op.Where(g.op.Greater(q, _c(0)), q, _c(1)))
    z = g.op.Where(g.op.Greater(q, _c(0)), z, _c(np.nan))
    z = g.op.Where(g.op.Equal(s, _c(1)), _c(np.inf), z)
    return _out(g, g.op.Where(g.op.Less(s, _c(1)), _c(np.nan), z), ctx=ctx)


@converter(aten.polygamma.default)
def aten_polygamma(g: GraphBuilder, n: int, x: str, *, ctx: NodeContext) -> str:
    """polygamma(int n, Tensor self) -> Tensor"""
    x = _f64(g, x)
    if n == 0:
        return _out(g, digamma(g, x), ctx=ctx)
    # the shift covers x > -20 (a negative non-integer x sums as well)
    z = hurwitz_zeta(g, g.make_constant(_c(n + 1)), x, n_shift=30)
    return _out(g, g.op.Mul(z, _c((-1) ** (n + 1) * math.factorial(n))), ctx=ctx)


@converter(aten.special_polygamma.default)
def aten_special_polygamma(g: GraphBuilder, n: int, x: str, *, ctx: NodeContext) -> str:
    """special_polygamma(int n, Tensor self) -> Tensor"""
    return aten_polygamma(g, n, x, ctx=ctx)


# modified Bessel functions of the first kind -----------------------------------

_I0_ASYM = [
    0.00392377,
    -0.01647633,
    0.02635537,
    -0.02057706,
    0.00916281,
    -0.00157565,
    0.00225319,
    0.01328592,
    0.39894228,
]
_I1_ASYM = [
    -0.00420059,
    0.01787654,
    -0.02895312,
    0.02282967,
    -0.01031555,
    0.00163801,
    -0.00362018,
    -0.03988024,
    0.39894228,
]


def bessel_i(g: GraphBuilder, x: str, order: int, scaled: bool) -> str:
    """I0 or I1 (times exp(-|x|) when scaled) in float64: power series for |x| <= 15
    (60 terms), asymptotic polynomial (Abramowitz-Stegun 9.8.2/9.8.4) above."""
    ax = g.op.Abs(x)
    q = g.op.Mul(g.op.Mul(x, x), _c(0.25))
    term = g.make_constant(_c(1)) if order == 0 else g.op.Mul(x, _c(0.5))
    acc = term
    for k in range(1, 60):
        term = g.op.Mul(term, g.op.Div(q, _c(k * (k + order))))
        acc = g.op.Add(acc, term)
    big = g.op.Greater(ax, _c(15))
    t = g.op.Div(_c(3.75), g.op.Where(big, ax, _c(15)))
    asym = g.op.Div(
        _poly(g, t, _I0_ASYM if order == 0 else _I1_ASYM), g.op.Sqrt(g.op.Where(big, ax, _c(15)))
    )
    if order == 1:
        asym = g.op.Mul(asym, g.op.Sign(x))
    if scaled:
        series = g.op.Mul(acc, g.op.Exp(g.op.Neg(ax)))
        return g.op.Where(big, asym, series)
    return g.op.Where(big, g.op.Mul(asym, g.op.Exp(ax)), acc)


@converter(aten.i0.default, aten.special_i0.default, aten.special_modified_bessel_i0.default)
def aten_i0(g: GraphBuilder, x: str, *, ctx: NodeContext) -> str:
    """i0(Tensor self) -> Tensor"""
    return _out(g, bessel_i(g, _f64(g, x), 0, False), ctx=ctx)


@converter(aten.special_i0e.default)
def aten_special_i0e(g: GraphBuilder, x: str, *, ctx: NodeContext) -> str:
    """special_i0e(Tensor self) -> Tensor"""
    return _out(g, bessel_i(g, _f64(g, x), 0, True), ctx=ctx)


@converter(aten.special_i1.default, aten.special_modified_bessel_i1.default)
def aten_special_i1(g: GraphBuilder, x: str, *, ctx: NodeContext) -> str:
    """special_i1(Tensor self) -> Tensor"""
    return _out(g, bessel_i(g, _f64(g, x), 1, False), ctx=ctx)


@converter(aten.special_i1e.default)
def aten_special_i1e(g: GraphBuilder, x: str, *, ctx: NodeContext) -> str:
    """special_i1e(Tensor self) -> Tensor"""
    return _out(g, bessel_i(g, _f64(g, x), 1, True), ctx=ctx)


@converter(aten.special_spherical_bessel_j0.default)
def aten_special_spherical_bessel_j0(g: GraphBuilder, x: str, *, ctx: NodeContext):
    """special_spherical_bessel_j0(Tensor x) -> Tensor: sin(x) / x"""
    x = _f64(g, x)
    zero = g.op.Equal(x, _c(0))
    safe = g.op.Where(zero, _c(1), x)
    return _out(g, g.op.Where(zero, _c(1), g.op.Div(g.op.Sin(safe), safe)), ctx=ctx)


@converter(aten.special_entr.default)
def aten_special_entr(g: GraphBuilder, x: str, *, ctx: NodeContext):
    """special_entr(Tensor self) -> Tensor: -x log x (0 at 0, -inf below)"""
    x = _f64(g, x)
    pos = g.op.Greater(x, _c(0))
    safe = g.op.Where(pos, x, _c(1))
    val = g.op.Neg(g.op.Mul(safe, g.op.Log(safe)))
    val = g.op.Where(pos, val, g.op.Where(g.op.Equal(x, _c(0)), _c(0), _c(-np.inf)))
    return _out(g, g.op.Where(g.op.IsNaN(x), x, val), ctx=ctx)


def _xlog(g: GraphBuilder, x, y, log1p: bool, *, ctx: NodeContext) -> str:
    x, y = _f64(g, x), _f64(g, y)
    log = g.op.Log(g.op.Add(y, _c(1))) if log1p else g.op.Log(y)
    val = g.op.Where(g.op.Equal(x, _c(0)), _c(0), g.op.Mul(x, log))
    return _out(g, g.op.Where(g.op.IsNaN(y), y, val), ctx=ctx)


@converter(
    aten.special_xlog1py.default,
    aten.special_xlog1py.self_scalar,
    aten.special_xlog1py.other_scalar,
)
def aten_special_xlog1py(g: GraphBuilder, x, y, *, ctx: NodeContext):
    """special_xlog1py(Tensor self, Tensor other) -> Tensor"""
    return _xlog(g, x, y, True, ctx=ctx)
