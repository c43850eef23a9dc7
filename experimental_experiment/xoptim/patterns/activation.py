"""Softmax and Gelu fused from their decomposed forms."""

from __future__ import annotations

import math

from onnx import NodeProto

from ...xbuilder import GraphBuilder
from ..matcher import constant_equals, small_constant
from ..pattern import (
    Match,
    MatchResult,
    Pattern,
    PatternOp,
    PatternResult,
    RewriteOp,
    RewriteResult,
    Var,
)
from ._utils import FLOATS, const_ints, normalize_axes, same_known_shape


class ExpSumDivToSoftmax(Pattern):
    """Div(Exp(x), ReduceSum(Exp(x), [axis], keepdims=1)) -> Softmax(x, axis)."""

    min_opset = 13

    def pattern(self, op: PatternOp, x: Var, axes: Var, k: Var) -> PatternResult:
        e = op.Exp(x)
        return op.Div(e, op.ReduceSum(e, axes, keepdims=k))

    def check(self, g: GraphBuilder, x: str, axes: str, k: int | None) -> str | None:
        if k not in (None, 1):
            return "keepdims=0"
        norm = normalize_axes(const_ints(g, axes), g.get_rank(x))
        if norm is None or len(norm) != 1:
            return "not one constant axis"
        return None

    def rewrite(self, op: RewriteOp, x: str, axes: str, k: int | None) -> RewriteResult:
        norm = normalize_axes(const_ints(op.g, axes), op.g.get_rank(x))
        assert norm is not None  # check accepted one constant axis
        return op.Softmax(x, axis=norm[0])


class SoftmaxSubMaxToSoftmax(Pattern):
    """Softmax(Sub(x, ReduceMax(x, axes, keepdims=1)), axis) -> Softmax(x, axis) when the
    maximum is taken over the softmax axis (softmax does not change with a shift
    constant along its axis)."""

    min_opset = 18

    def pattern(self, op: PatternOp, x: Var, axes: Var, k: Var, axis: Var) -> PatternResult:
        return op.Softmax(op.Sub(x, op.ReduceMax(x, axes, keepdims=k)), axis=axis)

    def check(
        self, g: GraphBuilder, x: str, axes: str, k: int | None, axis: int | None
    ) -> str | None:
        rank = g.get_rank(x)
        norm = normalize_axes(const_ints(g, axes), rank)
        if k not in (None, 1) or norm is None or rank is None:
            return "keepdims=0 or unknown axes"
        if (-1 if axis is None else axis) % rank not in norm:
            return "the maximum is not taken over the softmax axis"
        return None

    def rewrite(
        self, op: RewriteOp, x: str, axes: str, k: int | None, axis: int | None
    ) -> RewriteResult:
        return op.Softmax(x, axis=axis)


def _factors(pattern, g: GraphBuilder, name: str, nodes: list, top: bool = True) -> list[str]:
    """Leaves of a product of Mul nodes (the intermediate ones used once)."""
    node = pattern.producer(g, name)
    if (
        node is None
        or node.op_type != "Mul"
        or node.domain != ""
        or (not top and pattern.n_consumers(g, name) != 1)
    ):
        return [name]
    nodes.append(node)
    return [f for i in node.input for f in _factors(pattern, g, i, nodes, False)]


def _split_constant(g: GraphBuilder, factors: list[str]) -> tuple[float, list[str]]:
    """(product of the scalar constant factors, the other factors)."""
    value, others = 1.0, []
    for f in factors:
        c = small_constant(g, f, 1)
        if c is not None and c.size == 1:
            value *= float(c.reshape(-1)[0])
        else:
            others.append(f)
    return value, others


def _close(a: float, b: float) -> bool:
    return abs(a - b) <= 1e-3 * abs(b)


class _GeluBase(Pattern):
    """0.5 * x * (1 + f(x)) where f is recognized by :meth:`inner`."""

    min_opset = 20
    anchor = "Mul"
    approximate = "none"

    def match(self, g: GraphBuilder, node: NodeProto) -> MatchResult:
        nodes: list = []
        value, others = _split_constant(g, _factors(self, g, node.output[0], nodes))
        if len(others) != 2 or not _close(value, 0.5):
            return None
        for x, one_plus in (others, others[::-1]):
            add = self.producer(g, one_plus)
            if add is None or add.op_type != "Add" or g.get_type(x) not in FLOATS:
                continue
            for f, one in (add.input, add.input[::-1]):
                if small_constant(g, one, 1) is None or not constant_equals(g, one, 1.0):
                    continue
                inner = self.inner(g, x, f)
                if inner is not None:
                    if not same_known_shape(g, x, node.output[0]):
                        return self.refuse("x and the output may have different shapes")
                    return Match(self, [*nodes, add, *inner], bound={"x": x})
        return None

    def inner(self, g: GraphBuilder, x: str, f: str) -> list[NodeProto] | None:  # pragma: no cover
        raise NotImplementedError

    def apply(self, op: RewriteOp, match: Match) -> RewriteResult:
        if self.approximate == "none":
            return op.Gelu(match.bound["x"])
        return op.Gelu(match.bound["x"], approximate=self.approximate)


class GeluErfToGelu(_GeluBase):
    """0.5 * x * (1 + Erf(x / sqrt(2))) (any order of the products, x * 1/sqrt(2) or
    x / sqrt(2)) -> Gelu(x), opset >= 20."""

    def inner(self, g: GraphBuilder, x: str, f: str) -> list[NodeProto] | None:
        erf = self.producer(g, f)
        if erf is None or erf.op_type != "Erf":
            return None
        arg = self.producer(g, erf.input[0])
        if arg is None:
            return None
        if (
            arg.op_type == "Div"
            and arg.input[0] == x
            and constant_equals(g, arg.input[1], math.sqrt(2))
        ):
            return [erf, arg]
        if arg.op_type == "Mul":
            for a, c in (arg.input, arg.input[::-1]):
                if a == x and constant_equals(g, c, math.sqrt(0.5)):
                    return [erf, arg]
        return None


class GeluTanhToGelu(_GeluBase):
    """0.5 * x * (1 + Tanh(sqrt(2/pi) * (x + 0.044715 * x^3))) (x^3 as Pow or products)
    -> Gelu(x, approximate="tanh"), opset >= 20."""

    approximate = "tanh"

    def inner(self, g: GraphBuilder, x: str, f: str) -> list[NodeProto] | None:
        tanh = self.producer(g, f)
        if tanh is None or tanh.op_type != "Tanh":
            return None
        nodes = [tanh]
        value, others = _split_constant(g, _factors(self, g, tanh.input[0], nodes, False))
        if len(others) != 1 or not _close(value, math.sqrt(2 / math.pi)):
            return None
        add = self.producer(g, others[0])
        if add is None or add.op_type != "Add" or x not in add.input:
            return None
        nodes.append(add)
        cube_part = add.input[1] if add.input[0] == x else add.input[0]
        value, others = _split_constant(g, _factors(self, g, cube_part, nodes, False))
        if not _close(value, 0.044715):
            return None
        if others == [x, x, x]:
            return nodes
        if len(others) == 1:
            p = self.producer(g, others[0])
            if (
                p is not None
                and p.op_type == "Pow"
                and p.input[0] == x
                and constant_equals(g, p.input[1], 3.0)
            ):
                return [*nodes, p]
        return None
