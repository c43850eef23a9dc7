"""RotaryEmbedding (com.microsoft) for the half-rotation form of transformers:
``x * cos + rotate_half(x) * sin`` with ``rotate_half(x) = concat(-x2, x1)``.

onnxruntime's operator takes caches of shape ``(max_position, head_size / 2)`` indexed
by the positions; with ``position_ids`` of shape ``(1,)`` the positions of every batch
are ``position_ids[0] + [0, 1, ..., sequence_length - 1]``. The pattern therefore
applies when ``cos = Cos(Concat(f, f))`` with ``f`` of shape ``(1, seq, head_size / 2)``
(the same positions ``0..seq-1`` for every batch, what transformers computes without a
cache): the caches become ``Cos(f[0])`` and ``Sin(f[0])``.

When ``f`` has the batch dimension of ``x`` (``f`` of shape ``(batch, seq, head_size / 2)``,
what transformers computes from ``position_ids``, with a cache or not), the caches hold
one row per token, ``Cos(Reshape(f, (-1, head_size / 2)))``, and the positions are
``Reshape(Range(0, batch * seq), (batch, seq))``: every token reads its own angles, for
any positions. These nodes are the same for every layer (merged by CSE).
"""

from __future__ import annotations

import numpy as np
from onnx import NodeProto

from ...xbuilder import GraphBuilder
from ...xbuilder.dtypes import i64
from ...xbuilder.graph_utils import constant_ints
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
from ._utils import MS, ORT_FLOATS, is_op
from .attention_mask import dim_expression, same

_INT64_MAX = np.iinfo(np.int64).max


def _consts(g: GraphBuilder, names) -> list[list[int]] | None:
    out = [constant_ints(g, n, None) for n in names]
    known = [v for v in out if v is not None]
    return None if len(known) != len(out) else known


def _half_slice(g: GraphBuilder, node: NodeProto | None, x: str, half: int, first: bool) -> bool:
    """True if node is Slice(x)[..., :half] (first) or Slice(x)[..., half:]."""
    if not is_op(node, "Slice") or node.input[0] != x or len(node.input) < 4:
        return False
    values = _consts(g, node.input[1:])
    if values is None or any(len(v) != 1 for v in values):
        return False
    starts, ends, axes = values[0][0], values[1][0], values[2][0]
    steps = values[3][0] if len(values) > 3 else 1
    rank = g.get_rank(x)
    if rank is None or axes % rank != rank - 1 or steps != 1:
        return False
    if first:
        return starts == 0 and ends == half
    return starts == half and ends >= 2 * half


def _rotate_half(g: GraphBuilder, node: NodeProto | None, x: str, half: int) -> list | None:
    """Nodes of Concat(Neg(x[..., half:]), x[..., :half], axis=-1), None otherwise."""
    if not is_op(node, "Concat") or len(node.input) != 2:
        return None
    rank = g.get_rank(x)
    if rank is None or attribute_value(node, "axis") % rank != rank - 1:
        return None
    neg = Pattern.producer(g, node.input[0])
    if not is_op(neg, "Neg"):
        return None
    s2, s1 = Pattern.producer(g, neg.input[0]), Pattern.producer(g, node.input[1])
    if _half_slice(g, s2, x, half, False) and _half_slice(g, s1, x, half, True):
        return [s1, s2, neg, node]
    return None


def _trig(g: GraphBuilder, name: str, op_type: str) -> tuple[str, str] | None:
    """(f, name) if name is Unsqueeze(op_type(Concat(f, f, axis=-1)), [1])."""
    unsq = Pattern.producer(g, name)
    if not is_op(unsq, "Unsqueeze") or _consts(g, unsq.input[1:2]) != [[1]]:
        return None
    trig = Pattern.producer(g, unsq.input[0])
    if not is_op(trig, op_type):
        return None
    cat = Pattern.producer(g, trig.input[0])
    if not is_op(cat, "Concat") or len(cat.input) != 2 or cat.input[0] != cat.input[1]:
        return None
    f = cat.input[0]
    if g.get_rank(f) != 3 or attribute_value(cat, "axis") % 3 != 2:
        return None
    return f, cat.output[0]


class HalfRotaryToRotaryEmbedding(Pattern):
    """Add(Mul(x, Unsqueeze(Cos(Concat(f, f)), [1])), Mul(Concat(Neg(x2), x1),
    Unsqueeze(Sin(Concat(f, f)), [1]))) -> RotaryEmbedding(x, [0], Cos(f[0]), Sin(f[0]))
    (com.microsoft) for x of shape (batch, heads, seq, head_size) and f of shape
    (1, seq, head_size / 2), or (batch, seq, head_size / 2) with one row of the caches
    per token."""

    anchor = "Add"

    def match(self, g: GraphBuilder, node: NodeProto) -> MatchResult:
        found = [self.producer(g, i) for i in node.input]
        muls = [m for m in found if is_op(m, "Mul")]
        if len(muls) != len(found):
            return None
        for m_cos, m_sin in (muls, muls[::-1]):
            for x, c in (m_cos.input, m_cos.input[::-1]):
                if g.get_rank(x) != 4:
                    continue
                shape = g.get_shape(x)
                d = shape[-1] if shape else None
                if not isinstance(d, int) or d % 2:
                    continue
                for r, s in (m_sin.input, m_sin.input[::-1]):
                    rot = _rotate_half(g, self.producer(g, r), x, d // 2)
                    if rot is None:
                        continue
                    res = self._check(g, node, x, c, s, d)
                    if isinstance(res, str):
                        return self.refuse(res)
                    if res is not None:
                        return Match(self, [*rot, m_cos, m_sin, node], bound=res)
        return None

    def _check(self, g: GraphBuilder, node, x, c, s, d):
        tc, ts = _trig(g, c, "Cos"), _trig(g, s, "Sin")
        if tc is None or ts is None:
            return None
        if tc[1] != ts[1]:
            return "cos and sin do not come from the same angles"
        f = tc[0]
        fs, xs = g.get_shape(f), g.get_shape(x)
        if g.get_type(x) not in ORT_FLOATS or g.get_type(f) != g.get_type(x):
            return "not float32 or float16 or the angles have another type"
        if fs is None or xs is None or fs[2] != d // 2:
            return "the angles are not of shape (1 or batch, seq, head_size / 2)"
        per_token = fs[0] != 1
        if per_token and not same(dim_expression(fs[0]), dim_expression(xs[0])):
            return "the angles have neither one batch nor the batch of the input"
        if fs[1] != xs[2] or xs[2] is None or g.get_shape(node.output[0]) != tuple(xs):
            return "the sequence lengths are not known to be equal"
        return {"x": x, "f": f, "per_token": per_token, "half": d // 2}

    def apply(self, op: RewriteOp, match: Match) -> RewriteResult:
        g, b = op.g, match.bound
        if not b["per_token"]:
            f2 = op.Squeeze(b["f"], i64([0]))
            pos = g.make_constant(i64([0]))
        else:  # one row of the caches per token
            f2 = op.Reshape(b["f"], i64([-1, b["half"]]))
            tokens = op.Shape(b["f"], start=0, end=2)
            n = op.ReduceProd(tokens, keepdims=0)  # batch * seq
            pos = op.Reshape(op.Range(g.make_constant(i64(0)), n, g.make_constant(i64(1))), tokens)
        return op.RotaryEmbedding(b["x"], pos, op.Cos(f2), op.Sin(f2), domain=MS, interleaved=0)


class TransposedRotaryToRotaryEmbedding(Pattern):
    """Reshape(Transpose(RotaryEmbedding(Transpose(Reshape(y, [0, 0, N, D]), [0, 2, 1, 3])),
    [0, 2, 1, 3]), [0, 0, -1]) -> RotaryEmbedding(y) on the 3-D input (batch, seq, N * D):
    the heads are split and transposed only for the rotation (what remains once the
    attention reading (batch, seq, hidden) is fused, see
    :class:`CausalAttentionToGroupQueryAttention`)."""

    def pattern(
        self,
        op: PatternOp,
        y: Var,
        s1: Var,
        pos: Var,
        cos: Var,
        sin: Var,
        interleaved: Var,
        s2: Var,
    ) -> PatternResult:
        t = op.Transpose(op.Reshape(y, s1), perm=[0, 2, 1, 3])
        r = op.RotaryEmbedding(t, pos, cos, sin, domain=MS, interleaved=interleaved)
        return op.Reshape(op.Transpose(r, perm=[0, 2, 1, 3]), s2)

    def check(
        self,
        g: GraphBuilder,
        y: str,
        s1: str,
        pos: str,
        cos: str,
        sin: str,
        interleaved: int | None,
        s2: str,
    ) -> str | None:
        split, merge, sy = constant_ints(g, s1, 8), constant_ints(g, s2, 8), g.get_shape(y)
        if split is None or len(split) != 4 or split[:2] != [0, 0] or min(split[2:]) <= 0:
            return "the heads are not split by a constant shape [0, 0, N, D]"
        if merge not in ([0, 0, -1], [0, 0, split[2] * split[3]]):
            return "the heads are not merged back by [0, 0, -1]"
        if sy is None or len(sy) != 3 or sy[2] != split[2] * split[3]:
            return "the input is not of shape (batch, seq, N * D)"
        return None

    def rewrite(
        self,
        op: RewriteOp,
        y: str,
        s1: str,
        pos: str,
        cos: str,
        sin: str,
        interleaved: int | None,
        s2: str,
    ) -> RewriteResult:
        return op.RotaryEmbedding(y, pos, cos, sin, domain=MS, interleaved=interleaved or 0)
