"""Backward operators of normalization, convolution and pooling layers.

They return a tuple with None for the gradients ``output_mask`` does not ask for.
Half precision inputs are computed in float32 then cast back.
"""

from __future__ import annotations

from typing import Sequence

import numpy as np

from ....xbuilder import GraphBuilder
from ....xbuilder.dtypes import i64
from ...errors import UnsupportedOpError
from ..node_context import NodeContext
from ..registry import converter
from ._helpers import aten, axes_tensor, cast_to
from ._nn_helpers import channel_shaped, expand_param, static_ints, upcast


def _back(g: GraphBuilder, y: str, i: int, *, ctx: NodeContext) -> str:
    return cast_to(g, y, ctx.dtype(i))


def _sum(g: GraphBuilder, x: str, axes: list[int]) -> str:
    """ReduceSum over ``axes`` without keeping them (identity when there is none)."""
    if not axes:
        return x
    return g.op.ReduceSum(x, axes_tensor(g, axes), keepdims=0)


def _mean(g: GraphBuilder, x: str, axes: list[int]) -> str:
    return g.op.ReduceMean(x, axes_tensor(g, axes), keepdims=1)


def _normalized_grad(g, gy, x_hat, scale, axes):
    """``scale * (gy - mean(gy) - x_hat * mean(gy * x_hat))`` over ``axes``."""
    centered = g.op.Sub(
        g.op.Sub(gy, _mean(g, gy, axes)), g.op.Mul(x_hat, _mean(g, g.op.Mul(gy, x_hat), axes))
    )
    return g.op.Mul(centered, scale)


@converter(aten.native_layer_norm_backward.default)
def aten_native_layer_norm_backward(
    g: GraphBuilder,
    grad_out: str,
    x: str,
    normalized_shape: Sequence[int | str],
    mean: str,
    rstd: str,
    weight: str | None,
    bias: str | None,
    output_mask: Sequence[bool],
    *,
    ctx: NodeContext,
):
    """native_layer_norm_backward(Tensor grad_out, Tensor input, SymInt[] normalized_shape,
    Tensor mean, Tensor rstd, Tensor? weight, Tensor? bias, bool[3] output_mask)
    -> (Tensor, Tensor, Tensor)"""
    rank = g.get_rank(x)
    axis = rank - len(normalized_shape)
    inner, outer = list(range(axis, rank)), list(range(axis))
    gf, rs = upcast(g, grad_out), upcast(g, rstd)
    x_hat = g.op.Mul(g.op.Sub(upcast(g, x), upcast(g, mean)), rs)
    grads = [None, None, None]
    if output_mask[0]:
        gy = gf if weight is None else g.op.Mul(gf, upcast(g, weight))
        grads[0] = _back(g, _normalized_grad(g, gy, x_hat, rs, inner), 0, ctx=ctx)
    if output_mask[1] and weight is not None:
        grads[1] = _back(g, _sum(g, g.op.Mul(gf, x_hat), outer), 1, ctx=ctx)
    if output_mask[2] and bias is not None:
        grads[2] = _back(g, _sum(g, gf, outer), 2, ctx=ctx)
    return tuple(grads)


@converter(aten.native_batch_norm_backward.default)
def aten_native_batch_norm_backward(
    g: GraphBuilder,
    grad_out: str,
    x: str,
    weight: str | None,
    running_mean: str | None,
    running_var: str | None,
    save_mean: str | None,
    save_invstd: str | None,
    train: bool,
    eps: float,
    output_mask: Sequence[bool],
    *,
    ctx: NodeContext,
) -> tuple[str, str, str]:
    """native_batch_norm_backward(Tensor grad_out, Tensor input, Tensor? weight,
    Tensor? running_mean, Tensor? running_var, Tensor? save_mean, Tensor? save_invstd,
    bool train, float eps, bool[3] output_mask) -> (Tensor, Tensor, Tensor)"""
    rank = g.get_rank(x)
    axes = [0] + list(range(2, rank))
    gf, xf = upcast(g, grad_out), upcast(g, x)
    if train:
        mean, invstd = upcast(g, save_mean), upcast(g, save_invstd)
    else:
        mean = upcast(g, running_mean)
        invstd = g.op.Reciprocal(g.op.Sqrt(g.op.Add(upcast(g, running_var), float(eps))))
    mean, invstd = channel_shaped(g, mean, rank), channel_shaped(g, invstd, rank)
    x_hat = g.op.Mul(g.op.Sub(xf, mean), invstd)
    grads = [None, None, None]
    if output_mask[0]:
        scale = (
            invstd
            if weight is None
            else g.op.Mul(invstd, channel_shaped(g, upcast(g, weight), rank))
        )
        if train:
            grads[0] = _normalized_grad(g, gf, x_hat, scale, axes)
        else:
            grads[0] = g.op.Mul(gf, scale)
        grads[0] = _back(g, grads[0], 0, ctx=ctx)
    if output_mask[1]:
        grads[1] = _back(g, _sum(g, g.op.Mul(gf, x_hat), axes), 1, ctx=ctx)
    if output_mask[2]:
        grads[2] = _back(g, _sum(g, gf, axes), 2, ctx=ctx)
    return tuple(grads)


def _static_dims(g: GraphBuilder, x: str, start: int) -> list[int] | None:
    shape = g.get_shape(x)
    if shape is None or not all(isinstance(d, int) for d in shape[start:]):
        return None
    return list(shape[start:])


def _slice_spatial(g: GraphBuilder, y: str, like: str, spatial: int) -> str:
    """``y`` cut to the spatial dims of ``like`` (both of rank spatial + 2)."""
    axes = np.arange(2, 2 + spatial, dtype=np.int64)
    starts = np.zeros(spatial, dtype=np.int64)
    dims = _static_dims(g, like, 2)
    ends = i64(dims) if dims else g.op.Shape(like, start=2)
    return g.op.Slice(y, starts, ends, axes)


def _conv_input_grad(g, gy, x, w, stride, padding, dilation, groups, spatial):
    """Gradient of Conv(x, w) with respect to x: a transposed convolution."""
    kernel = _static_dims(g, w, 2)
    dims = _static_dims(g, x, 2)
    attrs = dict(strides=stride, pads=padding + padding, dilations=dilation, group=groups)
    if dims is not None and kernel is not None:
        # exact output size: the rows the forward convolution did not reach
        attrs["output_padding"] = [
            (n + 2 * p - d * (k - 1) - 1) % s
            for n, p, d, k, s in zip(dims, padding, dilation, kernel, stride)
        ]
        return g.op.ConvTranspose(gy, w, **attrs)
    if all(s == 1 for s in stride):
        return g.op.ConvTranspose(gy, w, **attrs)
    # dynamic dims: the largest output padding, then cut to the input size
    attrs["output_padding"] = [s - 1 for s in stride]
    return _slice_spatial(g, g.op.ConvTranspose(gy, w, **attrs), x, spatial)


def _swap01(g: GraphBuilder, x: str, rank: int) -> str:
    return g.op.Transpose(x, perm=[1, 0] + list(range(2, rank)))


def _conv_weight_grad(g, gy, x, w, stride, padding, dilation, groups, spatial):
    """Gradient of Conv(x, w) with respect to w: a convolution of x by gy where the
    batch plays the role of the channels (stride and dilation swap)."""
    rank = spatial + 2
    kernel = _static_dims(g, w, 1)
    if kernel is None:
        raise UnsupportedOpError(
            "convolution_backward needs a weight of static shape", argument="weight"
        )
    cin_g = kernel[0]
    if groups == 1:
        xt = _swap01(g, x, rank)  # [Cin, N, *spatial]
    else:
        # [N, Cin, *sp] -> [N, G, Cin/G, *sp] -> [Cin/G, G, N, *sp] -> [Cin/G, G*N, *sp]
        sp = g.op.Shape(x, start=2)
        head = i64([-1, groups, cin_g])
        x5 = g.op.Reshape(x, g.op.Concat(head, sp, axis=0))
        x5 = g.op.Transpose(x5, perm=[2, 1, 0] + list(range(3, rank + 1)))
        xt = g.op.Reshape(x5, g.op.Concat(i64([cin_g, -1]), sp, axis=0))
    gt = _swap01(g, gy, rank)  # [Cout, N, *out_spatial]
    r = g.op.Conv(
        xt, gt, strides=dilation, dilations=stride, pads=padding + padding, group=groups
    )  # [Cin/G, Cout, *k'] with k' >= k
    r = g.op.Slice(
        r, np.zeros(spatial, dtype=np.int64), i64(kernel[1:]), np.arange(2, rank, dtype=np.int64)
    )
    return _swap01(g, r, rank)


@converter(aten.convolution_backward.default)
def aten_convolution_backward(
    g: GraphBuilder,
    grad_output: str,
    x: str,
    weight: str,
    bias_sizes: Sequence[int | str] | None,
    stride: Sequence[int | str],
    padding: Sequence[int | str],
    dilation: Sequence[int | str],
    transposed: bool,
    output_padding: Sequence[int | str],
    groups: int | str,
    output_mask: Sequence[bool],
    *,
    ctx: NodeContext,
):
    """convolution_backward(Tensor grad_output, Tensor input, Tensor weight,
    SymInt[]? bias_sizes, SymInt[] stride, SymInt[] padding, SymInt[] dilation,
    bool transposed, SymInt[] output_padding, SymInt groups, bool[3] output_mask)
    -> (Tensor, Tensor, Tensor)"""
    spatial = g.get_rank(x) - 2
    if spatial < 1:
        raise UnsupportedOpError("convolution_backward expects a batched input", argument="input")
    stride = static_ints(expand_param(stride, spatial, "stride"), "stride")
    padding = static_ints(expand_param(padding, spatial, "padding"), "padding")
    dilation = static_ints(expand_param(dilation, spatial, "dilation"), "dilation")
    groups = static_ints([groups], "groups")[0]
    gy, xf, wf = upcast(g, grad_output), upcast(g, x), upcast(g, weight)
    grads = [None, None, None]
    conv = (stride, padding, dilation, groups, spatial)
    if transposed:
        # y = ConvTranspose(x, w) is the adjoint of Conv(., w): <y, gy> = <x, Conv(gy, w)>,
        # so dx = Conv(gy, w) and dw is the weight gradient of Conv(gy, w) for grad x
        if output_mask[0]:
            grads[0] = _back(
                g,
                g.op.Conv(
                    gy, wf, strides=stride, pads=padding + padding, dilations=dilation, group=groups
                ),
                0,
                ctx=ctx,
            )
        if output_mask[1]:
            grads[1] = _back(g, _conv_weight_grad(g, xf, gy, wf, *conv), 1, ctx=ctx)
    if output_mask[0] and not transposed:
        grads[0] = _back(g, _conv_input_grad(g, gy, xf, wf, *conv), 0, ctx=ctx)
    if output_mask[1] and not transposed:
        grads[1] = _back(g, _conv_weight_grad(g, gy, xf, wf, *conv), 1, ctx=ctx)
    if output_mask[2]:
        grads[2] = _back(g, _sum(g, gy, [0] + list(range(2, spatial + 2))), 2, ctx=ctx)
    return tuple(grads)


def _max_pool_backward(
    g: GraphBuilder, grad_output, x, indices, spatial: int, *, ctx: NodeContext
) -> str:
    """Adds every gradient at the position its indices (flat per plane) point to."""
    lead = g.get_rank(x) - spatial
    flat = i64([0] * lead + [-1])
    gf = upcast(g, grad_output)
    zeros = g.op.Expand(cast_to(g, 0, g.get_type(gf)), g.op.Shape(x))
    scattered = g.op.ScatterElements(
        g.op.Reshape(zeros, flat),
        g.op.Reshape(indices, flat),
        g.op.Reshape(gf, flat),
        axis=lead,
        reduction="add",
    )
    return _back(g, g.op.Reshape(scattered, g.op.Shape(x)), 0, ctx=ctx)


@converter(aten.max_pool2d_with_indices_backward.default)
def aten_max_pool2d_with_indices_backward(
    g: GraphBuilder,
    grad_output: str,
    x: str,
    kernel_size: int | Sequence[int],
    stride: int | Sequence[int],
    padding: int | Sequence[int],
    dilation: int | Sequence[int],
    ceil_mode: bool,
    indices: str,
    *,
    ctx: NodeContext,
) -> str:
    """max_pool2d_with_indices_backward(Tensor grad_output, Tensor self,
    int[2] kernel_size, int[2] stride, int[2] padding, int[2] dilation, bool ceil_mode,
    Tensor indices) -> Tensor"""
    return _max_pool_backward(g, grad_output, x, indices, 2, ctx=ctx)


@converter(aten.max_pool3d_with_indices_backward.default)
def aten_max_pool3d_with_indices_backward(
    g: GraphBuilder,
    grad_output: str,
    x: str,
    kernel_size: int | Sequence[int],
    stride: int | Sequence[int],
    padding: int | Sequence[int],
    dilation: int | Sequence[int],
    ceil_mode: bool,
    indices: str,
    *,
    ctx: NodeContext,
) -> str:
    """max_pool3d_with_indices_backward(Tensor grad_output, Tensor self,
    int[3] kernel_size, int[3] stride, int[3] padding, int[3] dilation, bool ceil_mode,
    Tensor indices) -> Tensor"""
    return _max_pool_backward(g, grad_output, x, indices, 3, ctx=ctx)


def _ones_like_spatial(g: GraphBuilder, x: str, spatial: int, elem_type: int):
    """Ones of shape ``[1, 1, *(spatial dims of x)]``."""
    dims = g.op.Shape(x, start=-spatial)
    shape = g.op.Concat(i64([1, 1]), dims, axis=0)
    return g.op.Expand(cast_to(g, 1, elem_type), shape)


def _avg_pool_backward(
    g: GraphBuilder,
    grad_output,
    x,
    kernel_size,
    stride,
    padding,
    ceil_mode,
    count_include_pad,
    divisor_override,
    spatial: int,
    *,
    ctx: NodeContext,
) -> str:
    """Spreads gradients / divisor over their windows (ConvTranspose by ones)."""
    k = static_ints(expand_param(kernel_size, spatial, "kernel_size"), "kernel_size")
    s = static_ints(expand_param(stride, spatial, "stride"), "stride") if stride else k
    p = static_ints(expand_param(padding, spatial, "padding"), "padding")
    gf = upcast(g, grad_output)
    t = g.get_type(gf)
    kernel = cast_to(g, np.ones([1, 1, *k]), t)
    out_dims = g.op.Shape(gf, start=-spatial)
    axes = np.arange(2, 2 + spatial, dtype=np.int64)
    zeros = np.zeros(spatial, dtype=np.int64)
    if divisor_override:
        scaled = g.op.Div(gf, float(divisor_override))
    else:
        # divisor of every window: ones counted by a convolution, cut to the output
        # size (the largest end padding covers ceil_mode's last window)
        ones = _ones_like_spatial(g, x, spatial, t)
        if count_include_pad:
            # the padding counts, not what ceil_mode adds beyond it
            if any(p):
                ones = g.op.Pad(ones, i64([0, 0, *p, 0, 0, *p]), cast_to(g, 1, t))
            pads = [0] * spatial + [si - 1 for si in s]
        else:
            pads = p + [pi + si - 1 for pi, si in zip(p, s)]
        counts = g.op.Conv(ones, kernel, strides=s, pads=pads)
        counts = g.op.Slice(counts, zeros, out_dims, axes)
        scaled = g.op.Div(gf, counts)
    planes = g.op.Reshape(scaled, g.op.Concat(i64([-1, 1]), out_dims, axis=0))
    full = g.op.ConvTranspose(planes, kernel, strides=s)  # [NC, 1, (o - 1) * s + k]
    extra = [max(0, si - 1 - pi) for si, pi in zip(s, p)]
    if any(extra):
        full = g.op.Pad(full, i64([0] * (2 + spatial) + [0, 0] + extra))
    begin = i64(p)
    end = g.op.Add(g.op.Shape(x, start=-spatial), begin)
    cut = g.op.Slice(full, begin, end, axes)
    return _back(g, g.op.Reshape(cut, g.op.Shape(x)), 0, ctx=ctx)


@converter(aten.avg_pool2d_backward.default)
def aten_avg_pool2d_backward(
    g: GraphBuilder,
    grad_output: str,
    x: str,
    kernel_size: int | Sequence[int],
    stride: int | Sequence[int],
    padding: int | Sequence[int],
    ceil_mode: bool,
    count_include_pad: bool,
    divisor_override: int | None = None,
    *,
    ctx: NodeContext,
) -> str:
    """avg_pool2d_backward(Tensor grad_output, Tensor self, int[2] kernel_size,
    int[2] stride, int[2] padding, bool ceil_mode, bool count_include_pad,
    int? divisor_override) -> Tensor"""
    return _avg_pool_backward(
        g,
        grad_output,
        x,
        kernel_size,
        stride,
        padding,
        ceil_mode,
        count_include_pad,
        divisor_override,
        2,
        ctx=ctx,
    )


@converter(aten.avg_pool3d_backward.default)
def aten_avg_pool3d_backward(
    g: GraphBuilder,
    grad_output: str,
    x: str,
    kernel_size: int | Sequence[int],
    stride: int | Sequence[int],
    padding: int | Sequence[int],
    ceil_mode: bool,
    count_include_pad: bool,
    divisor_override: int | None = None,
    *,
    ctx: NodeContext,
) -> str:
    """avg_pool3d_backward(Tensor grad_output, Tensor self, int[3] kernel_size,
    int[3] stride, int[3] padding, bool ceil_mode, bool count_include_pad,
    int? divisor_override) -> Tensor"""
    return _avg_pool_backward(
        g,
        grad_output,
        x,
        kernel_size,
        stride,
        padding,
        ceil_mode,
        count_include_pad,
        divisor_override,
        3,
        ctx=ctx,
    )
