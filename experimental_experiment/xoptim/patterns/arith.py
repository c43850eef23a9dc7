"""Multiplication by one, addition of zero, conjunction with true, ... (when
broadcasting changes nothing)."""

from __future__ import annotations

from onnx import NodeProto

from ...xbuilder import GraphBuilder
from ..matcher import constant_equals
from ..pattern import Match, MatchResult, Pattern, RewriteOp, RewriteResult
from ._utils import same_known_shape


class _NeutralToIdentity(Pattern):
    """Base: ``op_type(x, c)`` -> x when c is the neutral element."""

    neutral: float = 0.0
    commutative: bool = False

    def match(self, g: GraphBuilder, node: NodeProto) -> MatchResult:
        if len(node.input) != 2:
            return None
        sides = [(0, 1), (1, 0)] if self.commutative else [(0, 1)]
        for k, c in sides:
            x, cst = node.input[k], node.input[c]
            if not constant_equals(g, cst, self.neutral, rtol=0):
                continue
            if g.get_type(x) != g.get_type(node.output[0]):
                return self.refuse("the type changes")
            if not same_known_shape(g, x, node.output[0]):
                return self.refuse("broadcasting may change the shape")
            return Match(self, [node], bound={"x": x})
        return None

    def apply(self, op: RewriteOp, match: Match) -> RewriteResult:
        return match.bound["x"]


class MulByOneToIdentity(_NeutralToIdentity):
    """Mul(x, 1) or Mul(1, x) -> x when the output has x's shape and type."""

    anchor = "Mul"
    neutral = 1.0
    commutative = True


class AddZeroToIdentity(_NeutralToIdentity):
    """Add(x, 0) or Add(0, x) -> x when the output has x's shape and type."""

    anchor = "Add"
    neutral = 0.0
    commutative = True


class SubZeroToIdentity(_NeutralToIdentity):
    """Sub(x, 0) -> x when the output has x's shape and type."""

    anchor = "Sub"
    neutral = 0.0


class DivByOneToIdentity(_NeutralToIdentity):
    """Div(x, 1) -> x when the output has x's shape and type."""

    anchor = "Div"
    neutral = 1.0


class AndTrueToIdentity(_NeutralToIdentity):
    """And(x, True) or And(True, x) -> x when the output has x's shape."""

    anchor = "And"
    neutral = 1.0
    commutative = True
