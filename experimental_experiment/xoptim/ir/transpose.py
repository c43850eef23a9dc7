"""Transpose(Transpose(x, perm=p1), perm=p2) -> Transpose(x, perm=p1∘p2) on the IR."""

from __future__ import annotations

import onnx_ir as ir

from .rewrite import IRMatch, IRPattern
from .values import producer


def _perm(node: ir.Node) -> list[int] | None:
    attr = node.attributes.get("perm")
    return None if attr is None else list(attr.as_ints())


class TransposeTransposeIR(IRPattern):
    """Two consecutive transpositions become one (or none when they cancel out), like
    ``TransposeTransposeToTranspose``."""

    anchor = ("Transpose",)

    def match(self, node: ir.Node) -> IRMatch | None:
        first = producer(node.inputs[0], "Transpose")
        if first is None:
            return None
        p1, p2 = _perm(first), _perm(node)
        if p1 is None or p2 is None:
            return None
        return IRMatch([first, node], {"x": first.inputs[0], "perm": [p1[i] for i in p2]})

    def rewrite(self, graph: ir.Graph, match: IRMatch) -> tuple[list[ir.Node], list[ir.Value]]:
        x, perm = match.bound["x"], match.bound["perm"]
        if perm == list(range(len(perm))):
            return [], [x]
        node = ir.node("Transpose", [x], {"perm": perm}, name=match.nodes[-1].name)
        return [node], [node.outputs[0]]
