"""x * Reciprocal(Sqrt(ReduceMean(x^2) + eps)) or x / Sqrt(...) ->
SimplifiedLayerNormalization(x, ones, axis, epsilon) (RMSNormalization from opset 23)
on the IR."""

from __future__ import annotations

import numpy as np
import onnx_ir as ir

from .rewrite import IRMatch, IRPattern
from .values import producer, scalar, small_constant, static_dims

ORT_FLOATS = frozenset({ir.DataType.FLOAT, ir.DataType.FLOAT16})


def _is_square_of(node: ir.Node | None, x: ir.Value) -> bool:
    if node is None:
        return False
    if node.op_type == "Mul":
        return node.inputs[0] is x and node.inputs[1] is x
    two = scalar(node.inputs[1]) if len(node.inputs) > 1 else None
    return node.inputs[0] is x and two is not None and abs(two - 2.0) < 1e-6


def _axes(mean: ir.Node, rank: int) -> list[int] | None:
    if len(mean.inputs) > 1 and mean.inputs[1] is not None:
        value = small_constant(mean.inputs[1])
        axes = None if value is None else [int(a) for a in value.reshape(-1)]
    else:
        attr = mean.attributes.get("axes")
        axes = None if attr is None else list(attr.as_ints())
    if not axes or any(not -rank <= a < rank for a in axes):
        return None
    return sorted(a % rank for a in axes)


class RMSNormIR(IRPattern):
    """The decomposed RMS normalization becomes one node, like
    ``RMSNormToSimplifiedLayerNorm``."""

    anchor = ("Mul", "Div")

    def match(self, node: ir.Node) -> IRMatch | None:
        pairs = [(0, 1)] if node.op_type == "Div" else [(0, 1), (1, 0)]
        for i, j in pairs:
            found = self._denominator(node, node.inputs[i], node.inputs[j])
            if found is not None:
                return self._check(node, node.inputs[i], *found)
        return None

    def _denominator(self, node, x, r):
        chain = []
        if node.op_type == "Mul":
            rec = producer(r, "Reciprocal")
            if rec is None:
                return None
            chain.append(rec)
            r = rec.inputs[0]
        sqrt = producer(r, "Sqrt")
        add = None if sqrt is None else producer(sqrt.inputs[0], "Add")
        if add is None:
            return None
        chain.append(sqrt)
        for m, e in ((0, 1), (1, 0)):
            mean = producer(add.inputs[m], "ReduceMean")
            square = None if mean is None else producer(mean.inputs[0], ("Mul", "Pow"))
            if square is None or not _is_square_of(square, x):
                continue
            eps = scalar(add.inputs[e])
            if eps is None:
                return None
            return [square, mean, add, *chain[::-1]], mean, eps
        return None

    def _check(self, node, x, chain, mean, eps) -> IRMatch | None:
        dims = static_dims(x)
        if dims is None or x.dtype not in ORT_FLOATS:
            return None
        axes = _axes(mean, len(dims))
        if axes is None or axes != list(range(len(dims) - len(axes), len(dims))):
            return None
        keepdims = mean.attributes.get("keepdims")
        if keepdims is not None and keepdims.as_int() != 1:
            return None
        norm = dims[axes[0] :]
        if not all(isinstance(d, int) for d in norm):
            return None
        return IRMatch([*chain, node], {"x": x, "axis": axes[0], "eps": eps, "shape": tuple(norm)})

    def rewrite(self, graph: ir.Graph, match: IRMatch) -> tuple[list[ir.Node], list[ir.Value]]:
        b = match.bound
        root = match.nodes[-1]
        dtype = b["x"].dtype.numpy()
        ones = ir.Value(
            name=f"{root.outputs[0].name}__ones",
            const_value=ir.tensor(np.ones(b["shape"], dtype=dtype)),
        )
        ones.shape = ir.Shape(b["shape"])
        ones.dtype = b["x"].dtype
        graph.register_initializer(ones)
        opset = graph.opset_imports.get("", 1)
        op_type = "RMSNormalization" if opset >= 23 else "SimplifiedLayerNormalization"
        node = ir.node(
            op_type, [b["x"], ones], {"axis": b["axis"], "epsilon": float(b["eps"])}, name=root.name
        )
        return [node], [node.outputs[0]]
