"""LayerNormalization and RMSNormalization fused from their decomposed forms."""

from __future__ import annotations

import numpy as np
from onnx import NodeProto, TensorProto

from ...xbuilder import GraphBuilder
from ...xbuilder.dtypes import onnx_to_np_dtype
from ..matcher import constant_equals, small_constant
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
from ._utils import FLOATS, const_ints, known_shape, normalize_axes

#: the fused operators compute in float32 at best (stash_type): double is left alone
_FUSABLE = FLOATS - {TensorProto.DOUBLE}


def _scalar(g: GraphBuilder, name: str) -> float | None:
    value = small_constant(g, name, 1)
    return None if value is None or value.size != 1 else float(value.reshape(-1)[0])


def _trailing_axes(g: GraphBuilder, x: str, axes_name: str) -> int | None:
    """The first normalized axis when ``axes_name`` holds the last axes of x."""
    rank = g.get_rank(x)
    axes = normalize_axes(const_ints(g, axes_name), rank)
    if not axes or rank is None or axes != list(range(rank - len(axes), rank)):
        return None
    return axes[0]


def _fits_normalized_shape(g: GraphBuilder, x: str, w: str, first_axis: int) -> bool:
    """True when w has exactly the normalized dims of x."""
    sx, sw = known_shape(g, x), known_shape(g, w)
    return sx is not None and sw is not None and tuple(sw) == tuple(sx[first_axis:])


class DecomposedLayerNormToLayerNorm(Pattern):
    """Mul(Div(x - mean(x), Sqrt(mean((x - mean(x))^2) + eps)), scale) ->
    LayerNormalization(x, scale) (the bias is added by :class:`LayerNormAddToLayerNorm`)."""

    min_opset = 17

    def pattern(
        self, op: PatternOp, x: Var, axes: Var, axes2: Var, k1: Var, k2: Var, eps: Var, scale: Var
    ) -> PatternResult:
        d = op.Sub(x, op.ReduceMean(x, axes, keepdims=k1))
        var = op.ReduceMean(op.Pow(d, 2.0), axes2, keepdims=k2)
        return op.Mul(op.Div(d, op.Sqrt(op.Add(var, eps))), scale)

    def check(
        self,
        g: GraphBuilder,
        x: str,
        axes: str,
        axes2: str,
        k1: int | None,
        k2: int | None,
        eps: str,
        scale: str,
    ) -> str | None:
        if g.get_type(x) not in _FUSABLE or g.get_type(scale) != g.get_type(x):
            return "not float32, float16 or bfloat16"
        if k1 not in (None, 1) or k2 not in (None, 1):
            return "keepdims=0"
        first = _trailing_axes(g, x, axes)
        if first is None or first != _trailing_axes(g, x, axes2):
            return "axes are not the same last axes"
        if _scalar(g, eps) is None:
            return "epsilon is not a scalar constant"
        if not _fits_normalized_shape(g, x, scale, first):
            return "the scale does not have the normalized shape"
        return None

    def rewrite(
        self,
        op: RewriteOp,
        x: str,
        axes: str,
        axes2: str,
        k1: int | None,
        k2: int | None,
        eps: str,
        scale: str,
    ) -> RewriteResult:
        first = _trailing_axes(op.g, x, axes)
        return op.LayerNormalization(x, scale, axis=first, epsilon=_scalar(op.g, eps))


class LayerNormAddToLayerNorm(Pattern):
    """Add(LayerNormalization(x, scale), bias) -> LayerNormalization(x, scale, bias)."""

    min_opset = 17

    def pattern(
        self, op: PatternOp, x: Var, scale: Var, bias: Var, axis: Var, eps: Var
    ) -> PatternResult:
        return op.Add(op.LayerNormalization(x, scale, axis=axis, epsilon=eps), bias)

    def check(
        self, g: GraphBuilder, x: str, scale: str, bias: str, axis: int | None, eps: float | None
    ) -> str | None:
        rank = g.get_rank(x)
        if rank is None:
            return "unknown rank"
        first = (-1 if axis is None else axis) % rank
        if not _fits_normalized_shape(g, x, bias, first):
            return "the bias does not have the normalized shape"
        return None

    def rewrite(
        self, op: RewriteOp, x: str, scale: str, bias: str, axis: int | None, eps: float | None
    ) -> RewriteResult:
        return op.LayerNormalization(x, scale, bias, axis=axis, epsilon=eps)


class DecomposedRMSNormToRMSNorm(Pattern):
    """Mul(Mul(x, Reciprocal(Sqrt(mean(x^2) + eps))), scale) (x^2 as Pow or Mul, the
    normalization as Div(x, Sqrt(...)) too) -> RMSNormalization(x, scale), opset >= 23."""

    min_opset = 23
    anchor = "Mul"

    def match(self, g: GraphBuilder, node: NodeProto) -> MatchResult:
        for k in (0, 1):
            inner, scale = self.producer(g, node.input[k]), node.input[1 - k]
            res = self._normalized(g, inner)
            if res is not None:
                break
        else:
            return self._match_no_scale(g, node)
        x, nodes, axes_name, eps = res
        if g.get_type(x) not in _FUSABLE or g.get_type(scale) != g.get_type(x):
            return self.refuse("not float32, float16 or bfloat16")
        first = _trailing_axes(g, x, axes_name)
        if first is None:
            return self.refuse("not the last axes")
        if _scalar(g, eps) is None:
            return self.refuse("epsilon is not a scalar constant")
        if not _fits_normalized_shape(g, x, scale, first):
            return self.refuse("the scale does not have the normalized shape")
        return Match(
            self,
            [*nodes, node],
            bound={"x": x, "scale": scale, "axis": first, "eps": _scalar(g, eps)},
        )

    def _match_no_scale(self, g: GraphBuilder, node):
        """x * Reciprocal(Sqrt(mean(x^2) + eps)) alone: the scale is a constant of ones
        (static normalized dims only); left to the form with a scale when the next
        node multiplies by one."""
        res = self._normalized(g, node)
        if res is None:
            return None
        x, nodes, axes_name, eps = res
        first = _trailing_axes(g, x, axes_name)
        shape = known_shape(g, x)
        if g.get_type(x) not in _FUSABLE or first is None or _scalar(g, eps) is None:
            return self.refuse(
                "not float32, float16 or bfloat16, not the last axes or "
                "epsilon not a scalar constant"
            )
        if shape is None or not all(isinstance(d, int) for d in shape[first:]):
            return self.refuse("the normalized dimensions are not static")
        users = _index_consumers(g, node.output[0])
        if (
            len(users) == 1
            and users[0].op_type == "Mul"
            and any(
                i != node.output[0] and _fits_normalized_shape(g, x, i, first)
                for i in users[0].input
            )
        ):
            return None  # the next Mul is the scale
        ones = np.ones(shape[first:], dtype=onnx_to_np_dtype(g.get_type(x)))
        return Match(
            self, nodes, bound={"x": x, "scale": ones, "axis": first, "eps": _scalar(g, eps)}
        )

    def _normalized(self, g: GraphBuilder, node):
        """x * Reciprocal(Sqrt(mean(x^2) + eps)) or x / Sqrt(...)."""
        if node is None or node.domain != "" or node.op_type not in ("Mul", "Div"):
            return None
        for x, r in [node.input] if node.op_type == "Div" else [node.input, node.input[::-1]]:
            rn = self.producer(g, r)
            chain = [rn]
            if node.op_type == "Mul":
                if rn is None or rn.op_type != "Reciprocal":
                    continue
                rn = self.producer(g, rn.input[0])
                chain.append(rn)
            if rn is None or rn.op_type != "Sqrt":
                continue
            add = self.producer(g, rn.input[0])
            if add is None or add.op_type != "Add":
                continue
            for mean_name, eps in (add.input, add.input[::-1]):
                mean = self.producer(g, mean_name)
                if mean is None or mean.op_type != "ReduceMean" or len(mean.input) != 2:
                    continue
                if any(a.name == "keepdims" and a.i != 1 for a in mean.attribute):
                    continue
                sq = self.producer(g, mean.input[0])
                if sq is None or not (
                    (sq.op_type == "Mul" and list(sq.input) == [x, x])
                    or (
                        sq.op_type == "Pow"
                        and sq.input[0] == x
                        and constant_equals(g, sq.input[1], 2.0)
                    )
                ):
                    continue
                return x, [sq, mean, add, *chain[::-1], node], mean.input[1], eps
        return None

    def apply(self, op: RewriteOp, match: Match) -> RewriteResult:
        b = match.bound
        scale = b["scale"]
        if not isinstance(scale, str):
            scale = op.g.make_constant(scale)
        return op.RMSNormalization(b["x"], scale, axis=b["axis"], epsilon=b["eps"])


def _index_consumers(g: GraphBuilder, name: str) -> list:
    from ..matcher import graph_index

    return list(graph_index(g).consumers.get(name, ()))
