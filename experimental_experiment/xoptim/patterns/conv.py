"""Convolution followed by an inference BatchNormalization folded into the convolution."""

from __future__ import annotations

import numpy as np
from onnx import NodeProto

from ...xbuilder import GraphBuilder
from ..matcher import attribute_value
from ..pattern import Match, MatchResult, Pattern, RewriteOp, RewriteResult
from ._utils import FLOATS


class ConvBatchNormToConv(Pattern):
    """BatchNormalization(Conv(x, W, b), scale, B, mean, var) -> Conv(x, W', b') with
    ``W' = W * scale / sqrt(var + eps)`` per output channel and
    ``b' = (b - mean) * scale / sqrt(var + eps) + B``, when every parameter is a constant
    and the normalization is in inference mode."""

    anchor = "BatchNormalization"

    def match(self, g: GraphBuilder, node: NodeProto) -> MatchResult:
        conv = self.producer(g, node.input[0])
        if conv is None or conv.op_type != "Conv" or conv.domain != "":
            return None
        if attribute_value(node, "training_mode") or any(
            o and self.n_consumers(g, o) for o in node.output[1:]
        ):
            return self.refuse("training mode")
        if g.get_type(node.input[0]) not in FLOATS:
            return self.refuse("not a float type")
        params = [*conv.input[1:], *node.input[1:5]]
        if not all(g.is_constant(p) for p in params if p):
            return self.refuse("a weight or a statistic is not a constant")
        channels = np.asarray(g.get_constant(conv.input[1])).shape[0]
        if any(np.asarray(g.get_constant(p)).shape != (channels,) for p in node.input[1:5]):
            return self.refuse("statistics do not have one value per output channel")
        return Match(self, [conv, node])

    def apply(self, op: RewriteOp, match: Match) -> RewriteResult:
        conv, bn = match.nodes
        g = op.g
        w = np.asarray(g.get_constant(conv.input[1]))
        scale, bias, mean, var = (
            np.asarray(g.get_constant(p), dtype=np.float64) for p in bn.input[1:5]
        )
        eps = attribute_value(bn, "epsilon")
        factor = scale / np.sqrt(var + (1e-5 if eps is None else eps))
        b = (
            np.asarray(g.get_constant(conv.input[2]), dtype=np.float64)
            if len(conv.input) > 2 and conv.input[2]
            else np.zeros_like(mean)
        )
        # the factor in float64, the (large) weight multiplied in its own type
        # as a matrix (one row per output channel): numpy broadcasts a 4-D product over
        # inner loops of the kernel's size (1 or 9 elements), about 4 times slower
        new_w = (w.reshape(w.shape[0], -1) * factor.astype(w.dtype)[:, None]).reshape(w.shape)
        new_b = (b - mean) * factor + bias
        attrs = {a.name: attribute_value(conv, a.name) for a in conv.attribute}
        # new_w already has w's type: no copy of the weight
        return op.Conv(
            conv.input[0],
            g.make_initializer("conv_bn_weight", new_w.astype(w.dtype, copy=False)),
            g.make_initializer("conv_bn_bias", new_b.astype(w.dtype)),
            **attrs,
        )
