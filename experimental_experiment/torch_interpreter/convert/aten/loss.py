"""Losses: mse_loss, nll_loss (what cross_entropy becomes after log_softmax).

``reduction`` is an int: 0 none, 1 mean, 2 sum. Half precision inputs are computed
in float32 then cast back. Their backward ops are in ``backward.py``.
"""

from __future__ import annotations

from ....xbuilder import GraphBuilder
from ....xbuilder.dtypes import i64
from ..node_context import NodeContext
from ..registry import converter
from ._helpers import INT64, aten, cast_to
from ._nn_helpers import upcast

_ONE = i64([1])


def reduce_loss(g: GraphBuilder, loss: str, reduction: int) -> str:
    if reduction == 0:
        return loss
    if reduction == 1:
        return g.op.ReduceMean(loss, keepdims=0)
    if reduction == 2:
        return g.op.ReduceSum(loss, keepdims=0)
    raise ValueError(f"unknown reduction={reduction}")


@converter(aten.mse_loss.default)
def aten_mse_loss(
    g: GraphBuilder, x: str, target: str, reduction: int = 1, *, ctx: NodeContext
) -> str:
    """mse_loss(Tensor self, Tensor target, int reduction=Mean) -> Tensor"""
    d = g.op.Sub(upcast(g, x), upcast(g, target))
    return cast_to(g, reduce_loss(g, g.op.Mul(d, d), reduction), ctx.dtype())


def nll_terms(g: GraphBuilder, x, target, weight, ignore_index):
    """Per-element pieces of nll_loss for an input ``[N, C, *d]`` (or ``[C]``):
    ``(x at the target class [N, *d], weight of each element [N, *d], target with the
    ignored positions set to 0 [N, 1, *d], ignored positions [N, *d])``."""
    xf = upcast(g, x)
    if g.get_rank(x) == 1:  # no batch: [C] and a 0-D target
        xf = g.op.Unsqueeze(xf, i64([0]))
        target = g.op.Unsqueeze(target, i64([0]))
    t = cast_to(g, target, INT64)
    ignored = g.op.Equal(t, cast_to(g, ignore_index, INT64))
    safe = g.op.Unsqueeze(g.op.Where(ignored, 0, t), _ONE)
    picked = g.op.Squeeze(g.op.GatherElements(xf, safe, axis=1), _ONE)
    ft = g.get_type(xf)
    w = (
        cast_to(g, 1, ft)
        if weight is None
        else g.op.Gather(upcast(g, weight), g.op.Squeeze(safe, _ONE))
    )
    w = g.op.Where(ignored, cast_to(g, 0, ft), w)  # broadcast to [N, *d]
    return picked, w, safe, ignored


def _nll_loss_forward(
    g: GraphBuilder, x, target, weight, reduction, ignore_index, *, ctx: NodeContext
):
    picked, w, _, _ = nll_terms(g, x, target, weight, ignore_index)
    loss = g.op.Neg(g.op.Mul(picked, w))
    total = g.op.ReduceSum(w, keepdims=0)
    if reduction == 0:
        if g.get_rank(x) > 1:
            out, total = loss, g.op.Mul(total, 0)  # torch leaves total_weight at 0
        else:
            out = g.op.Squeeze(loss, i64([0]))
    elif reduction == 1:
        out = g.op.Div(g.op.ReduceSum(loss, keepdims=0), total)
    else:
        out = g.op.ReduceSum(loss, keepdims=0)
    return cast_to(g, out, ctx.dtype(0)), cast_to(g, total, ctx.dtype(1))


@converter(aten.nll_loss_forward.default)
def aten_nll_loss_forward(
    g: GraphBuilder,
    x: str,
    target: str,
    weight: str | None,
    reduction: int,
    ignore_index: int | str,
    *,
    ctx: NodeContext,
) -> tuple[str, str]:
    """nll_loss_forward(Tensor self, Tensor target, Tensor? weight, int reduction,
    SymInt ignore_index) -> (Tensor output, Tensor total_weight)"""
    return _nll_loss_forward(g, x, target, weight, reduction, ignore_index, ctx=ctx)


@converter(aten.nll_loss2d_forward.default)
def aten_nll_loss2d_forward(
    g: GraphBuilder,
    x: str,
    target: str,
    weight: str | None,
    reduction: int,
    ignore_index: int | str,
    *,
    ctx: NodeContext,
) -> tuple[str, str]:
    """nll_loss2d_forward(Tensor self, Tensor target, Tensor? weight, int reduction,
    SymInt ignore_index) -> (Tensor output, Tensor total_weight)"""
    return _nll_loss_forward(g, x, target, weight, reduction, ignore_index, ctx=ctx)


def _class_weights(g: GraphBuilder, weight, rank: int) -> str | None:
    """``weight`` [C] reshaped to broadcast on axis 1 of a rank ``rank`` input."""
    if weight is None:
        return None
    shape = [1, -1] + [1] * (rank - 2) if rank > 1 else [-1]
    return g.op.Reshape(upcast(g, weight), i64(shape))


@converter(aten.cross_entropy_loss.default)
def aten_cross_entropy_loss(
    g: GraphBuilder,
    x: str,
    target: str,
    weight: str | None = None,
    reduction: int = 1,
    ignore_index: int | str = -100,
    label_smoothing: float = 0.0,
    *,
    ctx: NodeContext,
) -> str:
    """cross_entropy_loss(Tensor self, Tensor target, Tensor? weight=None,
    int reduction=Mean, SymInt ignore_index=-100, float label_smoothing=0.0) -> Tensor"""
    rank = g.get_rank(x)
    axis = 1 if rank > 1 else 0
    logp = g.op.LogSoftmax(upcast(g, x), axis=axis)
    wc = _class_weights(g, weight, rank)
    weighted = logp if wc is None else g.op.Mul(logp, wc)
    n_classes = g.op.Cast(g.op.Shape(x, start=axis, end=axis + 1), to=g.get_type(logp))
    eps = float(label_smoothing)
    if g.get_type(target) != INT64 and g.get_type(target) == g.get_type(x):
        # class probabilities
        t = upcast(g, target)
        if eps:
            t = g.op.Add(g.op.Mul(t, 1 - eps), g.op.Div(cast_to(g, eps, g.get_type(t)), n_classes))
        axes = i64([axis])
        loss = g.op.Neg(g.op.ReduceSum(g.op.Mul(weighted, t), axes, keepdims=0))
        return cast_to(g, reduce_loss(g, loss, reduction), ctx.dtype())
    picked, w, _, ignored = nll_terms(g, logp, target, weight, ignore_index)
    loss = g.op.Neg(g.op.Mul(picked, w))
    total = g.op.ReduceSum(w, keepdims=0)
    if eps:
        # (1 - eps) nll + eps / C * (minus the weighted sum of every class' log-prob)
        lp = logp if rank > 1 else g.op.Unsqueeze(logp, i64([0]))
        wl = lp if wc is None else g.op.Mul(lp, wc)
        smooth = g.op.Neg(g.op.ReduceSum(wl, _ONE, keepdims=0))
        smooth = g.op.Where(ignored, 0.0, smooth)
        loss = g.op.Add(g.op.Mul(loss, 1 - eps), g.op.Div(g.op.Mul(smooth, eps), n_classes))
    if reduction == 1:
        out = g.op.Div(g.op.ReduceSum(loss, keepdims=0), total)
    else:
        out = reduce_loss(g, loss, reduction)
        if rank == 1 and reduction == 0:
            out = g.op.Squeeze(out, i64([0]))
    return cast_to(g, out, ctx.dtype())
