"""Small helpers shared by the patterns."""

from __future__ import annotations

from onnx import TensorProto

from ...xbuilder import GraphBuilder
from ...xbuilder.graph_utils import constant_ints
from ..pattern import Pattern, RewriteOp, RewriteResult

FLOATS = frozenset(
    {TensorProto.FLOAT, TensorProto.DOUBLE, TensorProto.FLOAT16, TensorProto.BFLOAT16}
)


def known_shape(g: GraphBuilder, name: str) -> tuple | None:
    """The shape if every dimension is known (int or symbolic name), else None."""
    shape = g.get_shape(name) if name else None
    if shape is None or any(d is None for d in shape):
        return None
    return tuple(shape)


def same_known_shape(g: GraphBuilder, a: str, b: str) -> bool:
    """True when both shapes are fully known (ints or symbols) and equal."""
    sa, sb = known_shape(g, a), known_shape(g, b)
    return sa is not None and sa == sb


def const_ints(g: GraphBuilder, name: str) -> list[int] | None:
    """Values of an integer constant as a list, None if not a constant."""
    return constant_ints(g, name)


def normalize_axes(axes, rank: int | None) -> list[int] | None:
    """Axes made non-negative and sorted, None when the rank is unknown."""
    if axes is None or rank is None:
        return None
    if any(not -rank <= a < rank for a in axes):
        return None
    return sorted(a % rank for a in axes)


class ShapePreservingToIdentity(Pattern):
    """Base of the patterns removing ``Op(x, shape)`` when its output shape is known
    equal to ``x``'s shape (symbolic dimensions included)."""

    def check(self, g: GraphBuilder, x: str, s: str, outputs: list[str]) -> str | None:
        if not same_known_shape(g, x, outputs[0]):
            return "shapes not known to be equal"
        return None

    def rewrite(self, op: RewriteOp, x: str, s: str) -> RewriteResult:
        return x
