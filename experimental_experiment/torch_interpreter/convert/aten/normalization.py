"""Normalizations: layer, rms, group, instance and batch norm (eval and batch statistics).

Statistics are computed in float32 for float16/bfloat16 inputs, as torch does.
"""

from __future__ import annotations

from typing import Sequence

import numpy as np
from onnx import TensorProto, helper

from ....xbuilder import GraphBuilder
from ....xbuilder.dtypes import i64
from ...errors import UnsupportedOpError
from ..node_context import NodeContext
from ..registry import converter
from ._helpers import aten, cast_to, rank_of
from ._nn_helpers import FLOAT, channel_shaped, compute_type, dim, dims_tensor, upcast

_FINFO_EPS = {
    FLOAT: float(np.finfo(np.float32).eps),
    TensorProto.DOUBLE: float(np.finfo(np.float64).eps),
}


def _filled(g: GraphBuilder, dims, elem_type: int, value: float) -> str:
    """A tensor of shape ``dims`` (ints or 1-D int64 names) filled with ``value``."""
    from ....xbuilder.dtypes import onnx_to_np_dtype

    if all(isinstance(d, int) for d in dims):
        return g.make_constant(np.full(tuple(dims), value, dtype=onnx_to_np_dtype(elem_type)))
    fill = helper.make_tensor("value", elem_type, [1], [value])
    return g.op.ConstantOfShape(dims_tensor(g, dims), value=fill)


def _empty(g: GraphBuilder, i: int, *, ctx: NodeContext) -> str:
    """The empty tensor torch returns for save_mean / save_rstd in eval mode."""
    from ....xbuilder.dtypes import onnx_to_np_dtype

    return g.make_constant(np.zeros((0,), dtype=onnx_to_np_dtype(ctx.dtype(i))))


# layer norm and rms norm


def _statistics(g: GraphBuilder, xf, axes, eps):
    """Centered input, mean, rstd and biased variance of ``xf`` over ``axes`` (kept)."""
    axes = i64(axes)
    mean = g.op.ReduceMean(xf, axes, keepdims=1)
    d = g.op.Sub(xf, mean)
    var = g.op.ReduceMean(g.op.Mul(d, d), axes, keepdims=1)
    rstd = g.op.Reciprocal(g.op.Sqrt(g.op.Add(var, float(eps))))
    return d, mean, rstd, var


def _affine(g: GraphBuilder, y, weight, bias, rank: int | None = None):
    """y * weight + bias, per channel (axis 1) when ``rank`` is given, else trailing."""
    ct = g.get_type(y)
    for v, op in ((weight, "Mul"), (bias, "Add")):
        if v:
            v = cast_to(g, v, ct)
            y = getattr(g.op, op)(y, v if rank is None else channel_shaped(g, v, rank))
    return y


def _normalize(g: GraphBuilder, xf, axes, weight, bias, eps):
    """(x - mean) * rstd * weight + bias over ``axes``, in the type of ``xf``;
    returns output, mean and rstd (reduced axes kept)."""
    d, mean, rstd, _ = _statistics(g, xf, axes, eps)
    return _affine(g, g.op.Mul(d, rstd), weight, bias), mean, rstd


def _layer_norm(g: GraphBuilder, x, normalized_shape, weight, bias, eps):
    t = g.get_type(x)
    n = len(normalized_shape)
    rank = rank_of(g, x)
    if compute_type(g, x) != FLOAT:  # ONNX LayerNormalization computes in float32 at best
        return _normalize(g, x, list(range(rank - n, rank)), weight, bias, eps)
    norm_dims = [dim(g, x, a) for a in range(rank - n, rank)]
    scale = cast_to(g, weight, t) if weight else _filled(g, norm_dims, t, 1.0)
    b = cast_to(g, bias, t) if bias else None
    return g.op.LayerNormalization(
        x, scale, b, axis=-n, epsilon=float(eps), stash_type=compute_type(g, x), outputs=3
    )


@converter(aten.layer_norm.default)
def aten_layer_norm(
    g: GraphBuilder,
    x: str,
    normalized_shape: Sequence[int | str],
    weight: str | None = None,
    bias: str | None = None,
    eps: float = 1e-5,
    cudnn_enable: bool = True,
) -> str:
    """layer_norm(Tensor input, SymInt[] normalized_shape, Tensor? weight=None,
    Tensor? bias=None, float eps=1e-05, bool cudnn_enable=True) -> Tensor"""
    y, _, _ = _layer_norm(g, x, normalized_shape, weight, bias, eps)
    return y


@converter(aten.native_layer_norm.default)
def aten_native_layer_norm(
    g: GraphBuilder,
    x: str,
    normalized_shape: Sequence[int | str],
    weight: str | None,
    bias: str | None,
    eps: float,
    *,
    ctx: NodeContext,
) -> tuple[str, str, str]:
    """native_layer_norm(Tensor input, SymInt[] normalized_shape, Tensor? weight,
    Tensor? bias, float eps) -> (Tensor, Tensor mean, Tensor rstd)"""
    y, mean, rstd = _layer_norm(g, x, normalized_shape, weight, bias, eps)
    return y, cast_to(g, mean, ctx.dtype(1)), cast_to(g, rstd, ctx.dtype(2))


@converter(aten.rms_norm.default)
def aten_rms_norm(
    g: GraphBuilder,
    x: str,
    normalized_shape: Sequence[int | str],
    weight: str | None = None,
    eps: float | None = None,
    *,
    ctx: NodeContext,
):
    """rms_norm(Tensor input, SymInt[] normalized_shape, Tensor? weight=None,
    float? eps=None) -> Tensor: x * rsqrt(mean(x^2) + eps) * weight in float32"""
    xf = upcast(g, x)
    ct = g.get_type(xf)
    if eps is None:
        eps = _FINFO_EPS.get(ct, _FINFO_EPS[FLOAT])
    rank = rank_of(g, x)
    axes = np.arange(rank - len(normalized_shape), rank, dtype=np.int64)
    ms = g.op.ReduceMean(g.op.Mul(xf, xf), axes, keepdims=1)
    y = g.op.Mul(xf, g.op.Reciprocal(g.op.Sqrt(g.op.Add(ms, float(eps)))))
    if weight:
        y = g.op.Mul(y, cast_to(g, weight, ct))
    return cast_to(g, y, ctx.dtype())


@converter(aten.rms_norm.default, min_opset=23)
def aten_rms_norm_23(
    g: GraphBuilder,
    x: str,
    normalized_shape: Sequence[int | str],
    weight: str | None = None,
    eps: float | None = None,
    *,
    ctx: NodeContext,
) -> str:
    """rms_norm(Tensor input, SymInt[] normalized_shape, Tensor? weight=None,
    float? eps=None) -> Tensor (ONNX RMSNormalization, opset 23)"""
    if compute_type(g, x) != FLOAT:  # computes in float32 at best
        return aten_rms_norm(g, x, normalized_shape, weight, eps, ctx=ctx)
    t = g.get_type(x)
    n = len(normalized_shape)
    rank = rank_of(g, x)
    scale = (
        cast_to(g, weight, t)
        if weight
        else _filled(g, [dim(g, x, a) for a in range(rank - n, rank)], t, 1.0)
    )
    eps = _FINFO_EPS[FLOAT] if eps is None else float(eps)
    y = g.op.RMSNormalization(x, scale, axis=-n, epsilon=eps, stash_type=FLOAT)
    return cast_to(g, y, ctx.dtype())


# group norm and instance norm: statistics over groups of channels


def _grouped_norm(g: GraphBuilder, x, groups, weight, bias, eps):
    """Normalizes ``x`` over (channels of a group, spatial dims).

    :param groups: an int (number of groups) or None (one group per channel)
    :return: output, mean [N, G], rstd [N, G] (compute type)
    """
    rank = rank_of(g, x)
    target = [0, 0, -1] if groups is None else [0, int(groups), -1]
    r = g.op.Reshape(upcast(g, x), i64(target))
    d, mean, rstd, _ = _statistics(g, r, [2], eps)
    y = _affine(g, g.op.Reshape(g.op.Mul(d, rstd), g.op.Shape(x)), weight, bias, rank)
    last = i64([2])
    return y, g.op.Squeeze(mean, last), g.op.Squeeze(rstd, last)


def _instance_normalized(g: GraphBuilder, x, groups, weight, bias, eps):
    """The output of :func:`_grouped_norm` alone, in one InstanceNormalization kernel
    (its input reshaped to [N, groups, -1]; unit scale and zero bias per group)."""
    xf = upcast(g, x)
    ct = g.get_type(xf)
    rank = rank_of(g, x)
    if groups is None and rank < 3:
        return _grouped_norm(g, x, groups, weight, bias, eps)[0]
    n = [dim(g, x, 1)] if groups is None else [int(groups)]
    r = xf if groups is None else g.op.Reshape(xf, i64([0, int(groups), -1]))
    y = g.op.InstanceNormalization(
        r, _filled(g, n, ct, 1.0), _filled(g, n, ct, 0.0), epsilon=float(eps)
    )
    if groups is not None:
        y = g.op.Reshape(y, g.op.Shape(xf))
    return _affine(g, y, weight, bias, rank)


@converter(aten.group_norm.default)
def aten_group_norm(
    g: GraphBuilder,
    x: str,
    num_groups: int,
    weight: str | None = None,
    bias: str | None = None,
    eps: float = 1e-5,
    cudnn_enabled: bool = True,
    *,
    ctx: NodeContext,
) -> str:
    """group_norm(Tensor input, int num_groups, Tensor? weight=None, Tensor? bias=None,
    float eps=1e-05, bool cudnn_enabled=True) -> Tensor"""
    y = _instance_normalized(g, x, num_groups, weight, bias, eps)
    return cast_to(g, y, ctx.dtype())


@converter(aten.native_group_norm.default)
def aten_native_group_norm(
    g: GraphBuilder,
    x: str,
    weight: str | None,
    bias: str | None,
    N: int | str,
    C: int | str,
    HxW: int | str,
    group: int,
    eps: float,
    *,
    ctx: NodeContext,
) -> tuple[str, str, str]:
    """native_group_norm(Tensor input, Tensor? weight, Tensor? bias, SymInt N, SymInt C,
    SymInt HxW, int group, float eps) -> (Tensor, Tensor mean, Tensor rstd)"""
    y, mean, rstd = _grouped_norm(g, x, group, weight, bias, eps)
    return tuple(cast_to(g, v, ctx.dtype(i)) for i, v in enumerate((y, mean, rstd)))


@converter(aten.instance_norm.default)
def aten_instance_norm(
    g: GraphBuilder,
    x: str,
    weight: str | None,
    bias: str | None,
    running_mean: str | None,
    running_var: str | None,
    use_input_stats: bool,
    momentum: float,
    eps: float,
    cudnn_enabled: bool,
    *,
    ctx: NodeContext,
) -> str:
    """instance_norm(Tensor input, Tensor? weight, Tensor? bias, Tensor? running_mean,
    Tensor? running_var, bool use_input_stats, float momentum, float eps,
    bool cudnn_enabled) -> Tensor"""
    if use_input_stats:
        y = _instance_normalized(g, x, None, weight, bias, eps)
        return cast_to(g, y, ctx.dtype())
    return _bn_eval(g, x, weight, bias, running_mean, running_var, eps, ctx=ctx)


# batch norm


def _channel_params(g: GraphBuilder, x, weight, bias, ct):
    channels = [dim(g, x, 1)]
    scale = cast_to(g, weight, ct) if weight else _filled(g, channels, ct, 1.0)
    shift = cast_to(g, bias, ct) if bias else _filled(g, channels, ct, 0.0)
    return scale, shift


def _bn_eval(g: GraphBuilder, x, weight, bias, running_mean, running_var, eps, *, ctx: NodeContext):
    """Inference batch norm with running statistics: ONNX BatchNormalization."""
    if running_mean is None or running_var is None:
        raise UnsupportedOpError(
            "batch_norm in eval mode without running statistics "
            "(track_running_stats=False) should use training=True"
        )
    xf = upcast(g, x)
    ct = g.get_type(xf)
    scale, shift = _channel_params(g, x, weight, bias, ct)
    y = g.op.BatchNormalization(
        xf,
        scale,
        shift,
        cast_to(g, running_mean, ct),
        cast_to(g, running_var, ct),
        epsilon=float(eps),
    )
    return cast_to(g, y, ctx.dtype())


def _bn_train(g: GraphBuilder, x, weight, bias, eps):
    """Batch norm with the statistics of the batch: output, mean [C], rstd [C], var [C]
    (biased), count (number of reduced elements, compute type scalar)."""
    xf = upcast(g, x)
    ct = g.get_type(xf)
    rank = rank_of(g, x)
    d, mean, rstd, var = _statistics(g, xf, [0] + list(range(2, rank)), eps)
    y = _affine(g, g.op.Mul(d, rstd), weight, bias, rank)
    flat = i64([-1])
    channels = g.op.Cast(g.op.Shape(x, start=1, end=2), to=ct)
    count = g.op.Div(g.op.Cast(g.op.Size(x), to=ct), channels)
    return (y, g.op.Reshape(mean, flat), g.op.Reshape(rstd, flat), g.op.Reshape(var, flat), count)


def _updated_stats(g: GraphBuilder, running, batch, momentum):
    """(1 - momentum) * running + momentum * batch in the running statistics' type."""
    batch = cast_to(g, batch, g.get_type(running))
    m = float(momentum)
    return g.op.Add(g.op.Mul(running, 1.0 - m), g.op.Mul(batch, m))


def _batch_norm(
    g: GraphBuilder,
    x,
    weight,
    bias,
    running_mean,
    running_var,
    training,
    momentum,
    eps,
    n_outputs,
    *,
    ctx: NodeContext,
):
    if not training:
        y = _bn_eval(g, x, weight, bias, running_mean, running_var, eps, ctx=ctx)
        if n_outputs == 1:
            return y
        extra = [_empty(g, 1, ctx=ctx), _empty(g, 2, ctx=ctx)]
        if n_outputs == 5:
            extra += [g.op.Identity(running_mean), g.op.Identity(running_var)]
        return (y, *extra)
    y, mean, rstd, var, count = _bn_train(g, x, weight, bias, eps)
    outs = [cast_to(g, y, ctx.dtype())]
    if n_outputs > 1:
        outs += [cast_to(g, mean, ctx.dtype(1)), cast_to(g, rstd, ctx.dtype(2))]
    if n_outputs == 5:
        unbiased = g.op.Mul(var, g.op.Div(count, g.op.Sub(count, 1.0)))
        outs += [
            _updated_stats(g, running_mean, mean, momentum),
            _updated_stats(g, running_var, unbiased, momentum),
        ]
    return outs[0] if n_outputs == 1 else tuple(outs)


@converter(aten.batch_norm.default)
def aten_batch_norm(
    g: GraphBuilder,
    x: str,
    weight: str | None,
    bias: str | None,
    running_mean: str | None,
    running_var: str | None,
    training: bool,
    momentum: float,
    eps: float,
    cudnn_enabled: bool,
    *,
    ctx: NodeContext,
):
    """batch_norm(Tensor input, Tensor? weight, Tensor? bias, Tensor? running_mean,
    Tensor? running_var, bool training, float momentum, float eps, bool cudnn_enabled)
    -> Tensor (training=True: batch statistics, running statistics not updated)"""
    return _batch_norm(
        g, x, weight, bias, running_mean, running_var, training, momentum, eps, 1, ctx=ctx
    )


@converter(aten.native_batch_norm.default, aten._native_batch_norm_legit.default)
def aten_native_batch_norm(
    g: GraphBuilder,
    x: str,
    weight: str | None,
    bias: str | None,
    running_mean: str | None,
    running_var: str | None,
    training: bool,
    momentum: float,
    eps: float,
    *,
    ctx: NodeContext,
):
    """native_batch_norm(Tensor input, Tensor? weight, Tensor? bias, Tensor? running_mean,
    Tensor? running_var, bool training, float momentum, float eps)
    -> (Tensor, Tensor save_mean, Tensor save_invstd)"""
    return _batch_norm(
        g, x, weight, bias, running_mean, running_var, training, momentum, eps, 3, ctx=ctx
    )


@converter(aten._native_batch_norm_legit_no_training.default)
def aten__native_batch_norm_legit_no_training(
    g: GraphBuilder,
    x: str,
    weight: str | None,
    bias: str | None,
    running_mean: str,
    running_var: str,
    momentum: float,
    eps: float,
    *,
    ctx: NodeContext,
):
    """_native_batch_norm_legit_no_training(Tensor input, Tensor? weight, Tensor? bias,
    Tensor running_mean, Tensor running_var, float momentum, float eps)
    -> (Tensor, Tensor, Tensor)"""
    return _batch_norm(
        g, x, weight, bias, running_mean, running_var, False, momentum, eps, 3, ctx=ctx
    )


@converter(aten._native_batch_norm_legit.no_stats)
def aten__native_batch_norm_legit_no_stats(
    g: GraphBuilder,
    x: str,
    weight: str | None,
    bias: str | None,
    training: bool,
    momentum: float,
    eps: float,
    *,
    ctx: NodeContext,
) -> tuple[str, str, str]:
    """_native_batch_norm_legit.no_stats(Tensor input, Tensor? weight, Tensor? bias,
    bool training, float momentum, float eps) -> (Tensor, Tensor, Tensor)"""
    return _batch_norm(g, x, weight, bias, None, None, True, momentum, eps, 3, ctx=ctx)


@converter(aten._native_batch_norm_legit_functional.default)
def aten__native_batch_norm_legit_functional(
    g: GraphBuilder,
    x: str,
    weight: str | None,
    bias: str | None,
    running_mean: str,
    running_var: str,
    training: bool,
    momentum: float,
    eps: float,
    *,
    ctx: NodeContext,
):
    """_native_batch_norm_legit_functional(Tensor input, Tensor? weight, Tensor? bias,
    Tensor running_mean, Tensor running_var, bool training, float momentum, float eps)
    -> (Tensor, Tensor, Tensor, Tensor running_mean_out, Tensor running_var_out)"""
    return _batch_norm(
        g, x, weight, bias, running_mean, running_var, training, momentum, eps, 5, ctx=ctx
    )
