"""Reshape chains and reshapes to the same shape."""

from __future__ import annotations

from ..pattern import Pattern
from ._utils import ShapePreservingToIdentity, const_ints


class ReshapeReshapeToReshape(Pattern):
    """Reshape(Reshape(x, s1), s2) -> Reshape(x, s2) when s2 is a constant whose 0s (a 0
    copies a dimension of the intermediate result) are at positions where s1 has a 0
    too (the intermediate's dimension is then the one of x)."""

    def pattern(self, op, x, s1, s2):
        return op.Reshape(op.Reshape(x, s1), s2)

    def check(self, g, x, s1, s2):
        values = const_ints(g, s2)
        if values is None:
            return "the second shape is not a constant"
        if 0 in values:
            first = const_ints(g, s1)
            if first is None or any(v == 0 and (i >= len(first) or first[i] != 0)
                                    for i, v in enumerate(values)):
                return "the second shape has a 0 where the first one has not"
        return None

    def rewrite(self, op, x, s1, s2):
        return op.Reshape(x, s2)


class ReshapeToIdentity(ShapePreservingToIdentity):
    """Reshape(x, s) -> x when the output shape is known equal to x's shape
    (symbolic dimensions included)."""

    def pattern(self, op, x, s):
        return op.Reshape(x, s)
