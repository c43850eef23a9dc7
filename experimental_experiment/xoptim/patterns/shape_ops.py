"""Expand, Squeeze/Unsqueeze, Slice, Split/Concat no-ops and chains."""

from __future__ import annotations

from onnx import NodeProto

from ...xbuilder import GraphBuilder
from ...xbuilder.dtypes import i64
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
from ._utils import ShapePreservingToIdentity, const_ints, normalize_axes, same_known_shape


class ExpandToIdentity(ShapePreservingToIdentity):
    """Expand(x, shape) -> x when the output shape is known equal to x's shape."""

    def pattern(self, op: PatternOp, x: Var, s: Var) -> PatternResult:
        return op.Expand(x, s)


class SqueezeUnsqueezeToIdentity(Pattern):
    """Unsqueeze(Squeeze(x, axes), axes) -> x (same axes)."""

    def pattern(self, op: PatternOp, x: Var, a1: Var, a2: Var) -> PatternResult:
        return op.Unsqueeze(op.Squeeze(x, a1), a2)

    def check(self, g: GraphBuilder, x: str, a1: str, a2: str) -> str | None:
        r = g.get_rank(x)
        n1, n2 = normalize_axes(const_ints(g, a1), r), normalize_axes(const_ints(g, a2), r)
        if n1 is None or n1 != n2:
            return "axes differ or are unknown"
        return None

    def rewrite(self, op: RewriteOp, x: str, a1: str, a2: str) -> RewriteResult:
        return x


class UnsqueezeSqueezeToIdentity(Pattern):
    """Squeeze(Unsqueeze(x, axes), axes) -> x (same axes)."""

    def pattern(self, op: PatternOp, x: Var, a1: Var, a2: Var) -> PatternResult:
        return op.Squeeze(op.Unsqueeze(x, a1), a2)

    def check(self, g: GraphBuilder, x: str, a1: str, a2: str) -> str | None:
        v1, rx = const_ints(g, a1), g.get_rank(x)
        r = None if v1 is None or rx is None else rx + len(v1)
        n1, n2 = normalize_axes(v1, r), normalize_axes(const_ints(g, a2), r)
        if n1 is None or n1 != n2:
            return "axes differ or are unknown"
        return None

    def rewrite(self, op: RewriteOp, x: str, a1: str, a2: str) -> RewriteResult:
        return x


class UnsqueezeUnsqueezeToUnsqueeze(Pattern):
    """Unsqueeze(Unsqueeze(x, a1), a2) -> Unsqueeze(x, a) with the composed axes."""

    def pattern(self, op: PatternOp, x: Var, a1: Var, a2: Var) -> PatternResult:
        return op.Unsqueeze(op.Unsqueeze(x, a1), a2)

    def check(self, g: GraphBuilder, x: str, a1: str, a2: str) -> str | None:
        if const_ints(g, a1) is None or const_ints(g, a2) is None or g.get_rank(x) is None:
            return "axes or rank unknown"
        return None

    def rewrite(self, op: RewriteOp, x: str, a1: str, a2: str) -> RewriteResult:
        v1, v2 = const_ints(op.g, a1), const_ints(op.g, a2)
        r = op.g.get_rank(x)
        assert v1 is not None and v2 is not None and r is not None  # ensured by check
        rank = r + len(v1) + len(v2)
        n2 = sorted(a % rank for a in v2)
        rest = [i for i in range(rank) if i not in n2]
        axes = sorted(n2 + [rest[a % (r + len(v1))] for a in v1])
        return op.Unsqueeze(x, i64(axes))


def _slice_args(g: GraphBuilder, node):
    """(starts, ends, axes, steps) of a Slice with constant arguments, or None."""
    args = [const_ints(g, i) if i else None for i in node.input[1:]]
    args += [None] * (4 - len(args))
    starts, ends, axes, steps = args
    if starts is None or ends is None:
        return None
    if axes is None:
        if len(node.input) > 3 and node.input[3]:
            return None
        axes = list(range(len(starts)))
    if steps is None:
        if len(node.input) > 4 and node.input[4]:
            return None
        steps = [1] * len(starts)
    return starts, ends, axes, steps


def _full(shape, starts, ends, axes) -> bool:
    """Tells if every slice starts at 0 and ends after the dimension."""
    if shape is None:
        return False
    for s, e, a in zip(starts, ends, axes):
        if not -len(shape) <= a < len(shape):
            return False
        d = shape[a]
        if s != 0 or not (e >= 2**31 - 1 or (isinstance(d, int) and e >= d)):
            return False
    return True


class SliceToIdentity(Pattern):
    """Slice(x, ...) -> x when every step is 1 and the output shape is known equal to
    x's shape or every slice goes from 0 to the end."""

    anchor = "Slice"

    def match(self, g: GraphBuilder, node: NodeProto) -> MatchResult:
        args = _slice_args(g, node)
        if args is None or any(s != 1 for s in args[3]):
            return None
        if not same_known_shape(g, node.input[0], node.output[0]) and not _full(
            g.get_shape(node.input[0]), *args[:3]
        ):
            return self.refuse("the slice may not keep everything")
        return Match(self, [node], bound={"x": node.input[0]})

    def apply(self, op: RewriteOp, match: Match) -> RewriteResult:
        return match.bound["x"]


class SliceSliceToSlice(Pattern):
    """Slice(Slice(x, s1, e1, a1, p1), s2, e2, a2, p2) -> Slice(x, s1+s2, e1+e2, a1+a2,
    p1+p2) when both have constant arguments on different axes."""

    anchor = "Slice"

    def match(self, g: GraphBuilder, node: NodeProto) -> MatchResult:
        inner = self.producer(g, node.input[0])
        if inner is None or inner.op_type != "Slice" or inner.domain != "":
            return None
        a2, a1 = _slice_args(g, node), _slice_args(g, inner)
        rank = g.get_rank(inner.input[0])
        if a1 is None or a2 is None or rank is None:
            return self.refuse("non constant arguments or unknown rank")
        n1, n2 = normalize_axes(a1[2], rank), normalize_axes(a2[2], rank)
        if n1 is None or n2 is None or set(n1) & set(n2):
            return self.refuse("both slices share an axis")
        merged = [i64(u + v) for u, v in zip(a1, a2)]
        return Match(self, [inner, node], bound={"x": inner.input[0], "args": merged})

    def apply(self, op: RewriteOp, match: Match) -> RewriteResult:
        return op.Slice(match.bound["x"], *match.bound["args"])


class SplitConcatToIdentity(Pattern):
    """Concat(*Split(x, axis=a), axis=a) -> x (every output, in order)."""

    anchor = "Concat"

    def match(self, g: GraphBuilder, node: NodeProto) -> MatchResult:
        split = self.producer(g, node.input[0])
        if split is None or split.op_type != "Split" or split.domain != "":
            return None
        if list(node.input) != list(split.output):
            return None
        rank = g.get_rank(split.input[0])
        if rank is None:
            return self.refuse("unknown rank")
        a1 = (attribute_value(split, "axis") or 0) % rank
        a2 = attribute_value(node, "axis") % rank
        if a1 != a2:
            return self.refuse("different axes")
        return Match(self, [split, node], bound={"x": split.input[0]})

    def apply(self, op: RewriteOp, match: Match) -> RewriteResult:
        return match.bound["x"]
