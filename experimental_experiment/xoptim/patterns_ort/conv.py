"""FusedConv (com.microsoft): a convolution followed by its activation in one kernel."""

from __future__ import annotations

from onnx import NodeProto, TensorProto

from ...xbuilder import GraphBuilder
from ..matcher import attribute_value
from ..pattern import Match, MatchResult, Pattern, RewriteOp, RewriteResult
from ._utils import MS, is_op

#: activations FusedConv takes without parameters
_ACTIVATIONS = ("Relu", "Sigmoid", "Tanh")


class ConvActivationToFusedConv(Pattern):
    """Relu(Conv(x, W, B)) (or Sigmoid, Tanh) -> FusedConv(x, W, B, activation="Relu")
    (com.microsoft), float32 only (onnxruntime's CPU kernel)."""

    anchor = _ACTIVATIONS

    def match(self, g: GraphBuilder, node: NodeProto) -> MatchResult:
        conv = self.producer(g, node.input[0])
        if not is_op(conv, "Conv"):
            return None
        if g.get_type(node.input[0]) != TensorProto.FLOAT:
            return self.refuse("not float32")
        return Match(self, [conv, node])

    def apply(self, op: RewriteOp, match: Match) -> RewriteResult:
        conv, act = match.nodes
        attrs = {a.name: attribute_value(conv, a.name) for a in conv.attribute}
        return op.FusedConv(*conv.input, domain=MS, activation=act.op_type, **attrs)
