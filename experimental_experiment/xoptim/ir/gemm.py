"""Add(MatMul(A, B), C) -> Gemm(A, B, C) on the IR."""

from __future__ import annotations

import onnx_ir as ir

from .rewrite import IRMatch, IRPattern
from .values import producer, static_dims

FLOATS = frozenset(
    {ir.DataType.FLOAT, ir.DataType.FLOAT16, ir.DataType.DOUBLE, ir.DataType.BFLOAT16}
)


def _broadcasts_without_change(bias: list, out: list) -> bool:
    """Tells if a bias of shape ``bias`` (rank <= 2) added to ``out`` keeps its shape."""
    if len(bias) > 2:
        return False
    for b, o in zip(reversed(bias), reversed(out)):
        if b != 1 and b != o:
            return False
    return True


class MatMulAddToGemmIR(IRPattern):
    """MatMul of 2-D float matrices followed by the addition of a bias which does not
    change the shape becomes Gemm, like ``MatMulAddToGemm``."""

    anchor = ("Add",)

    def match(self, node: ir.Node) -> IRMatch | None:
        for k in (0, 1):
            mm = producer(node.inputs[k], "MatMul")
            if mm is None:
                continue
            a, b, c = mm.inputs[0], mm.inputs[1], node.inputs[1 - k]
            da, db, dc = static_dims(a), static_dims(b), static_dims(c)
            if da is None or db is None or len(da) != 2 or len(db) != 2:
                return None
            if a is None or a.dtype not in FLOATS or dc is None:
                return None
            out = static_dims(mm.outputs[0]) or [da[0], db[1]]
            if not _broadcasts_without_change(dc, out):
                return None
            return IRMatch([mm, node], {"a": a, "b": b, "c": c})
        return None

    def rewrite(self, graph: ir.Graph, match: IRMatch) -> tuple[list[ir.Node], list[ir.Value]]:
        b = match.bound
        node = ir.node("Gemm", [b["a"], b["b"], b["c"]], name=match.nodes[-1].name)
        return [node], [node.outputs[0]]
