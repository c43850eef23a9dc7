"""RMS normalization (SimplifiedLayerNormalization) and the Skip* fusions of
onnxruntime: a residual Add followed by a normalization becomes one kernel.

``SimplifiedLayerNormalization`` is registered by onnxruntime in the default ONNX
domain although ONNX has no such operator: a model using it runs with onnxruntime but
fails ``onnx.checker.check_model(..., full_check=True)``.
"""

from __future__ import annotations

import numpy as np
from onnx import NodeProto
from onnx.helper import tensor_dtype_to_np_dtype

from ...xbuilder import GraphBuilder
from ...xbuilder.graph_utils import constant_ints
from ..matcher import attribute_value, constant_equals
from ..pattern import Match, MatchResult, Pattern, Refusal, RewriteOp, RewriteResult
from ._utils import MS, ORT_FLOATS, is_op, last_dim_vector, scalar_value, used_before


def _reduce_axes(g: GraphBuilder, node: NodeProto) -> list[int] | None:
    """Axes of a ReduceMean (input or attribute), made non-negative."""
    rank = g.get_rank(node.input[0])
    if rank is None:
        return None
    if len(node.input) > 1 and node.input[1]:
        axes = constant_ints(g, node.input[1], None)
        if axes is None:
            return None
    else:
        axes = attribute_value(node, "axes")
    if not axes or any(not -rank <= a < rank for a in axes):
        return None
    return sorted(a % rank for a in axes)


class RMSNormToSimplifiedLayerNorm(Pattern):
    """x * Reciprocal(Sqrt(ReduceMean(x^2) + eps)) or x / Sqrt(ReduceMean(x^2) + eps)
    (x^2 as Pow(x, 2) or Mul(x, x), the mean over the last axes) ->
    SimplifiedLayerNormalization(x, ones, axis, epsilon) (RMSNormalization from opset
    23); a following multiplication by a weight is folded into the scale by
    :class:`SimplifiedLayerNormMulToScale`."""

    anchor = ("Mul", "Div")

    def match(self, g: GraphBuilder, node: NodeProto) -> MatchResult:
        pairs = [node.input] if node.op_type == "Div" else [node.input, node.input[::-1]]
        refusal = None
        for x, r in pairs:
            res = self._denominator(g, node, x, r)
            if res:
                break
            if isinstance(res, Refusal):  # false, but keeps its reason
                refusal = res
        else:
            return refusal
        chain, mean, eps = res
        rank = g.get_rank(x)
        axes = _reduce_axes(g, mean)
        if axes is None or rank is None or axes != list(range(rank - len(axes), rank)):
            return self.refuse("the mean is not taken over the last axes")
        if any(a.name == "keepdims" and a.i != 1 for a in mean.attribute):
            return self.refuse("keepdims=0")
        if g.get_type(x) not in ORT_FLOATS:
            return self.refuse("not float32 or float16")
        shape = g.get_shape(x)
        norm = None if shape is None else shape[axes[0] :]
        if norm is None or not all(isinstance(d, int) for d in norm):
            return self.refuse("the normalized dimensions are not static")
        if g.get_shape(node.output[0]) != shape:
            return self.refuse("the output shape differs from the input shape")
        return Match(
            self, [*chain, node], bound={"x": x, "axis": axes[0], "eps": eps, "shape": tuple(norm)}
        )

    def _denominator(self, g: GraphBuilder, node, x, r):
        """(nodes, ReduceMean node, epsilon) if r is 1/sqrt(mean(x^2)+eps) or sqrt(...)."""
        rn = self.producer(g, r)
        chain = []
        if node.op_type == "Mul":
            if not is_op(rn, "Reciprocal"):
                return None
            chain.append(rn)
            rn = self.producer(g, rn.input[0])
        if not is_op(rn, "Sqrt"):
            return None
        chain.append(rn)
        add = self.producer(g, rn.input[0])
        if not is_op(add, "Add"):
            return None
        for mean_name, eps_name in (add.input, add.input[::-1]):
            mean = self.producer(g, mean_name)
            if not is_op(mean, "ReduceMean"):
                continue
            sq = self.producer(g, mean.input[0])
            if not (
                (is_op(sq, "Mul") and list(sq.input) == [x, x])
                or (is_op(sq, "Pow") and sq.input[0] == x and constant_equals(g, sq.input[1], 2.0))
            ):
                continue
            eps = scalar_value(g, eps_name)
            if eps is None:
                return self.refuse("epsilon is not a scalar constant")
            return [sq, mean, add, *chain[::-1]], mean, eps
        return None

    def apply(self, op: RewriteOp, match: Match) -> RewriteResult:
        b = match.bound
        dtype = tensor_dtype_to_np_dtype(op.g.get_type(b["x"]))
        ones = op.g.make_constant(np.ones(b["shape"], dtype=dtype))
        make = op.RMSNormalization if op.g.main_opset >= 23 else op.SimplifiedLayerNormalization
        return make(b["x"], ones, axis=b["axis"], epsilon=float(b["eps"]))


def _gamma_index(node: NodeProto) -> int | None:
    if is_op(node, ("SimplifiedLayerNormalization", "RMSNormalization")):
        return 1
    if is_op(node, "SkipSimplifiedLayerNormalization", MS):
        return 2
    return None


class SimplifiedLayerNormMulToScale(Pattern):
    """Mul(SimplifiedLayerNormalization(x, scale), w) -> SimplifiedLayerNormalization(x,
    scale * w) when ``scale`` and ``w`` are constants or when ``scale`` is ones and ``w``
    has its shape (also for RMSNormalization and SkipSimplifiedLayerNormalization)."""

    anchor = "Mul"

    def match(self, g: GraphBuilder, node: NodeProto) -> MatchResult:
        for k in (0, 1):
            norm = self.producer(g, node.input[k])
            gi = _gamma_index(norm)
            if gi is not None and norm.output[0] == node.input[k]:
                break
        else:
            return None
        if self.n_consumers(g, norm.output[0]) != 1 or any(
            o and self.n_consumers(g, o) for o in norm.output[1:3]
        ):
            return self.refuse("the normalized result or its statistics are used elsewhere")
        w, scale = node.input[1 - k], norm.input[gi]
        if g.get_type(w) != g.get_type(scale) or not g.is_constant(scale):
            return self.refuse("the scale is not a constant of the same type")
        s_shape, w_shape = g.get_shape(scale), g.get_shape(w)
        if w_shape is None or s_shape is None or len(w_shape) > len(s_shape):
            return self.refuse("the weight would change the output shape")
        if g.is_constant(w):
            try:
                if np.broadcast_shapes(s_shape, w_shape) != tuple(s_shape):
                    return self.refuse("the weight would change the output shape")
            except ValueError:
                return self.refuse("shapes do not broadcast")
            new = np.asarray(g.get_constant(scale)) * np.asarray(g.get_constant(w))
        elif constant_equals(g, scale, 1.0, rtol=0) and tuple(w_shape) == tuple(s_shape):
            new = w
        else:
            return self.refuse("the weight is not constant and the scale is not ones")
        outputs = [node.output[0]] + (
            [norm.output[3]] if len(norm.output) > 3 and norm.output[3] else []
        )
        return Match(self, [norm, node], outputs=outputs, bound={"scale": new, "gi": gi})

    def apply(self, op: RewriteOp, match: Match) -> RewriteResult:
        norm = match.nodes[0]
        scale = match.bound["scale"]
        if not isinstance(scale, str):
            scale = op.g.make_constant(
                scale.astype(op.g.get_constant(norm.input[match.bound["gi"]]).dtype)
            )
        inputs = list(norm.input)
        inputs[match.bound["gi"]] = scale
        attrs = {a: attribute_value(norm, a) for a in ("axis", "epsilon", "stash_type")}
        if norm.domain == "":
            return getattr(op, norm.op_type)(*inputs, **attrs)
        return _skip_outputs(
            op,
            "SkipSimplifiedLayerNormalization",
            inputs,
            len(match.outputs or ()) > 1,
            epsilon=attrs["epsilon"],
        )


def _skip_outputs(op, op_type: str, inputs: list, with_sum: bool, **attrs):
    """Adds a Skip*Normalization node, with the sum output if asked."""
    g = op.g
    outputs = [g.unique_name(f"_{op_type.lower()}")]
    if with_sum:
        outputs += ["", "", g.unique_name("_input_skip_sum")]
    res = g.make_node(op_type, inputs, outputs, domain=MS, **attrs)
    return (res[0], res[3]) if with_sum else res


class _AddNormToSkipNorm(Pattern):
    """Base of the Skip* fusions: Norm(Add(a, b), gamma, ...) -> SkipNorm(a, b, gamma,
    ...) with a second output replacing the sum when the sum is used elsewhere."""

    skip_op = ""

    def match(self, g: GraphBuilder, node: NodeProto) -> MatchResult:
        if any(o and self.n_consumers(g, o) for o in node.output[1:]):
            return self.refuse("the statistics outputs are used")
        if attribute_value(node, "stash_type") not in (None, 1):
            return self.refuse("stash_type is not float32")
        x = node.input[0]
        rank = g.get_rank(x)
        axis = attribute_value(node, "axis")
        if rank is None or (-1 if axis is None else axis) % rank != rank - 1:
            return self.refuse("the normalization is not over the last axis")
        add = self.producer(g, x)
        if not is_op(add, "Add"):
            return None
        a, b = add.input
        if (
            rank not in (2, 3)
            or g.get_shape(a) is None
            or g.get_shape(a) != g.get_shape(b)
            or g.get_shape(a) != g.get_shape(x)
        ):
            return self.refuse("the inputs of Add are not 2-D or 3-D with the same shape")
        if g.get_type(x) not in ORT_FLOATS:
            return self.refuse("not float32 or float16")
        for w in node.input[1:]:
            if w and not last_dim_vector(g, x, w):
                return self.refuse("scale or bias is not a vector of the last dimension")
        eps = attribute_value(node, "epsilon")
        eps = 1e-5 if eps is None else eps  # default of both normalizations
        outputs = [node.output[0]]
        if self.n_consumers(g, x) > 1:
            if used_before(g, x, node, [add, node]):
                return self.refuse("the sum is used before the normalization")
            outputs.append(x)
        return Match(self, [add, node], outputs=outputs, bound={"a": a, "b": b, "eps": eps})

    def apply(self, op: RewriteOp, match: Match) -> RewriteResult:
        b, norm = match.bound, match.nodes[-1]
        return _skip_outputs(
            op,
            self.skip_op,
            [b["a"], b["b"], *norm.input[1:]],
            len(match.outputs or ()) > 1,
            epsilon=float(b["eps"]),
        )


class AddSimplifiedLayerNormToSkipSimplifiedLayerNorm(_AddNormToSkipNorm):
    """SimplifiedLayerNormalization(Add(a, b), gamma) ->
    SkipSimplifiedLayerNormalization(a, b, gamma) (com.microsoft), the sum kept as the
    fourth output if used elsewhere; 2-D or 3-D inputs of the same shape, last axis."""

    anchor = "SimplifiedLayerNormalization"
    skip_op = "SkipSimplifiedLayerNormalization"


class AddLayerNormToSkipLayerNorm(_AddNormToSkipNorm):
    """LayerNormalization(Add(a, b), gamma, beta) -> SkipLayerNormalization(a, b, gamma,
    beta) (com.microsoft), the sum kept as the fourth output if used elsewhere; 2-D or
    3-D inputs of the same shape, last axis."""

    anchor = "LayerNormalization"
    skip_op = "SkipLayerNormalization"
