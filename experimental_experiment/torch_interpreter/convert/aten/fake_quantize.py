"""Converters of the fake-quantize operators (quantization-aware training).

``fake_quantize_*`` computes ``(clamp(round(x / scale + zero_point), quant_min,
quant_max) - zero_point) * scale`` in float; it becomes QuantizeLinear followed by
DequantizeLinear on the smallest integer type holding ``[quant_min, quant_max]``, with an
integer Clip when the range is narrower than the type (the QDQ form onnxruntime fuses).
The ``*_cachemask`` variants also return the mask of the values inside the range.
``fused_moving_avg_obs_fake_quant`` (torchao's QAT observers) is converted when its
observer is off, the deployment case: the statistics are not updated any more.

torch multiplies by ``1 / scale`` where QuantizeLinear divides by ``scale``. A constant
(a weight, its scale and zero point known) is quantized when exporting, with torch's
rounding: its int8 levels go behind a DequantizeLinear, exact even on ties (the extreme
element of a symmetric weight sits on one). A computed tensor goes through
QuantizeLinear: a value within one float rounding of a tie may land on the neighbouring
level, the output then differs from torch by one step ``scale`` on such rare elements.
"""

from __future__ import annotations

import numpy as np
import torch
from onnx import TensorProto

from ....xbuilder import GraphBuilder
from ....xbuilder.dtypes import i64
from ...errors import UnsupportedOpError
from ..node_context import NodeContext
from ..registry import converter
from ._helpers import cast_to
from .quantized import FLOAT, _narrow, _per_tensor, _qtype, _scalar

aten = torch.ops.aten
BOOL = TensorProto.BOOL
# smallest integer types first; their ranges decide which one stores the levels
_STORAGE = (torch.uint8, torch.int8, torch.uint16, torch.int16)


def _storage_dtype(quant_min: int, quant_max: int, op) -> torch.dtype:
    """The smallest integer type whose range holds ``[quant_min, quant_max]``."""
    if quant_min > quant_max:
        raise UnsupportedOpError(
            f"quant_min={quant_min} > quant_max={quant_max}; fix the fake quantizer's "
            "configuration",
            op=op,
            argument="quant_min",
        )
    for dtype in _STORAGE:
        info = torch.iinfo(dtype)
        if info.min <= quant_min and quant_max <= info.max:
            return dtype
    raise UnsupportedOpError(
        f"[quant_min, quant_max]=[{quant_min}, {quant_max}] does not fit in 16 bits, "
        "ONNX QuantizeLinear has no wider integer type; use a 16-bit or narrower range",
        op=op,
        argument="quant_min",
    )


def _zero_point(
    g: GraphBuilder, zero_point, qtype: int, quant_min: int, quant_max: int, per_tensor: bool
) -> str:
    """The zero point as ``qtype``; a float one (learnable fake quantize) is rounded and
    clamped to ``[quant_min, quant_max]`` first, as torch does."""
    if not isinstance(zero_point, str):
        return _scalar(g, int(round(zero_point)), qtype)
    if g.get_type(zero_point) in (
        TensorProto.FLOAT,
        TensorProto.DOUBLE,
        TensorProto.FLOAT16,
        TensorProto.BFLOAT16,
    ):
        zp = cast_to(g, zero_point, FLOAT)
        zero_point = g.op.Clip(
            g.op.Round(zp), _scalar(g, float(quant_min), FLOAT), _scalar(g, float(quant_max), FLOAT)
        )
    return _per_tensor(g, zero_point, qtype) if per_tensor else cast_to(g, zero_point, qtype)


def _value(g: GraphBuilder, v):
    """The value of a python number or a constant, None for a computed tensor."""
    if not isinstance(v, str):
        return np.asarray(v)
    return np.asarray(g.get_constant(v)) if g.is_constant(v) else None


def _quantize_constant(g: GraphBuilder, x, scale, zero_point, quant_min, quant_max, dtype, axis):
    """``(levels, scale, zero point)`` as constants when ``x`` (a weight), ``scale`` and
    ``zero_point`` are known: the levels follow torch's rounding of ``x * (1 / scale)``,
    which QuantizeLinear's division misses on ties (the extreme element of a symmetric
    per-channel weight sits on one), None otherwise."""
    values = [_value(g, v) for v in (x, scale, zero_point)]
    if any(v is None for v in values) or values[0].dtype.kind != "f":
        return None
    w, s, z = values
    s = s.astype(np.float32).reshape(-1)
    z = np.clip(np.rint(z.astype(np.float32)), quant_min, quant_max).reshape(-1)
    if axis is None:
        s, z = s[:1].reshape(()), z[:1].reshape(())
        bs, bz = s, z
    else:
        shape = [1] * w.ndim
        shape[axis % w.ndim] = -1
        bs, bz = s.reshape(shape), z.reshape(shape)
    inv = np.float32(1) / bs
    levels = np.clip(np.rint(w.astype(np.float32) * inv) + bz, quant_min, quant_max)
    np_dtype = {
        torch.uint8: np.uint8,
        torch.int8: np.int8,
        torch.uint16: np.uint16,
        torch.int16: np.int16,
    }[dtype]
    return (
        g.make_initializer("fake_quantized_weight", levels.astype(np_dtype)),
        g.make_constant(s),
        g.make_constant(z.astype(np_dtype)),
    )


def fake_qdq(
    g: GraphBuilder,
    x,
    scale,
    zero_point,
    quant_min: int,
    quant_max: int,
    op,
    axis: int | None = None,
) -> str:
    """QuantizeLinear + DequantizeLinear of ``x`` (cast back to its type)."""
    dtype = _storage_dtype(quant_min, quant_max, op)
    qtype = _qtype(g, dtype, op)
    elem_type = g.get_type(x)
    folded = _quantize_constant(g, x, scale, zero_point, quant_min, quant_max, dtype, axis)
    if folded is not None:  # a weight: int8 levels computed as torch does, DQ kept
        q, scale, zp = folded
        y = (
            g.op.DequantizeLinear(q, scale, zp)
            if axis is None
            else g.op.DequantizeLinear(q, scale, zp, axis=axis % g.get_rank(x))
        )
        return cast_to(g, y, elem_type)
    xf = cast_to(g, x, FLOAT)
    zp = _zero_point(g, zero_point, qtype, quant_min, quant_max, axis is None)
    if axis is None:
        scale = _per_tensor(g, scale, FLOAT)
        q = _narrow(g, g.op.QuantizeLinear(xf, scale, zp), quant_min, quant_max, dtype, qtype)
        y = g.op.DequantizeLinear(q, scale, zp)
    else:
        axis = axis % g.get_rank(x) if g.get_rank(x) else axis
        scale = cast_to(g, scale, FLOAT)
        q = g.op.QuantizeLinear(xf, scale, zp, axis=axis)
        q = _narrow(g, q, quant_min, quant_max, dtype, qtype)
        y = g.op.DequantizeLinear(q, scale, zp, axis=axis)
    return cast_to(g, y, elem_type)


def _mask(g: GraphBuilder, x, scale, zero_point, quant_min, quant_max, axis=None) -> str:
    """True where ``round(x / scale + zero_point)`` lies in ``[quant_min, quant_max]``."""
    xf = cast_to(g, x, FLOAT)
    scale = cast_to(g, scale, FLOAT) if isinstance(scale, str) else _scalar(g, scale, FLOAT)
    zp = (
        cast_to(g, zero_point, FLOAT)
        if isinstance(zero_point, str)
        else _scalar(g, float(zero_point), FLOAT)
    )
    if axis is not None:  # per channel: scale and zero point broadcast along ``axis``
        rank = g.get_rank(x)
        shape = [1] * rank
        shape[axis % rank] = -1
        scale, zp = g.op.Reshape(scale, i64(shape)), g.op.Reshape(zp, i64(shape))
    r = g.op.Round(g.op.Add(g.op.Div(xf, scale), zp))
    return g.op.And(
        g.op.GreaterOrEqual(r, _scalar(g, float(quant_min), FLOAT)),
        g.op.LessOrEqual(r, _scalar(g, float(quant_max), FLOAT)),
    )


@converter(
    aten.fake_quantize_per_tensor_affine.default,
    aten.fake_quantize_per_tensor_affine.tensor_qparams,
)
def fake_quantize_per_tensor_affine(
    g: GraphBuilder, x, scale, zero_point, quant_min, quant_max, *, ctx: NodeContext
):
    """fake_quantize_per_tensor_affine(Tensor self, float scale, int zero_point,
    int quant_min, int quant_max) -> Tensor (scale and zero_point may be tensors)"""
    return fake_qdq(g, x, scale, zero_point, quant_min, quant_max, ctx.node.target)


@converter(aten.fake_quantize_per_tensor_affine_cachemask.default)
def fake_quantize_per_tensor_affine_cachemask(
    g: GraphBuilder,
    x: str,
    scale: float,
    zero_point: int,
    quant_min: int,
    quant_max: int,
    *,
    ctx: NodeContext,
) -> tuple[str, str]:
    """fake_quantize_per_tensor_affine_cachemask(Tensor self, float scale, int zero_point,
    int quant_min, int quant_max) -> (Tensor output, Tensor mask)"""
    return (
        fake_qdq(g, x, scale, zero_point, quant_min, quant_max, ctx.node.target),
        _mask(g, x, scale, zero_point, quant_min, quant_max),
    )


def _known(g: GraphBuilder, flag) -> bool | None:
    """The value of a 0/1 switch tensor (a buffer), None when the graph computes it."""
    if not isinstance(flag, str):
        return bool(flag)
    if not g.is_constant(flag):
        return None
    return bool(np.asarray(g.get_constant(flag)).reshape(-1)[0])


def _enabled(g: GraphBuilder, flag, name: str, op) -> bool:
    """The value of a 0/1 switch tensor, which must be known at export."""
    value = _known(g, flag)
    if value is None:
        raise UnsupportedOpError(
            f"{name} is computed by the graph, its value must be a constant buffer known "
            "when exporting",
            op=op,
            argument=name,
        )
    return value


@converter(aten._fake_quantize_per_tensor_affine_cachemask_tensor_qparams.default)
def fake_quantize_per_tensor_cachemask_tensor_qparams(
    g: GraphBuilder,
    x: str,
    scale: str,
    zero_point: str,
    fake_quant_enabled: str,
    quant_min: int,
    quant_max: int,
    *,
    ctx: NodeContext,
) -> tuple[str, str]:
    """_fake_quantize_per_tensor_affine_cachemask_tensor_qparams(Tensor self,
    Tensor scale, Tensor zero_point, Tensor fake_quant_enabled, int quant_min,
    int quant_max) -> (Tensor output, Tensor mask)"""
    op = ctx.node.target
    enabled = _known(g, fake_quant_enabled)
    if enabled is False:
        return g.op.Identity(x), g.op.Expand(_scalar(g, True, BOOL), g.op.Shape(x))
    y = fake_qdq(g, x, scale, zero_point, quant_min, quant_max, op)
    mask = _mask(g, x, scale, zero_point, quant_min, quant_max)
    if enabled is None:  # decided when the model runs
        on = g.op.Cast(g.op.Reshape(fake_quant_enabled, i64([])), to=BOOL)
        return g.op.Where(on, y, x), g.op.Or(g.op.And(on, mask), g.op.Not(on))
    return y, mask


@converter(aten.fake_quantize_per_channel_affine.default)
def fake_quantize_per_channel_affine(
    g: GraphBuilder,
    x: str,
    scale: str,
    zero_point: str,
    axis: int,
    quant_min: int,
    quant_max: int,
    *,
    ctx: NodeContext,
) -> str:
    """fake_quantize_per_channel_affine(Tensor self, Tensor scale, Tensor zero_point,
    int axis, int quant_min, int quant_max) -> Tensor"""
    return fake_qdq(g, x, scale, zero_point, quant_min, quant_max, ctx.node.target, axis=axis)


@converter(aten.fake_quantize_per_channel_affine_cachemask.default)
def fake_quantize_per_channel_affine_cachemask(
    g: GraphBuilder,
    x: str,
    scale: str,
    zero_point: str,
    axis: int,
    quant_min: int,
    quant_max: int,
    *,
    ctx: NodeContext,
) -> tuple[str, str]:
    """fake_quantize_per_channel_affine_cachemask(Tensor self, Tensor scale,
    Tensor zero_point, int axis, int quant_min, int quant_max) -> (Tensor, Tensor)"""
    return (
        fake_qdq(g, x, scale, zero_point, quant_min, quant_max, ctx.node.target, axis=axis),
        _mask(g, x, scale, zero_point, quant_min, quant_max, axis=axis),
    )


@converter(aten._fake_quantize_learnable_per_tensor_affine.default)
def fake_quantize_learnable_per_tensor_affine(
    g: GraphBuilder,
    x: str,
    scale: str,
    zero_point: str,
    quant_min: int,
    quant_max: int,
    grad_factor: float = 1.0,
    *,
    ctx: NodeContext,
) -> str:
    """_fake_quantize_learnable_per_tensor_affine(Tensor self, Tensor scale,
    Tensor zero_point, int quant_min, int quant_max, float grad_factor=1.0) -> Tensor
    (``grad_factor`` only scales gradients)"""
    return fake_qdq(g, x, scale, zero_point, quant_min, quant_max, ctx.node.target)


@converter(aten._fake_quantize_learnable_per_channel_affine.default)
def fake_quantize_learnable_per_channel_affine(
    g: GraphBuilder,
    x: str,
    scale: str,
    zero_point: str,
    axis: int,
    quant_min: int,
    quant_max: int,
    grad_factor: float = 1.0,
    *,
    ctx: NodeContext,
):
    """_fake_quantize_learnable_per_channel_affine(Tensor self, Tensor scale,
    Tensor zero_point, int axis, int quant_min, int quant_max, float grad_factor=1.0)"""
    return fake_qdq(g, x, scale, zero_point, quant_min, quant_max, ctx.node.target, axis=axis)


# --- torchao's QAT observer + fake quantize, converted once the observer is off ---


def _fused_fake_quant(
    g: GraphBuilder,
    x,
    observer_on,
    fake_quant_on,
    scale,
    zero_point,
    quant_min,
    quant_max,
    ch_axis,
    per_row_fake_quant,
    op,
):
    if _enabled(g, observer_on, "observer_on", op):
        raise UnsupportedOpError(
            "the observer is on: each call would update the quantization statistics, "
            "which an ONNX graph cannot do; disable the observers before exporting "
            "(model.apply(torchao.quantization.pt2e.disable_observer) or "
            "torch.ao.quantization.disable_observer), or export after convert_pt2e",
            op=op,
            argument="observer_on",
        )
    if not _enabled(g, fake_quant_on, "fake_quant_on", op):
        return g.op.Identity(x)
    axis = ch_axis if per_row_fake_quant else None
    return fake_qdq(g, x, scale, zero_point, quant_min, quant_max, op, axis=axis)


@converter(aten.fused_moving_avg_obs_fake_quant.default)
def fused_moving_avg_obs_fake_quant(
    g: GraphBuilder,
    x: str,
    observer_on: str,
    fake_quant_on: str,
    running_min: str,
    running_max: str,
    scale: str,
    zero_point: str,
    averaging_const: float,
    quant_min: int,
    quant_max: int,
    ch_axis: int,
    per_row_fake_quant: bool = False,
    symmetric_quant: bool = False,
    *,
    ctx: NodeContext,
):
    """fused_moving_avg_obs_fake_quant(Tensor self, Tensor observer_on,
    Tensor fake_quant_on, Tensor(a!) running_min, Tensor(b!) running_max,
    Tensor(c!) scale, Tensor(d!) zero_point, float averaging_const, int quant_min,
    int quant_max, int ch_axis, bool per_row_fake_quant=False,
    bool symmetric_quant=False) -> Tensor; the observer must be off"""
    return _fused_fake_quant(
        g,
        x,
        observer_on,
        fake_quant_on,
        scale,
        zero_point,
        quant_min,
        quant_max,
        ch_axis,
        per_row_fake_quant,
        ctx.node.target,
    )


@converter(aten._fused_moving_avg_obs_fq_helper_functional.default)
def fused_moving_avg_obs_fq_helper_functional(
    g: GraphBuilder,
    x,
    observer_on,
    fake_quant_on,
    running_min,
    running_max,
    scale,
    zero_point,
    averaging_const,
    quant_min,
    quant_max,
    ch_axis,
    per_row_fake_quant=False,
    symmetric_quant=False,
    *,
    ctx: NodeContext,
):
    """_fused_moving_avg_obs_fq_helper_functional(...) -> (output, mask, running_min,
    running_max, scale, zero_point), the functional form of
    ``fused_moving_avg_obs_fake_quant``; with the observer off the statistics come out
    unchanged"""
    op = ctx.node.target
    y = _fused_fake_quant(
        g,
        x,
        observer_on,
        fake_quant_on,
        scale,
        zero_point,
        quant_min,
        quant_max,
        ch_axis,
        per_row_fake_quant,
        op,
    )
    axis = ch_axis if per_row_fake_quant else None
    if _enabled(g, fake_quant_on, "fake_quant_on", op):
        mask = _mask(g, x, scale, zero_point, quant_min, quant_max, axis=axis)
    else:
        mask = g.op.Expand(_scalar(g, True, BOOL), g.op.Shape(x))
    return (
        y,
        mask,
        g.op.Identity(running_min),
        g.op.Identity(running_max),
        g.op.Identity(scale),
        g.op.Identity(zero_point),
    )
