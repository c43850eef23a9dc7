"""Reshape chains and reshapes to the same shape."""

from __future__ import annotations

from ...xbuilder import GraphBuilder
from ..pattern import Pattern, PatternOp, PatternResult, RewriteOp, RewriteResult, Var
from ._utils import ShapePreservingToIdentity, const_ints


class ReshapeReshapeToReshape(Pattern):
    """Reshape(Reshape(x, s1), s2) -> Reshape(x, s2) when s2 is a constant whose 0s (a 0
    copies a dimension of the intermediate result) are at positions where s1 has a 0
    too (the intermediate's dimension is then the one of x)."""

    def pattern(self, op: PatternOp, x: Var, s1: Var, s2: Var) -> PatternResult:
        return op.Reshape(op.Reshape(x, s1), s2)

    def check(self, g: GraphBuilder, x: str, s1: str, s2: str) -> str | None:
        values = const_ints(g, s2)
        if values is None:
            return "the second shape is not a constant"
        if 0 in values:
            first = const_ints(g, s1)
            if first is None or any(
                v == 0 and (i >= len(first) or first[i] != 0) for i, v in enumerate(values)
            ):
                return "the second shape has a 0 where the first one has not"
        return None

    def rewrite(self, op: RewriteOp, x: str, s1: str, s2: str) -> RewriteResult:
        return op.Reshape(x, s2)


class ReshapeToIdentity(ShapePreservingToIdentity):
    """Reshape(x, s) -> x when the output shape is known equal to x's shape
    (symbolic dimensions included), or when ``s`` is a constant of x's rank keeping
    every dimension: each value is 0 (copies the dimension), x's static dimension at
    that position, or one -1 (then the only dimension left, the same)."""

    def pattern(self, op: PatternOp, x: Var, s: Var) -> PatternResult:
        return op.Reshape(x, s)

    def check(self, g: GraphBuilder, x: str, s: str, outputs: list[str]) -> str | None:
        if keeps_every_dimension(g, x, const_ints(g, s)):
            return None
        return super().check(g, x, s, outputs)


def keeps_every_dimension(g: GraphBuilder, x: str, target: list[int] | None) -> bool:
    """True when Reshape(x, target) (allowzero=0) returns x's shape."""
    shape = g.get_shape(x)
    if target is None or shape is None or len(target) != len(shape) or target.count(-1) > 1:
        return False
    return all(t in (0, -1) or (isinstance(d, int) and t == d) for t, d in zip(target, shape))
