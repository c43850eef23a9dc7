"""MatMul + Add -> Gemm."""

from __future__ import annotations

from onnx import NodeProto, helper

from ...xbuilder import GraphBuilder
from ..pattern import Match, MatchResult, Pattern, RewriteOp, RewriteResult
from ._utils import FLOATS, known_shape


class MatMulAddToGemm(Pattern):
    """Add(MatMul(A, B), C) -> Gemm(A, B, C) for 2-D float A and B when C broadcasts
    to the product's shape without changing it (also Add(Gemm(A, B), C))."""

    anchor = "Add"

    def match(self, g: GraphBuilder, node: NodeProto) -> MatchResult:
        for k in (0, 1):
            mm = self.producer(g, node.input[k])
            if mm is None or mm.domain != "" or mm.op_type not in ("MatMul", "Gemm"):
                continue
            if mm.op_type == "Gemm" and (
                len(mm.input) > 2 or any(a.name in ("alpha", "beta") for a in mm.attribute)
            ):
                continue
            a, b, c = mm.input[0], mm.input[1], node.input[1 - k]
            if g.get_rank(a) != 2 or g.get_rank(b) != 2:
                return self.refuse("A or B is not 2-D")
            if g.get_type(a) not in FLOATS:
                return self.refuse("not a float type")
            out = known_shape(g, node.output[0])
            if out is None or out != known_shape(g, mm.output[0]):
                return self.refuse("the bias changes the shape (broadcast)")
            cs = known_shape(g, c)
            if cs is None or len(cs) > 2:
                return self.refuse("the bias shape is unknown or has more than 2 dims")
            return Match(self, [mm, node], bound={"c": c})
        return None

    def apply(self, op: RewriteOp, match: Match) -> RewriteResult:
        mm = match.nodes[0]
        attrs = {a.name: helper.get_attribute_value(a) for a in mm.attribute}
        return op.Gemm(mm.input[0], mm.input[1], match.bound["c"], **attrs)
