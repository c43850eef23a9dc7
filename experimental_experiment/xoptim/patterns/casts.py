"""Cast chains and casts to the same type."""

from __future__ import annotations

from types import MappingProxyType
from typing import Mapping

from onnx import NodeProto
from onnx import TensorProto as T

from ...xbuilder import GraphBuilder
from ..matcher import attribute_value
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

_INTS_SMALL = frozenset({T.INT16, T.INT32, T.INT64})
#: src -> types representing every value of src exactly
_EXACT: Mapping[int, frozenset[int]] = MappingProxyType(
    {
        T.BOOL: frozenset(
            {
                T.FLOAT16,
                T.BFLOAT16,
                T.FLOAT,
                T.DOUBLE,
                T.INT8,
                T.UINT8,
                T.INT16,
                T.UINT16,
                T.INT32,
                T.UINT32,
                T.INT64,
                T.UINT64,
            }
        ),
        T.FLOAT16: frozenset({T.FLOAT, T.DOUBLE}),
        T.BFLOAT16: frozenset({T.FLOAT, T.DOUBLE}),
        T.FLOAT: frozenset({T.DOUBLE}),
        T.INT8: _INTS_SMALL | {T.FLOAT16, T.FLOAT, T.DOUBLE},
        T.UINT8: _INTS_SMALL | {T.UINT16, T.UINT32, T.UINT64, T.FLOAT16, T.FLOAT, T.DOUBLE},
        T.INT16: frozenset({T.INT32, T.INT64, T.FLOAT, T.DOUBLE}),
        T.UINT16: frozenset({T.INT32, T.UINT32, T.INT64, T.UINT64, T.FLOAT, T.DOUBLE}),
        T.INT32: frozenset({T.INT64, T.DOUBLE}),
        T.UINT32: frozenset({T.INT64, T.UINT64, T.DOUBLE}),
    }
)


def is_exact_cast(src: int, dst: int) -> bool:
    """True when casting from ``src`` to ``dst`` keeps every value."""
    return src == dst or dst in _EXACT.get(src, ())


class CastToIdentity(Pattern):
    """Cast(x, to=type(x)) -> x."""

    anchor = "Cast"

    def match(self, g: GraphBuilder, node: NodeProto) -> MatchResult:
        # a cast changing the type is not a refusal, only not this structure
        to = attribute_value(node, "to")
        if len(node.attribute) != 1 or not to or g.get_type(node.input[0]) != to:
            return None
        return Match(self, [node], bound={"x": node.input[0]})

    def apply(self, op: RewriteOp, match: Match) -> RewriteResult:
        return match.bound["x"]


class CastCastToCast(Pattern):
    """Cast(Cast(x, to=a), to=b) -> Cast(x, to=b) (or x if b is x's type) when the
    first cast is exact (widening, e.g. float16 -> float32 -> float16);
    Cast(float32 -> int64 -> float32) is not folded (it truncates)."""

    def pattern(self, op: PatternOp, x: Var, a: Var, b: Var) -> PatternResult:
        return op.Cast(op.Cast(x, to=a), to=b)

    def check(self, g: GraphBuilder, x: str, a: int, b: int) -> str | None:
        src = g.get_type(x)
        if not src:
            return "unknown input type"
        if not is_exact_cast(src, a):
            return f"the first cast {src}->{a} loses information"
        return None

    def rewrite(self, op: RewriteOp, x: str, a: int, b: int) -> RewriteResult:
        if op.g.get_type(x) == b:
            return x
        return op.Cast(x, to=b)
