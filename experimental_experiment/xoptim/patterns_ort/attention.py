"""GroupQueryAttention (com.microsoft) for the attention transformers' sdpa path exports
with a key/value cache::

    K = Concat(past_key, k, axis=2)            # a graph output: the new cache
    V = Concat(past_value, v, axis=2)
    Kr, Vr = repeat_kv(K), repeat_kv(V)        # Unsqueeze, Expand, Reshape (if grouped)
    W = Where(M, FusedMatMul(Q, Kr, transB=1, alpha=scale), -inf)
    P = Softmax(W)                             # or Where(ReduceMax(W) == -inf, 0, Softmax(W))
    Y = MatMul(P, Vr)

becomes ``GroupQueryAttention(Q, k, v, past_key, past_value, seqlens_k, total,
attention_bias=Where(M, 0, -inf), causal=1)`` whose ``present_key`` and
``present_value`` outputs are ``K`` and ``V``.

What the kernel assumes and how it is proven:

* every row of the cache is valid: ``seqlens_k = total - 1`` for every batch, so
  ``present = concat(past, new)`` exactly as the replaced Concat nodes;
* the causal mask is applied by the kernel: the mask ``M`` must be a conjunction one
  operand of which is proven to be ``kv_index <= past + q_index`` built on this
  attention's cache and query lengths (:func:`.attention_mask.prove_causal`); the other
  operands (padding) go through ``attention_bias``, so any padding (left or right) stays
  exact;
* a fully masked row gives 0 in the original graph when it has the guard
  ``Where(ReduceMax(W) == -inf, 0, ...)``: the fused graph keeps the guard on the rows of
  the bias which are fully masked. Without the guard (NaN rows in both graphs), the
  pattern applies unchanged.

The pattern refuses with a reason otherwise (unknown lengths, a mask not proven
causal, a float mask, an unexpected layout).
"""

from __future__ import annotations

import numpy as np
from onnx import NodeProto, TensorProto
from onnx.helper import tensor_dtype_to_np_dtype

from ...xbuilder import GraphBuilder
from ...xbuilder.dtypes import i64
from ...xbuilder.graph_utils import constant_ints
from ..matcher import attribute_value, constant_equals
from ..pattern import Match, MatchResult, Pattern, RewriteOp, RewriteResult
from ._utils import MS, ORT_FLOATS, is_op, swaps_last_two, used_before
from .attention_mask import dim_expression, prove_causal, same, same_dim, shape_pieces


def _is_minus_inf(g: GraphBuilder, name: str) -> bool:
    return constant_equals(g, name, -np.inf)


def _reduce_last(g: GraphBuilder, node) -> bool:
    """ReduceMax over the last axis with keepdims=1."""
    rank = g.get_rank(node.input[0])
    axes = (
        constant_ints(g, node.input[1], 8)
        if len(node.input) > 1 and node.input[1]
        else attribute_value(node, "axes")
    )
    return (
        rank is not None
        and axes is not None
        and len(axes) == 1
        and axes[0] % rank == rank - 1
        and attribute_value(node, "keepdims") in (None, 1)
    )


class CausalAttentionToGroupQueryAttention(Pattern):
    """Where(M, Q K^T * scale, -inf) -> Softmax -> (guard) -> MatMul(., V) with K and V
    the concatenation of a cache and new positions (repeated for grouped heads) ->
    GroupQueryAttention (com.microsoft), see the module docstring for the proof."""

    anchor = "MatMul"

    def match(self, g: GraphBuilder, node: NodeProto) -> MatchResult:
        nodes: list = []
        found = self._probabilities(g, node.input[0], nodes)
        if found is None:
            return None
        mask, scores, guard = found
        qk = self._scores(g, scores, nodes)
        if qk is None:
            return None
        q, k_rep, alpha = qk
        k = self._unrepeat(g, k_rep, nodes)
        v = self._unrepeat(g, node.input[1], nodes)
        if k is None or v is None or k[1] != v[1]:
            return None
        kc, vc = self._cache(g, k[0]), self._cache(g, v[0])
        if kc is None or vc is None:
            return self.refuse("key or value is not Concat(past, new, axis=2)")
        nodes += [kc[2], vc[2], node]
        reason = self._check(g, q, kc, vc, k[1], mask)
        if reason:
            return self.refuse(reason)
        if any(used_before(g, c[2].output[0], node, nodes) for c in (kc, vc)):
            return self.refuse("the new cache is used before the attention")
        shape = g.get_shape(q)
        assert shape is not None  # _check refused unknown shapes
        return Match(
            self,
            nodes,
            outputs=[node.output[0], kc[2].output[0], vc[2].output[0]],
            bound=dict(
                q=q,
                k=kc[1],
                v=vc[1],
                past_k=kc[0],
                past_v=vc[0],
                mask=mask,
                alpha=alpha,
                guard=guard,
                heads=shape[1],
                head_size=shape[3],
                kv_heads=shape[1] // k[1],
            ),
        )

    def _probabilities(self, g: GraphBuilder, name: str, nodes: list):
        """(mask, scores, guard) of Softmax(Where(mask, scores, -inf)), guarded or not."""
        node = self.producer(g, name)
        guard = is_op(node, "Where")
        if guard:
            cond, zero, soft = node.input
            if not constant_equals(g, zero, 0.0):
                return None
            eq = self.producer(g, cond)
            if not is_op(eq, "Equal"):
                return None
            red, minf = eq.input if not _is_minus_inf(g, eq.input[0]) else eq.input[::-1]
            red_node = self.producer(g, red)
            if (
                not _is_minus_inf(g, minf)
                or not is_op(red_node, "ReduceMax")
                or not _reduce_last(g, red_node)
            ):
                return None
            nodes += [red_node, eq, node]
            node = self.producer(g, soft)
        if not is_op(node, "Softmax"):
            return None
        where = self.producer(g, node.input[0])
        rank = g.get_rank(node.input[0])
        if (
            rank != 4
            or (attribute_value(node, "axis", -1) % rank) != 3
            or not is_op(where, "Where")
            or not _is_minus_inf(g, where.input[2])
        ):
            return None
        if guard and red_node.input[0] != where.output[0]:
            return None
        if g.get_type(where.input[0]) != TensorProto.BOOL:
            return None
        nodes += [node, where]
        return where.input[0], where.input[1], guard

    def _scores(self, g: GraphBuilder, name: str, nodes: list):
        """(q, k, scale) of FusedMatMul(q, k, transB=1, alpha) or MatMul(q, Transpose(k))."""
        node = self.producer(g, name)
        if is_op(node, "FusedMatMul", MS):
            attrs = {
                a: attribute_value(node, a) or 0
                for a in ("transA", "transB", "transBatchA", "transBatchB")
            }
            if attrs != {"transA": 0, "transB": 1, "transBatchA": 0, "transBatchB": 0}:
                return None
            nodes.append(node)
            alpha = attribute_value(node, "alpha")
            return node.input[0], node.input[1], 1.0 if alpha is None else float(alpha)
        if is_op(node, "MatMul"):
            tr = self.producer(g, node.input[1])
            if is_op(tr, "Transpose") and swaps_last_two(tr, g.get_rank(tr.input[0])):
                nodes += [tr, node]
                return node.input[0], tr.input[0], 1.0
        return None

    def _unrepeat(self, g: GraphBuilder, name: str, nodes: list):
        """(x, repeat) for Reshape(Expand(Unsqueeze(x, [2]), (., ., r, ., .)), [0, N, -1, D])
        (repeat_kv), (name, 1) when it is something else."""
        resh = self.producer(g, name)
        exp = self.producer(g, resh.input[0]) if is_op(resh, "Reshape") else None
        unsq = self.producer(g, exp.input[0]) if is_op(exp, "Expand") else None
        if (
            not is_op(unsq, "Unsqueeze")
            or exp is None  # not None when unsq is a node
            or resh is None
            or constant_ints(g, unsq.input[1], 4) != [2]
        ):
            return name, 1
        x = unsq.input[0]
        sx, pieces = g.get_shape(x), shape_pieces(g, exp.input[1])
        target = constant_ints(g, resh.input[1], 8)
        if (
            sx is None
            or len(sx) != 4
            or pieces is None
            or len(pieces) != 5
            or target is None
            or len(target) != 4
        ):
            return None
        r = pieces[2].get("") if pieces[2] is not None and len(pieces[2]) == 1 else None
        # every other dimension is kept: 1 (broadcast) or the dimension of x
        kept = [pieces[i] for i in (0, 1, 3, 4)]
        if not r or not all(same(p, {"": 1}) or same_dim(g, x, i, p) for i, p in enumerate(kept)):
            return None
        if (
            not isinstance(sx[1], int)
            or target[:1] != [0]
            or target[1] != sx[1] * r
            or target[2] != -1
            or target[3] != sx[3]
        ):
            return None
        nodes += [unsq, exp, resh]
        return x, r

    def _cache(self, g: GraphBuilder, name: str):
        """(past, new, concat node) of Concat(past, new, axis=2)."""
        node = self.producer(g, name)
        if (
            not is_op(node, "Concat")
            or len(node.input) != 2
            or attribute_value(node, "axis") % 4 != 2
        ):
            return None
        return node.input[0], node.input[1], node

    def _check(self, g: GraphBuilder, q: str, kc, vc, rep: int, mask: str) -> str | None:
        sq, sk, sp = g.get_shape(q), g.get_shape(kc[1]), g.get_shape(kc[0])
        if g.get_type(q) not in ORT_FLOATS or any(
            g.get_type(n) != g.get_type(q) for n in (*kc[:2], *vc[:2])
        ):
            return "not float32 or float16, or different element types"
        if sq is None or sk is None or sp is None or len(sq) != 4 or len(sk) != 4:
            return "unknown shapes of the query or the cache"
        if (
            not all(isinstance(d, int) for d in (sq[1], sq[3], sk[1]))
            or sq[1] != sk[1] * rep
            or sk[3] != sq[3]
        ):
            return "heads or head sizes are unknown or do not match"
        sv = g.get_shape(vc[1])
        if sv is None or sv[1:] != tuple(sk[1:]):
            return "value and key have different shapes"
        shape_m = g.get_shape(mask)
        if g.get_rank(mask) != 4 or (shape_m is not None and shape_m[1] != 1):
            return "the mask is not of shape (batch or 1, 1, seq, total)"
        query = dim_expression(sq[2]) or dim_expression(sk[2])
        return prove_causal(g, mask, dim_expression(sp[2]), query)

    def apply(self, op: RewriteOp, match: Match) -> RewriteResult:
        b = match.bound
        g = op.g
        dtype = g.get_type(b["q"])
        np_dtype = tensor_dtype_to_np_dtype(dtype)
        zero = g.make_constant(np.array(0, dtype=np_dtype))
        minf = g.make_constant(np.array(-np.inf, dtype=np_dtype))

        def bsd(x):  # (batch, heads, seq, head_size) -> (batch, seq, heads * head_size)
            return op.Reshape(op.Transpose(x, perm=[0, 2, 1, 3]), i64([0, 0, -1]))

        bias = op.Where(b["mask"], zero, minf)
        # sizes read on the mask when it is known to have the batch of the query: the
        # nodes are then the same for every layer (merged by CSE)
        sm, sq = g.get_shape(b["mask"]), g.get_shape(b["q"])
        assert sq is not None  # match read the heads on the query's shape
        shared = sm is not None and same(dim_expression(sm[0]), dim_expression(sq[0]))
        total = op.Shape(b["mask"], start=3, end=4)
        batch = op.Shape(b["mask"] if shared else b["q"], start=0, end=1)
        int32 = TensorProto.INT32
        seqlens = op.Cast(op.Expand(op.Sub(total, i64([1])), batch), to=int32)
        # every query row is valid: query_seqlens lifts the kernel's restriction to
        # batch 1 when several tokens follow a cache (the mask has the query length,
        # proven by its causal operand)
        queries = op.Cast(op.Expand(op.Shape(b["mask"], start=2, end=3), batch), to=int32)
        total32 = op.Cast(op.Squeeze(total), to=int32)  # a scalar, as the schema says
        out, present_k, present_v = op.GroupQueryAttention(
            bsd(b["q"]),
            bsd(b["k"]),
            bsd(b["v"]),
            b["past_k"],
            b["past_v"],
            seqlens,
            total32,
            None,
            None,
            None,
            bias,
            None,
            None,
            None,
            None,
            None,
            queries,
            domain=MS,
            outputs=3,
            num_heads=b["heads"],
            kv_num_heads=b["kv_heads"],
            scale=float(b["alpha"]),
            causal=1,
        )
        for name in (out, present_k, present_v):
            g.set_type(name, dtype)
        sq = g.get_shape(b["q"])
        if sq is not None and g.get_shape(out) is None:  # (batch, seq, heads * head_size)
            g.set_shape(out, (sq[0], sq[2], b["heads"] * b["head_size"]))
        if b["guard"]:
            red = (
                op.ReduceMax(bias, i64([-1]), keepdims=1)
                if g.main_opset >= 18
                else op.ReduceMax(bias, axes=[-1], keepdims=1)
            )
            empty = op.Equal(red, minf)  # (batch, 1, seq, 1): fully masked rows
            rows = op.Squeeze(empty, i64([1]))  # (batch, seq, 1)
            out = op.Where(rows, zero, out)
        y = op.Transpose(
            op.Reshape(out, i64([0, 0, b["heads"], b["head_size"]])), perm=[0, 2, 1, 3]
        )
        return [y, present_k, present_v]
