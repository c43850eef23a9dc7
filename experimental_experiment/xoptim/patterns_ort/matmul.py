"""FusedMatMul: MatMul with transposed inputs and a scalar scale in one kernel."""

from __future__ import annotations

from onnx import NodeProto

from ...xbuilder import GraphBuilder
from ..matcher import attribute_value
from ..pattern import Match, MatchResult, Pattern, RewriteOp, RewriteResult
from ._utils import MS, ORT_FLOATS, is_op, scalar_value, swaps_last_two


def _scale_of(g: GraphBuilder, node: NodeProto, other: str) -> float | None:
    """The scalar constant ``node`` (a Mul) multiplies ``other`` by, if it keeps
    the shape of ``other`` (a scalar constant of rank <= rank(other))."""
    for x, c in (node.input, node.input[::-1]):
        if x != other:
            continue
        value = scalar_value(g, c)
        rank_c, rank_x = g.get_rank(c), g.get_rank(x)
        if (
            value is not None
            and rank_c is not None
            and rank_x is not None
            and rank_c <= rank_x
            and g.get_type(c) == g.get_type(x)
        ):
            return value
    return None


def _fused_attributes(node: NodeProto) -> dict | None:
    """transA, transB, alpha of a MatMul or FusedMatMul (None when not fusable)."""
    if node.op_type == "MatMul":
        return {"transA": 0, "transB": 0, "alpha": 1.0}
    attrs = {
        a: attribute_value(node, a)
        for a in ("transA", "transB", "alpha", "transBatchA", "transBatchB")
    }
    if attrs.pop("transBatchA") or attrs.pop("transBatchB"):
        return None
    return {
        "transA": attrs["transA"] or 0,
        "transB": attrs["transB"] or 0,
        "alpha": 1.0 if attrs["alpha"] is None else attrs["alpha"],
    }


def _make_fused(op, a: str, b: str, attrs: dict):
    return op.FusedMatMul(
        a,
        b,
        domain=MS,
        alpha=float(attrs["alpha"]),
        transA=int(attrs["transA"]),
        transB=int(attrs["transB"]),
    )


class _FusedMatMulBase(Pattern):
    def _check_types(self, g: GraphBuilder, a: str, b: str) -> str | None:
        if g.get_type(a) not in ORT_FLOATS or g.get_type(b) != g.get_type(a):
            return "not float32 or float16"
        if (g.get_rank(a) or 0) < 2 or (g.get_rank(b) or 0) < 2:
            return "an input has a rank < 2 or an unknown rank"
        return None


class TransposeMatMulToFusedMatMul(_FusedMatMulBase):
    """MatMul(Transpose(A), Mul(B, s)) -> FusedMatMul(A, B, transA=1, alpha=s): the
    inputs of a MatMul (or FusedMatMul) are read through a Transpose swapping their last
    two axes and through a multiplication by a scalar constant (each used only there).
    Two-dimensional products are left to Gemm by the default patterns before.

    The Transpose of a constant (a weight too large for constant folding, such as the
    output projection of a language model) is left alone: onnxruntime folds it when the
    session starts and prepacks the transposed weight for MatMul, which it does not do
    for FusedMatMul(transB=1) (:class:`TransposeWeightMatMulToFusedMatMul` fuses it, set
    ``onnxruntime_extra``)."""

    #: True to fuse the Transpose of a constant too
    fuse_constant_transpose = False

    def anchors(self) -> tuple[tuple[str, str], ...]:
        return (("", "MatMul"), (MS, "FusedMatMul"))

    def _peel(self, g: GraphBuilder, name: str, attrs: dict, key: str, nodes: list) -> str:
        """Goes up through one Transpose and one scalar Mul (any order) used once."""
        seen: set[str] = set()
        for _ in range(2):
            node = self.producer(g, name)
            if (
                node is None
                or node.domain != ""
                or node.op_type in seen
                or self.n_consumers(g, name) != 1
            ):
                return name
            if (
                node.op_type == "Transpose"
                and swaps_last_two(node, g.get_rank(node.input[0]))
                and (self.fuse_constant_transpose or not g.is_constant(node.input[0]))
            ):
                attrs[key] = 1 - attrs[key]
                name = node.input[0]
            elif node.op_type == "Mul":
                found = [(x, _scale_of(g, node, x)) for x in node.input]
                found = [(x, v) for x, v in found if v is not None]
                if not found:
                    return name
                name, value = found[0]
                attrs["alpha"] *= value
            else:
                return name
            seen.add(node.op_type)
            nodes.append(node)
        return name

    def match(self, g: GraphBuilder, node: NodeProto) -> MatchResult:
        if node.op_type == "MatMul" and node.domain != "":
            return None
        attrs = _fused_attributes(node)
        if attrs is None:
            return None
        nodes_a: list = []
        nodes_b: list = []
        a = self._peel(g, node.input[0], attrs, "transA", nodes_a)
        b = self._peel(g, node.input[1], attrs, "transB", nodes_b)
        if not nodes_a and not nodes_b:
            return None
        reason = self._check_types(g, a, b)
        if reason:
            return self.refuse(reason)
        return Match(self, [*nodes_a, *nodes_b, node], bound={"a": a, "b": b, **attrs})

    def apply(self, op: RewriteOp, match: Match) -> RewriteResult:
        m = match.bound
        return _make_fused(op, m["a"], m["b"], m)


class TransposeWeightMatMulToFusedMatMul(TransposeMatMulToFusedMatMul):
    """:class:`TransposeMatMulToFusedMatMul` also on the Transpose of a constant weight:
    MatMul(X, Transpose(W)) -> FusedMatMul(X, W, transB=1). Measured slower than the
    pre-transposed weight onnxruntime prepacks (see ``ORT_EXTRA_PATTERNS``)."""

    fuse_constant_transpose = True


class MatMulScaleToFusedMatMul(_FusedMatMulBase):
    """Mul(MatMul(A, B), s) -> FusedMatMul(A, B, alpha=s) for a scalar constant ``s``
    (also Div(MatMul(A, B), s) -> alpha=1/s, and on a FusedMatMul)."""

    anchor = ("Mul", "Div")

    def match(self, g: GraphBuilder, node: NodeProto) -> MatchResult:
        for k in (0, 1) if node.op_type == "Mul" else (0,):
            mm = self.producer(g, node.input[k])
            if not (is_op(mm, "MatMul") or is_op(mm, "FusedMatMul", MS)):
                continue
            value = scalar_value(g, node.input[1 - k])
            c = node.input[1 - k]
            rank_c, rank_mm = g.get_rank(c), g.get_rank(mm.output[0])
            if value is None or rank_c is None or rank_mm is None or rank_c > rank_mm:
                continue
            if g.get_type(c) != g.get_type(mm.output[0]):
                continue
            if node.op_type == "Div" and value == 0:
                return self.refuse("division by zero")
            attrs = _fused_attributes(mm)
            if attrs is None:
                return None
            reason = self._check_types(g, mm.input[0], mm.input[1])
            if reason:
                return self.refuse(reason)
            attrs["alpha"] *= value if node.op_type == "Mul" else 1.0 / value
            return Match(self, [mm, node], bound={"a": mm.input[0], "b": mm.input[1], **attrs})
        return None

    def apply(self, op: RewriteOp, match: Match) -> RewriteResult:
        m = match.bound
        return _make_fused(op, m["a"], m["b"], m)
