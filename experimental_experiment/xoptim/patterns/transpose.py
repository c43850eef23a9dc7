"""Transpose chains, identity transposes, transposes folded into MatMul/Gemm."""

from __future__ import annotations

from onnx import NodeProto, helper

from ...xbuilder import GraphBuilder
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
from ._utils import FLOATS


class TransposeTransposeToTranspose(Pattern):
    """Transpose(Transpose(x, perm=p1), perm=p2) -> Transpose(x, perm=p1∘p2)
    (or x when the composition is the identity)."""

    def pattern(self, op: PatternOp, x: Var, p1: Var, p2: Var) -> PatternResult:
        return op.Transpose(op.Transpose(x, perm=p1), perm=p2)

    def check(
        self, g: GraphBuilder, x: str, p1: list[int] | None, p2: list[int] | None
    ) -> str | None:
        if p1 is None or p2 is None:
            return "a perm attribute is missing"
        return None

    def rewrite(self, op: RewriteOp, x: str, p1: list[int], p2: list[int]) -> RewriteResult:
        perm = [p1[i] for i in p2]
        if perm == list(range(len(perm))):
            return x
        return op.Transpose(x, perm=perm)


class TransposeToIdentity(Pattern):
    """Transpose(x, perm=[0, 1, ..., n-1]) -> x."""

    anchor = "Transpose"

    def match(self, g: GraphBuilder, node: NodeProto) -> MatchResult:
        perm = [list(a.ints) for a in node.attribute if a.name == "perm"]
        if not perm or perm[0] != list(range(len(perm[0]))):
            return None  # not the identity: not a refusal
        return Match(self, [node], bound={"x": node.input[0]})

    def apply(self, op: RewriteOp, match: Match) -> RewriteResult:
        return match.bound["x"]


def _is_2d_transpose(g: GraphBuilder, node: NodeProto | None) -> bool:
    if node is None or node.op_type != "Transpose" or node.domain != "":
        return False
    perm = [list(a.ints) for a in node.attribute if a.name == "perm"]
    return g.get_rank(node.input[0]) == 2 and (not perm or perm[0] == [1, 0])


class TransposeMatMulToGemm(Pattern):
    """MatMul(Transpose(A), B) -> Gemm(A, B, transA=1) (and the same for B) for 2-D
    float matrices."""

    anchor = "MatMul"

    def match(self, g: GraphBuilder, node: NodeProto) -> MatchResult:
        a, b = node.input
        if g.get_rank(a) != 2 or g.get_rank(b) != 2 or g.get_type(a) not in FLOATS:
            return None
        ta, tb = self.producer(g, a), self.producer(g, b)
        ta = ta if _is_2d_transpose(g, ta) else None
        tb = tb if _is_2d_transpose(g, tb) else None
        if ta is None and tb is None:
            return None
        nodes = [ta] if ta is not None else []
        if tb is not None and tb is not ta:
            nodes.append(tb)
        nodes.append(node)
        return Match(
            self,
            nodes,
            bound={
                "a": ta.input[0] if ta else a,
                "b": tb.input[0] if tb else b,
                "transA": int(ta is not None),
                "transB": int(tb is not None),
            },
        )

    def apply(self, op: RewriteOp, match: Match) -> RewriteResult:
        m = match.bound
        return op.Gemm(m["a"], m["b"], transA=m["transA"] or None, transB=m["transB"] or None)


class TransposeGemmToGemm(Pattern):
    """Gemm(Transpose(A), B, C) -> Gemm(A, B, C, transA=1-transA) (same for B)."""

    anchor = "Gemm"

    def match(self, g: GraphBuilder, node: NodeProto) -> MatchResult:
        nodes, bound = [], {}
        for i in (0, 1):
            t = self.producer(g, node.input[i])
            if t is not None and _is_2d_transpose(g, t):
                if all(t is not n for n in nodes):
                    nodes.append(t)
                bound[i] = t.input[0]
        if not nodes:
            return None
        return Match(self, [*nodes, node], bound=bound)

    def apply(self, op: RewriteOp, match: Match) -> RewriteResult:
        node = match.nodes[-1]
        attrs = {a.name: helper.get_attribute_value(a) for a in node.attribute}
        inputs = list(node.input)
        for i, key in [(0, "transA"), (1, "transB")]:
            if i in match.bound:
                inputs[i] = match.bound[i]
                attrs[key] = 1 - attrs.get(key, 0)
        attrs = {k: v for k, v in attrs.items() if not (k.startswith("trans") and v == 0)}
        return op.Gemm(*inputs, **attrs)
