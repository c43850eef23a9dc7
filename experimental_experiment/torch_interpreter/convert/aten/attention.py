"""Scaled dot-product attention and the CPU kernels torch.compile lowers it to.

softmax(q @ k^T * scale + mask) @ v, computed in float32 for float16/bfloat16 inputs
as torch does on CPU. ``dropout_p > 0`` applies a random ONNX Dropout (training mode)
to the probabilities, as torch does whatever the module's mode: models meant for
inference pass ``dropout_p=0`` in eval mode.
"""

from __future__ import annotations

import math

import numpy as np

from ....xbuilder import GraphBuilder
from ....xbuilder.dtypes import i64
from ...errors import UnsupportedOpError
from ..node_context import NodeContext
from ..registry import converter
from ._helpers import BOOL, aten, cast_to, rank_of
from ._nn_helpers import upcast
from .activation import _random_dropout

_LAST = i64([-1])


def _scaled_query(g: GraphBuilder, q, scale):
    if scale is not None:
        return g.op.Mul(q, float(scale))
    e = (g.get_shape(q) or (None,))[-1]
    if isinstance(e, int):
        return g.op.Mul(q, 1.0 / math.sqrt(e))
    e = g.op.Cast(g.op.Shape(q, start=-1), to=g.get_type(q))
    return g.op.Div(q, g.op.Sqrt(e))


def _repeat_kv(g: GraphBuilder, k, q_heads, kv_heads):
    """repeat_interleave of the heads (axis -3) of k or v: Hkv -> Hq (grouped queries)."""
    if not isinstance(q_heads, int) or not isinstance(kv_heads, int):
        raise UnsupportedOpError("enable_gqa needs static numbers of heads", argument="enable_gqa")
    if q_heads == kv_heads:
        return k
    rep = q_heads // kv_heads
    rank = rank_of(g, k)
    k5 = g.op.Unsqueeze(k, i64([rank - 2]))
    k5 = g.op.Expand(k5, i64([1] * (rank - 2) + [rep, 1, 1]))
    shape = g.op.Concat(
        g.op.Shape(k, end=rank - 3), i64([q_heads]), g.op.Shape(k, start=rank - 2), axis=0
    )
    return g.op.Reshape(k5, shape)


def _causal_mask(g: GraphBuilder, q, k):
    """Boolean [L, S] mask, True where key j <= query i (top-left aligned, as torch)."""
    L, S = (g.get_shape(q) or (None, None))[-2], (g.get_shape(k) or (None, None))[-2]
    if isinstance(L, int) and isinstance(S, int):
        return g.make_constant(np.tril(np.ones((L, S), dtype=np.bool_)))

    def arange(x):
        n = g.op.Squeeze(g.op.Shape(x, start=-2, end=-1), i64([0]))
        return g.op.Range(i64(0), n, i64(1))

    rows = g.op.Unsqueeze(arange(q), _LAST)
    return g.op.LessOrEqual(arange(k), rows)


def _attention(
    g: GraphBuilder,
    q,
    k,
    v,
    attn_mask=None,
    is_causal=False,
    scale=None,
    enable_gqa=False,
    dropout_p=0.0,
    dropout_mask=None,
):
    """Returns the scores after masking, the probabilities (after dropout) and the
    attention output (float), and the rows fully masked (bool, None without attn_mask).
    A ``dropout_mask`` (kept where True) replaces the random draw: the probabilities are
    masked, the values scaled by 1 / (1 - p), as ``_scaled_dot_product_attention_math``."""
    q, k, v = upcast(g, q), upcast(g, k), upcast(g, v)
    ct = g.get_type(q)
    if enable_gqa:
        hq, hk = (g.get_shape(q) or (None,) * 3)[-3], (g.get_shape(k) or (None,) * 3)[-3]
        k, v = _repeat_kv(g, k, hq, hk), _repeat_kv(g, v, hq, hk)
    rank = rank_of(g, k)
    kt = g.op.Transpose(k, perm=list(range(rank - 2)) + [rank - 1, rank - 2])
    scores = g.op.MatMul(_scaled_query(g, q, scale), kt)
    minus_inf = cast_to(g, -np.inf, ct)
    if is_causal:
        scores = g.op.Where(_causal_mask(g, q, k), scores, minus_inf)
    if attn_mask is not None:
        if g.get_type(attn_mask) == BOOL:
            scores = g.op.Where(attn_mask, scores, minus_inf)
        else:
            scores = g.op.Add(scores, cast_to(g, attn_mask, ct))
    probs = g.op.Softmax(scores, axis=-1)
    masked = None
    if attn_mask is not None:
        # torch gives 0 (not NaN) to the rows where every key is masked
        masked = g.op.Equal(g.op.ReduceMax(scores, _LAST, keepdims=1), minus_inf)
        probs = g.op.Where(masked, cast_to(g, 0.0, ct), probs)
    if dropout_p and dropout_mask is not None:
        if g.get_type(dropout_mask) != BOOL:
            dropout_mask = g.op.Cast(dropout_mask, to=BOOL)
        probs = g.op.Where(dropout_mask, probs, cast_to(g, 0.0, ct))
        v = g.op.Mul(v, 1.0 / (1.0 - dropout_p))
    elif dropout_p:
        probs = _random_dropout(g, probs, dropout_p)
    return scores, probs, g.op.MatMul(probs, v), masked


@converter(aten.scaled_dot_product_attention.default)
def aten_scaled_dot_product_attention(
    g: GraphBuilder,
    query: str,
    key: str,
    value: str,
    attn_mask: str | None = None,
    dropout_p: float = 0.0,
    is_causal: bool = False,
    *,
    scale: float | None = None,
    enable_gqa: bool = False,
    ctx: NodeContext,
) -> str:
    """scaled_dot_product_attention(Tensor query, Tensor key, Tensor value,
    Tensor? attn_mask=None, float dropout_p=0., bool is_causal=False, *, float? scale=None,
    bool enable_gqa=False) -> Tensor"""
    _, _, out, _ = _attention(
        g, query, key, value, attn_mask, is_causal, scale, enable_gqa, dropout_p
    )
    return cast_to(g, out, ctx.dtype())


@converter(aten._scaled_dot_product_flash_attention_for_cpu.default)
def aten__scaled_dot_product_flash_attention_for_cpu(
    g: GraphBuilder,
    query: str,
    key: str,
    value: str,
    dropout_p: float = 0.0,
    is_causal: bool = False,
    *,
    attn_mask: str | None = None,
    scale: float | None = None,
    ctx: NodeContext,
):
    """_scaled_dot_product_flash_attention_for_cpu(Tensor query, Tensor key, Tensor value,
    float dropout_p=0., bool is_causal=False, *, Tensor? attn_mask=None, float? scale=None)
    -> (Tensor output, Tensor logsumexp)"""
    scores, _, out, masked = _attention(
        g, query, key, value, attn_mask, is_causal, scale, dropout_p=dropout_p
    )
    lse = g.op.ReduceLogSumExp(scores, _LAST, keepdims=1)
    if masked is not None:
        lse = g.op.Where(masked, cast_to(g, 0.0, g.get_type(lse)), lse)
    lse = g.op.Squeeze(lse, _LAST)
    return cast_to(g, out, ctx.dtype(0)), cast_to(g, lse, ctx.dtype(1))


@converter(aten._scaled_dot_product_attention_math.default)
def aten__scaled_dot_product_attention_math(
    g: GraphBuilder,
    query: str,
    key: str,
    value: str,
    attn_mask: str | None = None,
    dropout_p: float = 0.0,
    is_causal: bool = False,
    dropout_mask: str | None = None,
    *,
    scale: float | None = None,
    enable_gqa: bool = False,
    ctx: NodeContext,
):
    """_scaled_dot_product_attention_math(Tensor query, Tensor key, Tensor value,
    Tensor? attn_mask=None, float dropout_p=0., bool is_causal=False,
    Tensor? dropout_mask=None, *, float? scale=None, bool enable_gqa=False)
    -> (Tensor output, Tensor attn_weights)"""
    _, probs, out, _ = _attention(
        g, query, key, value, attn_mask, is_causal, scale, enable_gqa, dropout_p, dropout_mask
    )
    return cast_to(g, out, ctx.dtype(0)), cast_to(g, probs, ctx.dtype(1))


def _masked_rows(g: GraphBuilder, attn_mask, ct):
    """Rows (..., L, 1) where the mask keeps no key (torch returns 0 there, a fused
    softmax over nothing but -inf does not): computed on the mask, not on the scores."""
    if g.get_type(attn_mask) == BOOL:
        kept = g.op.ReduceMax(g.op.Cast(attn_mask, to=ct), _LAST, keepdims=1)
        return g.op.Equal(kept, cast_to(g, 0.0, ct))
    top = g.op.ReduceMax(cast_to(g, attn_mask, ct), _LAST, keepdims=1)
    return g.op.Equal(top, cast_to(g, -np.inf, ct))


@converter(aten.scaled_dot_product_attention.default, min_opset=23)
def aten_scaled_dot_product_attention_23(
    g: GraphBuilder,
    query,
    key,
    value,
    attn_mask=None,
    dropout_p=0.0,
    is_causal=False,
    *,
    scale=None,
    enable_gqa=False,
    ctx: NodeContext,
):
    """scaled_dot_product_attention(...) -> Tensor as one ONNX ``Attention`` (opset 23)
    for 4-D inputs without dropout; a causal flag with a mask, where both could empty a
    row, keeps the decomposed form."""
    ranks = {rank_of(g, x) for x in (query, key, value)}
    if dropout_p or ranks != {4} or (is_causal and attn_mask is not None):
        return aten_scaled_dot_product_attention(
            g,
            query,
            key,
            value,
            attn_mask,
            dropout_p,
            is_causal,
            scale=scale,
            enable_gqa=enable_gqa,
            ctx=ctx,
        )
    q, k, v = upcast(g, query), upcast(g, key), upcast(g, value)
    ct = g.get_type(q)
    inputs = [q, k, v]
    if attn_mask is not None:
        inputs.append(attn_mask if g.get_type(attn_mask) == BOOL else cast_to(g, attn_mask, ct))
    out = g.make_node(
        "Attention",
        inputs,
        is_causal=int(bool(is_causal)),
        scale=None if scale is None else float(scale),
    )
    if attn_mask is not None:
        out = g.op.Where(_masked_rows(g, attn_mask, ct), cast_to(g, 0.0, ct), out)
    return cast_to(g, out, ctx.dtype())
