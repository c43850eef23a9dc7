"""Gelu, FastGelu and BiasGelu (com.microsoft) from the decomposed forms or ONNX Gelu."""

from __future__ import annotations

from onnx import NodeProto

from ...xbuilder import GraphBuilder
from ..matcher import attribute_value
from ..pattern import Match, MatchResult, Pattern, RewriteOp, RewriteResult
from ..patterns.activation import GeluErfToGelu, GeluTanhToGelu
from ._utils import MS, ORT_FLOATS, is_op, last_dim_vector


class GeluErfToOrtGelu(GeluErfToGelu):
    """0.5 * x * (1 + Erf(x / sqrt(2))) -> Gelu(x) (com.microsoft), any opset (the
    default set makes ONNX Gelu from opset 20, tried before this one)."""

    min_opset = 1

    def apply(self, op: RewriteOp, match: Match) -> RewriteResult:
        return op.Gelu(match.bound["x"], domain=MS)


class GeluTanhToFastGelu(GeluTanhToGelu):
    """0.5 * x * (1 + Tanh(sqrt(2/pi) * (x + 0.044715 * x^3))) -> FastGelu(x)
    (com.microsoft), any opset."""

    min_opset = 1

    def apply(self, op: RewriteOp, match: Match) -> RewriteResult:
        return op.FastGelu(match.bound["x"], domain=MS)


class _AddActivation(Pattern):
    """Act(Add(x, bias)) -> Fused(x, bias) for a bias vector of the last dimension."""

    def _bias_add(self, g: GraphBuilder, node):
        add = self.producer(g, node.input[0])
        if not is_op(add, "Add"):
            return None
        for x, bias in (add.input, add.input[::-1]):
            if last_dim_vector(g, x, bias) and g.get_shape(x) == g.get_shape(add.output[0]):
                if g.get_type(x) not in ORT_FLOATS:
                    return self.refuse("not float32 or float16")
                return Match(self, [add, node], bound={"x": x, "bias": bias})
        return self.refuse("the added tensor is not a vector of the last dimension")


class AddGeluToBiasGelu(_AddActivation):
    """Gelu(Add(x, bias)) -> BiasGelu(x, bias) (com.microsoft) with ``bias`` 1-D of the
    size of the last dimension of ``x`` (Gelu from com.microsoft or ONNX, erf form)."""

    def anchors(self) -> tuple[tuple[str, str], ...]:
        return ((MS, "Gelu"), ("", "Gelu"))

    def match(self, g: GraphBuilder, node: NodeProto) -> MatchResult:
        if node.domain == "" and attribute_value(node, "approximate") not in (None, "none"):
            return None
        return self._bias_add(g, node)

    def apply(self, op: RewriteOp, match: Match) -> RewriteResult:
        return op.BiasGelu(match.bound["x"], match.bound["bias"], domain=MS)


class AddFastGeluToFastGelu(_AddActivation):
    """FastGelu(Add(x, bias)) (or ONNX Gelu(approximate="tanh")) -> FastGelu(x, bias)
    (com.microsoft) with ``bias`` 1-D of the size of the last dimension of ``x``."""

    def anchors(self) -> tuple[tuple[str, str], ...]:
        return ((MS, "FastGelu"), ("", "Gelu"))

    def match(self, g: GraphBuilder, node: NodeProto) -> MatchResult:
        if node.domain == "" and attribute_value(node, "approximate") != "tanh":
            return None
        if len(node.input) > 1 and node.input[1]:
            return None
        return self._bias_add(g, node)

    def apply(self, op: RewriteOp, match: Match) -> RewriteResult:
        return op.FastGelu(match.bound["x"], match.bound["bias"], domain=MS)
