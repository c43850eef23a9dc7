"""Shape computations whose result is known (static dimensions) become constants."""

from __future__ import annotations

from onnx import NodeProto

from ...xbuilder import GraphBuilder
from ...xbuilder.dtypes import i64
from ..matcher import attribute_value, small_constant
from ..pattern import Match, MatchResult, Pattern, RewriteOp, RewriteResult


def _known_dims(g: GraphBuilder, node):
    """The int64 values of Shape(x, start, end) if they are all known."""
    shape = g.get_shape(node.input[0])
    if shape is None:
        return None
    start = attribute_value(node, "start") or 0
    end = attribute_value(node, "end")
    dims = shape[start:end] if end is not None else shape[start:]
    if not all(isinstance(d, int) for d in dims):
        return None
    return i64(dims)


class ShapeToConstant(Pattern):
    """Shape(x, start, end) -> constant when the dimensions in [start, end) are static
    (the other dimensions may be dynamic)."""

    anchor = "Shape"

    def match(self, g: GraphBuilder, node: NodeProto) -> MatchResult:
        value = _known_dims(g, node)
        if value is None:
            return None
        return Match(self, [node], bound={"value": value})

    def apply(self, op: RewriteOp, match: Match) -> RewriteResult:
        return op.g.make_constant(match.bound["value"])


class GatherShapeToConstant(Pattern):
    """Gather(Shape(x), indices) -> constant when the gathered dimensions are static."""

    anchor = "Gather"

    def match(self, g: GraphBuilder, node: NodeProto) -> MatchResult:
        shape_node = self.producer(g, node.input[0])
        if shape_node is None or shape_node.op_type != "Shape" or shape_node.domain != "":
            return None
        idx = small_constant(g, node.input[1], 64)
        if (attribute_value(node, "axis") or 0) != 0 or idx is None:
            return None
        shape = g.get_shape(shape_node.input[0])
        if shape is None:
            return None
        start = attribute_value(shape_node, "start") or 0
        end = attribute_value(shape_node, "end")
        dims = list(shape[start:end] if end is not None else shape[start:])
        if idx.dtype.kind not in "iu" or idx.ndim > 1 or not len(dims):
            return None
        if any(not -len(dims) <= int(i) < len(dims) for i in idx.reshape(-1)):
            return None
        values = [dims[int(i)] for i in idx.reshape(-1)]
        if not all(isinstance(d, int) for d in values):
            return None
        return Match(self, [node], bound={"value": i64(values).reshape(idx.shape)})

    def apply(self, op: RewriteOp, match: Match) -> RewriteResult:
        return op.g.make_constant(match.bound["value"])
