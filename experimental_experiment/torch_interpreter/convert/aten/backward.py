"""Backward operators found in aot_autograd backward graphs: activations, softmax,
dropout, losses (mse, nll), embedding, slice/select.

Each converter writes the derivative of the forward op with ONNX ops. float16 and
bfloat16 inputs are computed in float32 then cast back (what torch does on CPU).
Normalization, convolution and pooling backward ops are in ``backward_nn.py``.
"""

from __future__ import annotations

import math
from typing import Sequence

import torch

from ....xbuilder import GraphBuilder
from ....xbuilder.dtypes import i64
from ..node_context import NodeContext
from ..registry import converter
from ._helpers import INT64, aten, axes_tensor, cast_to, shape_tensor
from ._nn_helpers import upcast
from .loss import nll_terms
from .shape import input_dim


def _back(g: GraphBuilder, y: str, i: int = 0, *, ctx: NodeContext) -> str:
    return cast_to(g, y, ctx.dtype(i))


def _zeros(g: GraphBuilder, shape: str, like: str) -> str:
    """Zeros of ``shape`` (1-D int64 name) with the element type of ``like``."""
    return g.op.Expand(cast_to(g, 0, g.get_type(like)), shape)


@converter(aten.threshold_backward.default)
def aten_threshold_backward(
    g: GraphBuilder, grad_output: str, x: str, threshold: float | str
) -> str:
    """threshold_backward(Tensor grad_output, Tensor self, Scalar threshold) -> Tensor"""
    mask = g.op.LessOrEqual(x, cast_to(g, threshold, g.get_type(x)))
    return g.op.Where(mask, 0, grad_output)


@converter(aten.sigmoid_backward.default)
def aten_sigmoid_backward(
    g: GraphBuilder, grad_output: str, output: str, *, ctx: NodeContext
) -> str:
    """sigmoid_backward(Tensor grad_output, Tensor output) -> Tensor"""
    y = upcast(g, output)
    dy = g.op.Mul(y, g.op.Sub(cast_to(g, 1, g.get_type(y)), y))
    return _back(g, g.op.Mul(upcast(g, grad_output), dy), ctx=ctx)


@converter(aten.tanh_backward.default)
def aten_tanh_backward(g: GraphBuilder, grad_output: str, output: str, *, ctx: NodeContext) -> str:
    """tanh_backward(Tensor grad_output, Tensor output) -> Tensor"""
    y = upcast(g, output)
    dy = g.op.Sub(cast_to(g, 1, g.get_type(y)), g.op.Mul(y, y))
    return _back(g, g.op.Mul(upcast(g, grad_output), dy), ctx=ctx)


@converter(aten.silu_backward.default)
def aten_silu_backward(g: GraphBuilder, grad_output: str, x: str, *, ctx: NodeContext) -> str:
    """silu_backward(Tensor grad_output, Tensor self) -> Tensor"""
    xf = upcast(g, x)
    s = g.op.Sigmoid(xf)
    # d/dx x*s(x) = s * (1 + x * (1 - s))
    dx = g.op.Mul(s, g.op.Add(g.op.Mul(xf, g.op.Sub(1.0, s)), 1.0))
    return _back(g, g.op.Mul(upcast(g, grad_output), dx), ctx=ctx)


@converter(aten.gelu_backward.default)
def aten_gelu_backward(
    g: GraphBuilder, grad_output: str, x: str, *, approximate: str = "none", ctx: NodeContext
) -> str:
    """gelu_backward(Tensor grad_output, Tensor self, *, str approximate='none') -> Tensor"""
    xf = upcast(g, x)
    if approximate == "tanh":
        k = math.sqrt(2.0 / math.pi)
        x2 = g.op.Mul(xf, xf)
        inner = g.op.Mul(g.op.Mul(xf, g.op.Add(g.op.Mul(x2, 0.044715), 1.0)), k)
        t = g.op.Tanh(inner)
        # y = 0.5 x (1 + t): dy = 0.5 (1 + t) + 0.5 x (1 - t^2) k (1 + 3 * 0.044715 x^2)
        left = g.op.Mul(g.op.Add(t, 1.0), 0.5)
        dinner = g.op.Mul(g.op.Add(g.op.Mul(x2, 3 * 0.044715), 1.0), k)
        right = g.op.Mul(g.op.Mul(g.op.Mul(xf, 0.5), g.op.Sub(1.0, g.op.Mul(t, t))), dinner)
        dx = g.op.Add(left, right)
    elif approximate == "none":
        # y = x cdf(x): dy = cdf(x) + x pdf(x)
        cdf = g.op.Mul(g.op.Add(g.op.Erf(g.op.Mul(xf, math.sqrt(0.5))), 1.0), 0.5)
        pdf = g.op.Mul(g.op.Exp(g.op.Mul(g.op.Mul(xf, xf), -0.5)), 1.0 / math.sqrt(2.0 * math.pi))
        dx = g.op.Add(cdf, g.op.Mul(xf, pdf))
    else:
        raise ValueError(f"gelu_backward: unknown approximate={approximate!r}")
    return _back(g, g.op.Mul(upcast(g, grad_output), dx), ctx=ctx)


@converter(aten.hardtanh_backward.default)
def aten_hardtanh_backward(
    g: GraphBuilder, grad_output: str, x: str, min_val: float | str, max_val: float | str
) -> str:
    """hardtanh_backward(Tensor grad_output, Tensor self, Scalar min_val,
    Scalar max_val) -> Tensor"""
    t = g.get_type(x)
    outside = g.op.Or(
        g.op.LessOrEqual(x, cast_to(g, min_val, t)), g.op.GreaterOrEqual(x, cast_to(g, max_val, t))
    )
    return g.op.Where(outside, 0, grad_output)


@converter(aten.leaky_relu_backward.default)
def aten_leaky_relu_backward(
    g: GraphBuilder,
    grad_output: str,
    x: str,
    negative_slope: float | str,
    self_is_result: bool,
    *,
    ctx: NodeContext,
) -> str:
    """leaky_relu_backward(Tensor grad_output, Tensor self, Scalar negative_slope,
    bool self_is_result) -> Tensor"""
    gf = upcast(g, grad_output)
    positive = g.op.Greater(x, cast_to(g, 0, g.get_type(x)))
    return _back(g, g.op.Where(positive, gf, g.op.Mul(gf, float(negative_slope))), ctx=ctx)


@converter(aten.elu_backward.default)
def aten_elu_backward(
    g: GraphBuilder,
    grad_output: str,
    alpha: float | str,
    scale: float | str,
    input_scale: float | str,
    is_result: bool,
    self_or_result: str,
    *,
    ctx: NodeContext,
) -> str:
    """elu_backward(Tensor grad_output, Scalar alpha, Scalar scale, Scalar input_scale,
    bool is_result, Tensor self_or_result) -> Tensor"""
    gf, v = upcast(g, grad_output), upcast(g, self_or_result)
    a, s, i = float(alpha), float(scale), float(input_scale)
    if is_result:
        # for x <= 0, y = s a (exp(i x) - 1): dy/dx = i (y + s a)
        neg = g.op.Mul(g.op.Add(v, s * a), i)
    else:
        neg = g.op.Mul(g.op.Exp(g.op.Mul(v, i)), i * s * a)
    nonpos = g.op.LessOrEqual(v, 0.0)
    return _back(g, g.op.Mul(gf, g.op.Where(nonpos, neg, cast_to(g, s, g.get_type(gf)))), ctx=ctx)


@converter(aten.softplus_backward.default)
def aten_softplus_backward(
    g: GraphBuilder,
    grad_output: str,
    x: str,
    beta: float | str,
    threshold: float | str,
    *,
    ctx: NodeContext,
) -> str:
    """softplus_backward(Tensor grad_output, Tensor self, Scalar beta,
    Scalar threshold) -> Tensor"""
    gf, xf = upcast(g, grad_output), upcast(g, x)
    bx = g.op.Mul(xf, float(beta))
    linear = g.op.Greater(bx, float(threshold))
    return _back(g, g.op.Where(linear, gf, g.op.Mul(gf, g.op.Sigmoid(bx))), ctx=ctx)


@converter(aten.hardsigmoid_backward.default)
def aten_hardsigmoid_backward(
    g: GraphBuilder, grad_output: str, x: str, *, ctx: NodeContext
) -> str:
    """hardsigmoid_backward(Tensor grad_output, Tensor self) -> Tensor"""
    gf, xf = upcast(g, grad_output), upcast(g, x)
    inside = g.op.And(g.op.Greater(xf, -3.0), g.op.Less(xf, 3.0))
    return _back(g, g.op.Where(inside, g.op.Div(gf, 6.0), 0.0), ctx=ctx)


@converter(aten.hardswish_backward.default)
def aten_hardswish_backward(g: GraphBuilder, grad_output: str, x: str, *, ctx: NodeContext) -> str:
    """hardswish_backward(Tensor grad_output, Tensor self) -> Tensor"""
    gf, xf = upcast(g, grad_output), upcast(g, x)
    middle = g.op.Mul(gf, g.op.Add(g.op.Div(xf, 3.0), 0.5))
    inner = g.op.Where(g.op.LessOrEqual(xf, 3.0), middle, gf)
    return _back(g, g.op.Where(g.op.Less(xf, -3.0), 0.0, inner), ctx=ctx)


@converter(aten.mish_backward.default)
def aten_mish_backward(g: GraphBuilder, grad_output: str, x: str, *, ctx: NodeContext) -> str:
    """mish_backward(Tensor grad_output, Tensor self) -> Tensor"""
    gf, xf = upcast(g, grad_output), upcast(g, x)
    t = g.op.Tanh(g.op.Softplus(xf))
    # y = x tanh(softplus(x)): dy = t + x sigmoid(x) (1 - t^2)
    dt = g.op.Mul(g.op.Mul(xf, g.op.Sigmoid(xf)), g.op.Sub(1.0, g.op.Mul(t, t)))
    return _back(g, g.op.Mul(gf, g.op.Add(t, dt)), ctx=ctx)


@converter(aten._softmax_backward_data.default)
def aten__softmax_backward_data(
    g: GraphBuilder,
    grad_output: str,
    output: str,
    dim: int,
    input_dtype: torch.dtype,
    *,
    ctx: NodeContext,
) -> str:
    """_softmax_backward_data(Tensor grad_output, Tensor output, int dim,
    ScalarType input_dtype) -> Tensor"""
    gf, y = upcast(g, grad_output), upcast(g, output)
    dot = g.op.ReduceSum(g.op.Mul(gf, y), axes_tensor(g, dim), keepdims=1)
    return _back(g, g.op.Mul(y, g.op.Sub(gf, dot)), ctx=ctx)


@converter(aten._log_softmax_backward_data.default)
def aten__log_softmax_backward_data(
    g: GraphBuilder,
    grad_output: str,
    output: str,
    dim: int,
    input_dtype: torch.dtype,
    *,
    ctx: NodeContext,
) -> str:
    """_log_softmax_backward_data(Tensor grad_output, Tensor output, int dim,
    ScalarType input_dtype) -> Tensor"""
    gf, y = upcast(g, grad_output), upcast(g, output)
    total = g.op.ReduceSum(gf, axes_tensor(g, dim), keepdims=1)
    return _back(g, g.op.Sub(gf, g.op.Mul(g.op.Exp(y), total)), ctx=ctx)


@converter(aten.native_dropout_backward.default)
def aten_native_dropout_backward(
    g: GraphBuilder, grad_output: str, mask: str, scale: float, *, ctx: NodeContext
) -> str:
    """native_dropout_backward(Tensor grad_output, Tensor mask, float scale) -> Tensor"""
    gf = upcast(g, grad_output)
    kept = g.op.Mul(cast_to(g, mask, g.get_type(gf)), float(scale))
    return _back(g, g.op.Mul(gf, kept), ctx=ctx)


@converter(aten.mse_loss_backward.default)
def aten_mse_loss_backward(
    g: GraphBuilder, grad_output: str, x: str, target: str, reduction: int, *, ctx: NodeContext
) -> str:
    """mse_loss_backward(Tensor grad_output, Tensor self, Tensor target,
    int reduction) -> Tensor"""
    xf, tf, gf = upcast(g, x), upcast(g, target), upcast(g, grad_output)
    d = g.op.Mul(g.op.Mul(g.op.Sub(xf, tf), 2.0), gf)
    if reduction == 1:  # mean
        d = g.op.Div(d, cast_to(g, g.op.Size(x), g.get_type(d)))
    return _back(g, d, ctx=ctx)


def _nll_loss_backward(
    g: GraphBuilder,
    grad_output,
    x,
    target,
    weight,
    reduction,
    ignore_index,
    total_weight,
    *,
    ctx: NodeContext,
):
    _, w, safe, _ = nll_terms(g, x, target, weight, ignore_index)
    gf = upcast(g, grad_output)
    if reduction == 1:
        gf = g.op.Div(gf, upcast(g, total_weight))
    values = g.op.Unsqueeze(g.op.Neg(g.op.Mul(w, gf)), i64([1]))
    xf = upcast(g, x)
    if g.get_rank(x) == 1:
        xf = g.op.Unsqueeze(xf, i64([0]))
    values = g.op.Expand(values, g.op.Shape(safe))  # a 0-D gradient (mean, sum)
    grad = g.op.ScatterElements(_zeros(g, g.op.Shape(xf), xf), safe, values, axis=1)
    if g.get_rank(x) == 1:
        grad = g.op.Squeeze(grad, i64([0]))
    return _back(g, grad, ctx=ctx)


@converter(aten.nll_loss_backward.default)
def aten_nll_loss_backward(
    g: GraphBuilder,
    grad_output: str,
    x: str,
    target: str,
    weight: str | None,
    reduction: int,
    ignore_index: int | str,
    total_weight: str,
    *,
    ctx: NodeContext,
) -> str:
    """nll_loss_backward(Tensor grad_output, Tensor self, Tensor target, Tensor? weight,
    int reduction, SymInt ignore_index, Tensor total_weight) -> Tensor"""
    return _nll_loss_backward(
        g, grad_output, x, target, weight, reduction, ignore_index, total_weight, ctx=ctx
    )


@converter(aten.nll_loss2d_backward.default)
def aten_nll_loss2d_backward(
    g: GraphBuilder,
    grad_output: str,
    x: str,
    target: str,
    weight: str | None,
    reduction: int,
    ignore_index: int | str,
    total_weight: str,
    *,
    ctx: NodeContext,
) -> str:
    """nll_loss2d_backward(Tensor grad_output, Tensor self, Tensor target, Tensor? weight,
    int reduction, SymInt ignore_index, Tensor total_weight) -> Tensor"""
    return _nll_loss_backward(
        g, grad_output, x, target, weight, reduction, ignore_index, total_weight, ctx=ctx
    )


@converter(aten.embedding_dense_backward.default)
def aten_embedding_dense_backward(
    g: GraphBuilder,
    grad_output: str,
    indices: str,
    num_weights: int | str,
    padding_idx: int | str,
    scale_grad_by_freq: bool,
    *,
    ctx: NodeContext,
) -> str:
    """embedding_dense_backward(Tensor grad_output, Tensor indices, SymInt num_weights,
    SymInt padding_idx, bool scale_grad_by_freq) -> Tensor"""
    gf = upcast(g, grad_output)
    dim = g.op.Shape(gf, start=-1)
    updates = g.op.Reshape(gf, g.op.Concat(i64([-1]), dim, axis=0))
    idx = g.op.Reshape(cast_to(g, indices, INT64), i64([-1, 1]))
    if not isinstance(padding_idx, int) or padding_idx >= 0:
        # padding_idx < 0 means no padding (torch normalizes it before this op)
        updates = g.op.Where(g.op.Equal(idx, cast_to(g, padding_idx, INT64)), 0, updates)
    n = shape_tensor(g, [num_weights])
    if scale_grad_by_freq:
        ones = g.op.Expand(cast_to(g, 1, g.get_type(gf)), g.op.Shape(idx, start=0, end=1))
        counts = g.op.ScatterND(_zeros(g, n, gf), idx, ones, reduction="add")
        freq = g.op.Gather(counts, idx)  # [K, 1]
        updates = g.op.Div(updates, freq)
    zeros = _zeros(g, g.op.Concat(n, dim, axis=0), gf)
    return _back(g, g.op.ScatterND(zeros, idx, updates, reduction="add"), ctx=ctx)


def _pads(g: GraphBuilder, rank: int, dim: int, before, after) -> str:
    """Pads input of Pad: zeros except ``before``/``after`` on axis ``dim``."""
    begins = [0] * rank
    ends = [0] * rank
    begins[dim], ends[dim] = before, after
    return shape_tensor(g, begins + ends)


def _normalized_start(g: GraphBuilder, start, size):
    """``start`` clamped into ``[0, size]`` (negative values count from the end)."""
    if start is None:
        return 0
    if isinstance(start, int) and isinstance(size, int):
        start = start + size if start < 0 else start
        return max(0, min(start, size))
    if isinstance(start, int) and start >= 0:
        # a start beyond the size would give an empty gradient slice: Pad then fails,
        # torch would not produce such a graph for a non-empty grad_output
        return start
    s = cast_to(g, start, INT64)
    n = cast_to(g, size, INT64)
    s = g.op.Where(g.op.Less(s, 0), g.op.Add(s, n), s)
    return g.op.Min(g.op.Max(s, 0), n)


def _place(g: GraphBuilder, grad, input_sizes, dim, start, step):
    """Zeros of ``input_sizes`` with ``grad`` written along ``dim`` from ``start``."""
    rank = len(input_sizes)
    dim = dim % rank
    size = input_sizes[dim]
    start = _normalized_start(g, start, size)
    n = input_dim(g, grad, dim)
    if step == 1:
        if all(isinstance(v, int) for v in (start, size, n)):
            after = size - start - n
        else:
            after = g.op.Sub(
                g.op.Sub(shape_tensor(g, [size]), shape_tensor(g, [start])), shape_tensor(g, [n])
            )
        return g.op.Pad(grad, _pads(g, rank, dim, start, after))
    # strided slice: scatter the rows of grad at start, start + step, ...
    first = shape_tensor(g, [start])
    count = shape_tensor(g, [n])
    last = g.op.Add(first, g.op.Mul(count, step))
    positions = g.op.Range(g.op.Squeeze(first), g.op.Squeeze(last), cast_to(g, step, INT64))
    shape = [1] * rank
    shape[dim] = -1
    positions = g.op.Expand(g.op.Reshape(positions, i64(shape)), g.op.Shape(grad))
    zeros = _zeros(g, shape_tensor(g, list(input_sizes)), grad)
    return g.op.ScatterElements(zeros, positions, grad, axis=dim)


@converter(aten.slice_backward.default)
def aten_slice_backward(
    g: GraphBuilder,
    grad_output: str,
    input_sizes: Sequence[int | str],
    dim: int,
    start: int | str,
    end: int | str,
    step: int | str,
) -> str:
    """slice_backward(Tensor grad_output, SymInt[] input_sizes, int dim, SymInt start,
    SymInt end, SymInt step) -> Tensor"""
    # end is implied by the size of grad_output along dim
    return _place(g, grad_output, input_sizes, dim, start, step)


@converter(aten.select_backward.default)
def aten_select_backward(
    g: GraphBuilder, grad_output: str, input_sizes: Sequence[int | str], dim: int, index: int | str
) -> str:
    """select_backward(Tensor grad_output, SymInt[] input_sizes, int dim,
    SymInt index) -> Tensor"""
    dim = dim % len(input_sizes)
    grad = g.op.Unsqueeze(grad_output, i64([dim]))
    return _place(g, grad, input_sizes, dim, index, 1)
