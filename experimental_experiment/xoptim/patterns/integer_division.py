"""Floor division of sizes: ``x // c`` is written ``Div(Sub(x, Mod(x, c)), c)`` because
ONNX ``Div`` truncates integers toward zero. When ``x`` is a size (built from ``Shape``)
plus a constant, the numerator can be made non-negative, where truncation and floor
agree: ``(s + k) // c == (s + k + m c) / c - m`` with ``m = ceil(-k / c)``, and a
following ``+ m`` (the ``+ 1`` of a convolution's output size) cancels.
"""

from __future__ import annotations

import numpy as np
from onnx import NodeProto

from ...xbuilder import GraphBuilder
from ..matcher import attribute_value, graph_index, small_constant
from ..pattern import Match, MatchResult, Pattern, RewriteOp, RewriteResult

_SIZE_PRESERVING = frozenset({"Squeeze", "Unsqueeze", "Reshape", "Identity", "Concat"})
_CLOSED = frozenset({"Add", "Mul", "Max", "Min"})  # non-negative inputs give a non-negative output


def _int_scalar(g: GraphBuilder, name: str) -> int | None:
    value = small_constant(g, name, 1)
    if value is None or value.dtype.kind not in "iu" or value.size != 1:
        return None
    return int(value.reshape(-1)[0])


def is_nonnegative(g: GraphBuilder, name: str, depth: int = 6) -> bool:
    """Tells if ``name`` is an integer tensor made of sizes: Shape, Size, gathered or
    reshaped sizes, non-negative constants, sums and products of those."""
    value = small_constant(g, name, 64)
    if value is not None:
        return value.dtype.kind in "iu" and bool((value >= 0).all())
    node = Pattern.producer(g, name)
    if node is None or node.domain != "" or depth == 0:
        return False
    if node.op_type in ("Shape", "Size"):
        return True
    if node.op_type == "Gather":
        return is_nonnegative(g, node.input[0], depth - 1)
    if node.op_type in _SIZE_PRESERVING:
        data = node.input[:1] if node.op_type != "Concat" else node.input
        return all(is_nonnegative(g, i, depth - 1) for i in data)
    if node.op_type in _CLOSED:
        return all(is_nonnegative(g, i, depth - 1) for i in node.input)
    return False


class FloorDivOfSizeToDiv(Pattern):
    """``Div(Sub(t, Mod(t, c)), c)`` (the floor division of ``t = s + k`` by a positive
    constant ``c``, ``s`` a size) -> ``Div(s + k + m c, c) - m`` with the smallest
    ``m >= 0`` making the numerator non-negative; ``Div(t, c)`` when ``k >= 0``, and
    the ``- m`` disappears into a following ``Add(., m)``."""

    anchor = "Div"

    def match(self, g: GraphBuilder, node: NodeProto) -> MatchResult:
        c = _int_scalar(g, node.input[1])
        sub = self.producer(g, node.input[0])
        if c is None or c <= 0 or sub is None or sub.op_type != "Sub" or sub.domain != "":
            return None
        mod = self.producer(g, sub.input[1])
        if (
            mod is None
            or mod.op_type != "Mod"
            or mod.input[0] != sub.input[0]
            or attribute_value(mod, "fmod")
            or _int_scalar(g, mod.input[1]) != c
        ):
            return None
        t = sub.input[0]
        s, k, add_t = self._size_plus_constant(g, t)
        if s is None:
            return self.refuse("the numerator is not a size plus a constant")
        like = small_constant(g, node.input[1], 1)
        added = (
            None
            if add_t is None
            else small_constant(g, add_t.input[0] if add_t.input[1] == s else add_t.input[1], 1)
        )
        assert like is not None  # _int_scalar accepted the divisor
        if added is not None and added.ndim > max(like.ndim, g.get_rank(s) or 0):
            return self.refuse("the constant added to the size broadcasts it")
        if any(self.n_consumers(g, o) != 1 for o in (mod.output[0], sub.output[0])):
            return self.refuse("an intermediate result is used elsewhere")
        m = -(k // c) if k < 0 else 0  # ceil(-k / c): the numerator t + m c is >= 0
        nodes, outputs = [mod, sub, node], None
        after = self._consumer(g, node.output[0])
        if m and after is not None and after.op_type == "Add" and after.domain == "":
            other = after.input[1] if after.input[0] == node.output[0] else after.input[0]
            shape = g.get_shape(node.output[0])
            if (
                _int_scalar(g, other) == m
                and shape is not None
                and (g.get_shape(after.output[0]) == shape)
            ):
                nodes.append(after)
                outputs, m = [after.output[0]], 0
        if k < 0 and add_t is not None and self.n_consumers(g, t) == 2:
            nodes.append(add_t)  # t = s + k is only read by the division
        return Match(
            self, nodes, outputs=outputs, bound=dict(s=s, k=k, t=t, m=m, c=node.input[1], like=like)
        )

    def _size_plus_constant(self, g: GraphBuilder, t):
        """(s, k, node computing t) with t = s + k, s a size; (None, 0, None) otherwise."""
        if is_nonnegative(g, t):
            return t, 0, None
        node = self.producer(g, t)
        if node is None or node.domain != "" or node.op_type not in ("Add", "Sub"):
            return None, 0, None
        for si, ki in ((0, 1), (1, 0)) if node.op_type == "Add" else ((0, 1),):
            k = _int_scalar(g, node.input[ki])
            if k is not None and is_nonnegative(g, node.input[si]):
                return node.input[si], (k if node.op_type == "Add" else -k), node
        return None, 0, None

    def _consumer(self, g: GraphBuilder, name):
        if self.n_consumers(g, name) != 1:
            return None
        users = graph_index(g).consumers.get(name, [])
        return users[0] if len(users) == 1 else None

    def apply(self, op: RewriteOp, match: Match) -> RewriteResult:
        b = match.bound
        c = int(b["like"].reshape(-1)[0])

        def const(v):  # the type and the shape of the divisor: same broadcasting
            return np.full_like(b["like"], v)

        if b["k"] >= 0:
            return op.Div(b["t"], b["c"])
        steps = -(b["k"] // c)
        out = op.Div(op.Add(b["s"], const(b["k"] + steps * c)), b["c"])
        return op.Sub(out, const(b["m"])) if b["m"] else out
