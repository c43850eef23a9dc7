"""Fewer kernels around GroupQueryAttention (com.microsoft): the rotations of the query
and the key done by the attention kernel, the three projections packed in one MatMul.

``RotaryEmbedding(q)``, ``RotaryEmbedding(k)`` -> ``GroupQueryAttention`` becomes
``GroupQueryAttention(q, k, ..., cos, sin, position_ids, do_rotary=1)``. What the kernel
does differently and how it is proven equal:

* while processing a first prompt, the kernel reads the position of the first token of
  every batch only and numbers the next ones consecutively: the positions must be
  consecutive along the sequence. They are proven so when they are
  ``Reshape(Range(start, limit, 1), shape)`` of rank 2 (the per-token caches of
  :class:`HalfRotaryToRotaryEmbedding <.rotary.HalfRotaryToRotaryEmbedding>`);
* the kernel rotates heads whose size is a multiple of 16 only;
* the kernel checks the caches have at least ``total_sequence_length`` rows, which a
  per-token cache (one row per token of the step) has not during decoding: the caches
  are completed by ``total_sequence_length`` rows of zeros no position reads (``Pad``,
  the same nodes for every layer, merged by CSE; padding the angles before Cos and Sin
  would compute them on every padded row).

``MatMul(x, Wq)``, ``MatMul(x, Wk)``, ``MatMul(x, Wv)`` -> ``GroupQueryAttention`` becomes
``GroupQueryAttention(MatMul(x, Concat(Wq, Wk, Wv, axis=1)), None, None, ...)`` (the
packed QKV input), the weights concatenated once, when the graph is optimized, for
constant 2-D weights used by nothing else.
"""

from __future__ import annotations

from types import MappingProxyType

import numpy as np
from onnx import NodeProto, TensorProto

from ...xbuilder import GraphBuilder
from ...xbuilder.dtypes import i64
from ...xbuilder.graph_utils import constant_ints
from ..matcher import attribute_value
from ..pattern import Match, MatchResult, Pattern, RewriteOp, RewriteResult
from ._utils import MS, ORT_FLOATS, is_op

#: attributes of RotaryEmbedding the fused form does not express (default value)
_ROTARY_DEFAULTS = MappingProxyType(
    {
        "num_heads": 0,
        "rotary_embedding_dim": 0,
        "is_packed_batching": 0,
        "scale": 1.0,
    }
)


def _attributes(node) -> dict:
    return {a.name: attribute_value(node, a.name) for a in node.attribute}


def _input(node, i: int) -> str:
    return node.input[i] if len(node.input) > i else ""


def _gqa_call(op, node, inputs: list[str], **changed):
    """A GroupQueryAttention with ``inputs`` and the attributes of ``node`` (some
    changed); the outputs keep the element type of the query."""
    g = op.g
    while inputs and not inputs[-1]:
        inputs = inputs[:-1]
    attrs = dict(_attributes(node), **changed)
    outs = op.GroupQueryAttention(
        *[i or None for i in inputs], domain=MS, outputs=len(node.output), **attrs
    )
    outs = [outs] if isinstance(outs, str) else list(outs)
    for new, old in zip(outs, node.output):
        if g.get_type(old):
            g.set_type(new, g.get_type(old))
        if g.get_shape(old) is not None and g.get_shape(new) is None:
            g.set_shape(new, g.get_shape(old))
    return outs


def consecutive_positions(g: GraphBuilder, name: str) -> bool:
    """True when ``name`` is ``Reshape(Range(start, limit, 1), shape)`` of rank 2: every
    row holds consecutive positions."""
    resh = Pattern.producer(g, name)
    if not is_op(resh, "Reshape") or g.get_rank(name) != 2:
        return False
    rng = Pattern.producer(g, resh.input[0])
    return is_op(rng, "Range") and constant_ints(g, rng.input[2], 1) == [1]


def _total64(g: GraphBuilder, total32: str) -> str | None:
    """The int64 tensor of shape (1,) total_sequence_length is cast from
    (``Cast(Squeeze(total))`` or ``Cast(total)``), None if it is something else."""
    node = Pattern.producer(g, total32)
    if not is_op(node, "Cast"):
        return None
    source = node.input[0]
    squeeze = Pattern.producer(g, source)
    if is_op(squeeze, "Squeeze") and (
        len(squeeze.input) == 1 or constant_ints(g, squeeze.input[1], 1) in ([0], [-1])
    ):
        source = squeeze.input[0]
    if g.get_type(source) == TensorProto.INT64 and g.get_shape(source) == (1,):
        return source
    return None


class RotaryGroupQueryAttentionToGroupQueryAttention(Pattern):
    """GroupQueryAttention(RotaryEmbedding(q, pos, cos, sin), RotaryEmbedding(k, pos,
    cos, sin), v, ...) -> GroupQueryAttention(q, k, v, ..., cos', sin', pos,
    do_rotary=1) with caches completed to ``total_sequence_length`` rows, see the module
    docstring for the proof."""

    anchor = "GroupQueryAttention"
    anchor_domain = MS

    def match(self, g: GraphBuilder, node: NodeProto) -> MatchResult:
        if attribute_value(node, "do_rotary", 0) or any(_input(node, i) for i in (7, 8, 9)):
            return None
        if not _input(node, 1) or not _input(node, 2):
            return None
        rq, rk = self.producer(g, node.input[0]), self.producer(g, node.input[1])
        if not is_op(rq, "RotaryEmbedding", MS) or not is_op(rk, "RotaryEmbedding", MS):
            return None
        if list(rq.input[1:4]) != list(rk.input[1:4]):
            return self.refuse("query and key are rotated with different positions or caches")
        reason = self._check(g, node, rq, rk)
        if reason:
            return self.refuse(reason)
        return Match(
            self,
            [rq, rk, node],
            bound=dict(
                q=rq.input[0],
                k=rk.input[0],
                pos=rq.input[1],
                cos=rq.input[2],
                sin=rq.input[3],
                interleaved=attribute_value(rq, "interleaved", 0),
                total64=_total64(g, node.input[6]),
            ),
        )

    def _check(self, g: GraphBuilder, node, rq, rk) -> str | None:
        for r in (rq, rk):
            if any(attribute_value(r, k, v) != v for k, v in _ROTARY_DEFAULTS.items()):
                return "a rotation with num_heads, rotary_embedding_dim, scale or packing"
            if self.n_consumers(g, r.output[0]) != 1:
                return "a rotated result is used elsewhere"
            if g.get_rank(r.input[0]) != 3:
                return "the rotated input is not of shape (batch, seq, hidden)"
        if attribute_value(rq, "interleaved", 0) != attribute_value(rk, "interleaved", 0):
            return "query and key rotated differently"
        dtype = g.get_type(rq.input[0])
        if dtype not in ORT_FLOATS or g.get_type(rq.input[2]) != dtype:
            return "not float32 or float16, or caches of another type"
        sq, sc = g.get_shape(rq.input[0]), g.get_shape(rq.input[2])
        heads = attribute_value(node, "num_heads")
        if (
            sq is None
            or not isinstance(sq[2], int)
            or not heads
            or sc is None
            or len(sc) != 2
            or not isinstance(sc[1], int)
            or sq[2] != heads * 2 * sc[1]
        ):
            return "the caches do not rotate the whole head (head_size / 2 columns)"
        if (2 * sc[1]) % 16:
            return "the kernel rotates heads whose size is a multiple of 16 only"
        if not consecutive_positions(g, rq.input[1]):
            return "positions not proven consecutive along the sequence"
        return None

    def apply(self, op: RewriteOp, match: Match) -> RewriteResult:
        b = match.bound
        node = match.nodes[-1]
        # pads: total_sequence_length more rows (of zeros) at the end of the first axis
        total = b["total64"] or op.Reshape(op.Cast(node.input[6], to=TensorProto.INT64), i64([1]))
        pads = op.Concat(i64([0, 0]), total, i64([0]), axis=0)
        cos, sin = op.Pad(b["cos"], pads), op.Pad(b["sin"], pads)
        inputs = [b["q"], b["k"], *node.input[2:7], cos, sin, b["pos"], *node.input[10:]]
        return _gqa_call(
            op, node, inputs, do_rotary=1, rotary_interleaved=int(b["interleaved"] or 0)
        )


class MatMulGroupQueryAttentionToPackedGroupQueryAttention(Pattern):
    """GroupQueryAttention(MatMul(x, Wq), MatMul(x, Wk), MatMul(x, Wv), ...) ->
    GroupQueryAttention(MatMul(x, Concat(Wq, Wk, Wv, axis=1)), None, None, ...) for
    constant 2-D weights (concatenated once, here)."""

    anchor = "GroupQueryAttention"
    anchor_domain = MS

    def match(self, g: GraphBuilder, node: NodeProto) -> MatchResult:
        if not _input(node, 1) or not _input(node, 2):
            return None
        found = [self.producer(g, node.input[i]) for i in range(3)]
        mms = [m for m in found if is_op(m, "MatMul")]
        if len(mms) != 3:
            return None
        if len({m.input[0] for m in mms}) != 1:
            return self.refuse("the projections do not read the same input")
        if len({m.output[0] for m in mms}) != 3:
            return self.refuse("query, key and value are the same result")
        reason = self._check(g, mms)
        if reason:
            return self.refuse(reason)
        return Match(
            self, [*mms, node], bound=dict(x=mms[0].input[0], weights=[m.input[1] for m in mms])
        )

    def _check(self, g: GraphBuilder, mms) -> str | None:
        x = mms[0].input[0]
        dtype = g.get_type(x)
        shapes = []
        for m in mms:
            w = m.input[1]
            if not g.is_constant(w) or g.get_rank(w) != 2 or g.get_type(w) != dtype:
                return "a weight is not a constant 2-D tensor of the input's type"
            if self.n_consumers(g, m.output[0]) != 1:
                return "a projection is used elsewhere"
            shapes.append(g.get_shape(w))
        if (
            any(not all(isinstance(d, int) for d in s) for s in shapes)
            or len({s[0] for s in shapes}) != 1
        ):
            return "the weights have unknown or different numbers of rows"
        if (g.get_rank(x) or 0) < 2:
            return "the input is not a matrix or a batch of matrices"
        return None

    def apply(self, op: RewriteOp, match: Match) -> RewriteResult:
        g, b = op.g, match.bound
        node = match.nodes[-1]
        packed = np.concatenate([np.asarray(g.get_constant(w)) for w in b["weights"]], axis=1)
        weight = g.make_initializer(b["weights"][0] + "_qkv", packed)
        qkv = op.MatMul(b["x"], weight)
        return _gqa_call(op, node, [qkv, "", "", *node.input[3:]])
