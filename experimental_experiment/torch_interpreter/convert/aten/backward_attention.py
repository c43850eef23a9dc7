"""Backward of scaled dot-product attention (the CPU flash kernel torch.compile's
autograd produces), computed again from the inputs rather than from ``logsumexp``:

P = softmax(q k^T s + mask), dV = P^T dO, dP = dO V^T, dS = P (dP - rowsum(dP P)),
dQ = dS k s, dK = dS^T q s, with s the scale (1 / sqrt(E) by default).
"""

from __future__ import annotations

from ....xbuilder import GraphBuilder
from ....xbuilder.dtypes import i64
from ...errors import UnsupportedOpError
from ..node_context import NodeContext
from ..registry import converter
from ._helpers import aten, cast_to, rank_of
from ._nn_helpers import upcast
from .attention import _attention, _scaled_query


def _t(g: GraphBuilder, x: str) -> str:
    """Swaps the last two axes."""
    rank = rank_of(g, x)
    return g.op.Transpose(x, perm=list(range(rank - 2)) + [rank - 1, rank - 2])


@converter(aten._scaled_dot_product_flash_attention_for_cpu_backward.default)
def aten__scaled_dot_product_flash_attention_for_cpu_backward(
    g: GraphBuilder,
    grad_out: str,
    query: str,
    key: str,
    value: str,
    out: str,
    logsumexp: str,
    dropout_p: float,
    is_causal: bool,
    *,
    attn_mask: str | None = None,
    scale: float | None = None,
    ctx: NodeContext,
):
    """_scaled_dot_product_flash_attention_for_cpu_backward(Tensor grad_out, Tensor query,
    Tensor key, Tensor value, Tensor out, Tensor logsumexp, float dropout_p, bool is_causal,
    *, Tensor? attn_mask=None, float? scale=None)
    -> (Tensor grad_query, Tensor grad_key, Tensor grad_value)"""
    if dropout_p:
        raise UnsupportedOpError(
            "the backward of attention with dropout_p > 0 needs the forward's random "
            "mask, which the kernel does not return; train with dropout_p=0 or "
            "attn_implementation='eager'",
            argument="dropout_p",
        )
    _, probs, _, _ = _attention(g, query, key, value, attn_mask, is_causal, scale)
    q, k, v, do = (upcast(g, x) for x in (query, key, value, grad_out))
    dv = g.op.MatMul(_t(g, probs), do)
    dp = g.op.MatMul(do, _t(g, v))
    rowsum = g.op.ReduceSum(g.op.Mul(dp, probs), i64([-1]), keepdims=1)
    ds = g.op.Mul(probs, g.op.Sub(dp, rowsum))
    dq = _scaled_query(g, g.op.MatMul(ds, k), scale)
    dk = g.op.MatMul(_t(g, ds), _scaled_query(g, q, scale))
    return tuple(cast_to(g, x, ctx.dtype(i)) for i, x in enumerate((dq, dk, dv)))
