"""Orthogonal polynomials of ``torch.special`` (the degree ``n`` is a tensor).

The three-term recurrence is unrolled up to degree ``MAX_DEGREE`` in float64 and the
value of the degree each element asks for is selected; a negative degree gives 0 (as
torch), a degree above ``MAX_DEGREE`` gives NaN rather than a wrong value.
"""

from __future__ import annotations

import numpy as np

from ....xbuilder import GraphBuilder
from ..node_context import NodeContext
from ..registry import converter
from ._helpers import aten, cast_to

MAX_DEGREE = 24
DOUBLE = 11


def _c(v) -> np.ndarray:
    return np.array(v, dtype=np.float64)


def _evaluate(g: GraphBuilder, x, n, first: str, step, *, ctx: NodeContext) -> str:
    """``first(x)`` is P_1, ``step(k, x, p_k, p_km1)`` returns P_{k+1}."""
    x = cast_to(g, x, DOUBLE) if isinstance(x, str) else g.make_constant(_c(x))
    n = cast_to(g, n, DOUBLE) if isinstance(n, str) else g.make_constant(_c(n))
    # the degrees are integers: torch truncates toward zero, n < 0 gives 0
    n = g.op.Mul(g.op.Sign(n), g.op.Floor(g.op.Abs(n)))
    x = g.op.Add(x, g.op.Mul(n, _c(0)))  # broadcast x against n
    prev, cur = g.op.Add(g.op.Mul(x, _c(0)), _c(1)), first(x)
    result = g.op.Where(g.op.Equal(n, _c(0)), prev, g.op.Mul(x, _c(np.nan)))
    result = g.op.Where(g.op.Equal(n, _c(1)), cur, result)
    for k in range(1, MAX_DEGREE):
        prev, cur = cur, step(k, x, cur, prev)
        result = g.op.Where(g.op.Equal(n, _c(k + 1)), cur, result)
    result = g.op.Where(g.op.Less(n, _c(0)), g.op.Mul(x, _c(0)), result)
    return cast_to(g, result, ctx.dtype())


def _chebyshev(first_coef: float, first_shift: float, shifted: bool):
    def run(g: GraphBuilder, x, n, *, ctx: NodeContext):
        if shifted and isinstance(x, str):
            x = g.op.Sub(g.op.Mul(cast_to(g, x, DOUBLE), _c(2)), _c(1))
        elif shifted:
            x = 2 * x - 1

        def first(t):
            return g.op.Add(g.op.Mul(t, _c(first_coef)), _c(first_shift))

        def step(k, t, p, q):
            return g.op.Sub(g.op.Mul(g.op.Mul(t, _c(2)), p), q)

        return _evaluate(g, x, n, first, step, ctx=ctx)

    return run


_KINDS = {"t": (1, 0), "u": (2, 0), "v": (2, -1), "w": (2, 1)}


def _register_chebyshev():
    for kind, (coef, shift) in _KINDS.items():
        for shifted in (False, True):
            name = f"special_{'shifted_' if shifted else ''}chebyshev_polynomial_{kind}"
            packet = getattr(aten, name)
            fn = _chebyshev(coef, shift, shifted)
            fn.__name__ = f"aten_{name}"
            fn.__doc__ = f"{name}(Tensor x, Tensor n) -> Tensor"
            converter(*[getattr(packet, o) for o in packet.overloads()])(fn)


_register_chebyshev()


@converter(aten.special_hermite_polynomial_h)
def aten_special_hermite_polynomial_h(g: GraphBuilder, x, n, *, ctx: NodeContext):
    """special_hermite_polynomial_h(Tensor x, Tensor n) -> Tensor (physicists')"""
    return _evaluate(
        g,
        x,
        n,
        lambda t: g.op.Mul(t, _c(2)),
        lambda k, t, p, q: g.op.Sub(g.op.Mul(g.op.Mul(t, _c(2)), p), g.op.Mul(q, _c(2 * k))),
        ctx=ctx,
    )


@converter(aten.special_hermite_polynomial_he)
def aten_special_hermite_polynomial_he(g: GraphBuilder, x, n, *, ctx: NodeContext):
    """special_hermite_polynomial_he(Tensor x, Tensor n) -> Tensor (probabilists')"""
    return _evaluate(
        g,
        x,
        n,
        lambda t: g.op.Identity(t),
        lambda k, t, p, q: g.op.Sub(g.op.Mul(t, p), g.op.Mul(q, _c(k))),
        ctx=ctx,
    )


@converter(aten.special_laguerre_polynomial_l)
def aten_special_laguerre_polynomial_l(g: GraphBuilder, x, n, *, ctx: NodeContext):
    """special_laguerre_polynomial_l(Tensor x, Tensor n) -> Tensor"""
    return _evaluate(
        g,
        x,
        n,
        lambda t: g.op.Sub(_c(1), t),
        lambda k, t, p, q: g.op.Div(
            g.op.Sub(g.op.Mul(g.op.Sub(_c(2 * k + 1), t), p), g.op.Mul(q, _c(k))), _c(k + 1)
        ),
        ctx=ctx,
    )


@converter(aten.special_legendre_polynomial_p)
def aten_special_legendre_polynomial_p(g: GraphBuilder, x, n, *, ctx: NodeContext):
    """special_legendre_polynomial_p(Tensor x, Tensor n) -> Tensor"""
    return _evaluate(
        g,
        x,
        n,
        lambda t: g.op.Identity(t),
        lambda k, t, p, q: g.op.Div(
            g.op.Sub(g.op.Mul(g.op.Mul(t, _c(2 * k + 1)), p), g.op.Mul(q, _c(k))), _c(k + 1)
        ),
        ctx=ctx,
    )
