"""Converters of the ``quantized_decomposed`` operators (torchao's PT2E graphs).

Per-tensor and per-channel (de)quantization become ONNX QuantizeLinear and
DequantizeLinear, the QDQ form onnxruntime fuses into QLinearConv / QLinearMatMul;
a ``[quant_min, quant_max]`` narrower than the dtype's range adds an integer Clip after
QuantizeLinear. Per-token (de)quantization and the ``choose_qparams`` operators
(dynamic quantization) are written with arithmetic as torch computes them.
"""

from __future__ import annotations

import numpy as np
import torch
import torch.ao.quantization.fx._decomposed  # noqa: F401  (registers quantized_decomposed)
from onnx import TensorProto

from ....xbuilder import GraphBuilder
from ....xbuilder.dtypes import i64, onnx_to_np_dtype
from ...errors import UnsupportedOpError
from ..node_context import NodeContext
from ..registry import converter
from ._helpers import cast_to, onnx_dtype, promote

qd = torch.ops.quantized_decomposed
FLOAT = TensorProto.FLOAT
# torch dtype -> lowest opset whose QuantizeLinear / DequantizeLinear take it
_QDQ_DTYPES = {torch.uint8: 13, torch.int8: 13, torch.uint16: 21, torch.int16: 21}


def _qtype(g: GraphBuilder, dtype: torch.dtype, op) -> int:
    """ONNX element type of the quantized ``dtype``, or a typed refusal."""
    need = _QDQ_DTYPES.get(dtype)
    if need is None:
        raise UnsupportedOpError(
            f"quantized dtype {dtype} has no ONNX QuantizeLinear/DequantizeLinear form "
            f"(supported: {', '.join(map(str, _QDQ_DTYPES))}); quantize to int8 or uint8",
            op=op,
            argument="dtype",
        )
    if g.main_opset < need:
        raise UnsupportedOpError(
            f"QuantizeLinear/DequantizeLinear on {dtype} needs opset >= {need}, the export "
            f"targets opset {g.main_opset} (raise target_opset)",
            op=op,
            argument="dtype",
        )
    return onnx_dtype(dtype, 0)


def _scalar(g: GraphBuilder, value, elem_type: int) -> str:
    return g.make_constant(np.array(value, dtype=onnx_to_np_dtype(elem_type)))


def _per_tensor(g: GraphBuilder, v, elem_type: int) -> str:
    """A python number or a one-element tensor as a scalar of ``elem_type``."""
    if not isinstance(v, str):
        return _scalar(g, v, elem_type)
    v = cast_to(g, v, elem_type)
    return v if g.get_rank(v) == 0 else g.op.Reshape(v, i64([]))


def _float_input(g: GraphBuilder, x: str) -> str:
    """torch quantizes float16 and bfloat16 inputs in float32."""
    return cast_to(g, x, FLOAT)


def _narrow(g: GraphBuilder, q: str, quant_min: int, quant_max: int, dtype, qtype: int):
    """Clips ``q`` to ``[quant_min, quant_max]`` when narrower than the dtype's range."""
    info = torch.iinfo(dtype)
    if (quant_min, quant_max) == (info.min, info.max):
        return q
    if quant_min < info.min or quant_max > info.max or quant_min > quant_max:
        raise UnsupportedOpError(
            f"[quant_min, quant_max]=[{quant_min}, {quant_max}] is not inside the range "
            f"of {dtype} [{info.min}, {info.max}]; fix the quantizer's configuration",
            argument="quant_min",
        )
    return g.op.Clip(q, _scalar(g, quant_min, qtype), _scalar(g, quant_max, qtype))


def _quantize_linear(g, x, scale, zero_point, quant_min, quant_max, dtype, op, axis=None):
    qtype = _qtype(g, dtype, op)
    x = _float_input(g, x)
    if axis is None:
        scale, zero_point = _per_tensor(g, scale, FLOAT), _per_tensor(g, zero_point, qtype)
        q = g.op.QuantizeLinear(x, scale, zero_point)
    else:
        scale, zero_point = cast_to(g, scale, FLOAT), cast_to(g, zero_point, qtype)
        q = g.op.QuantizeLinear(x, scale, zero_point, axis=axis)
    return _narrow(g, q, quant_min, quant_max, dtype, qtype)


def _dequantize_linear(g, x, scale, zero_point, dtype, out_dtype, op, axis=None):
    qtype = _qtype(g, dtype, op)
    out = onnx_dtype(out_dtype, FLOAT)
    if axis is None:
        scale = _per_tensor(g, scale, out)
        zero_point = _per_tensor(g, zero_point, qtype)
        return g.op.DequantizeLinear(x, scale, zero_point)
    scale = cast_to(g, scale, out)
    if zero_point is None:
        return g.op.DequantizeLinear(x, scale, axis=axis)
    return g.op.DequantizeLinear(x, scale, cast_to(g, zero_point, qtype), axis=axis)


@converter(qd.quantize_per_tensor.default)
def quantize_per_tensor(g: GraphBuilder, x, scale, zero_point, quant_min, quant_max, dtype):
    """quantize_per_tensor(Tensor input, float scale, int zero_point, int quant_min,
    int quant_max, ScalarType dtype) -> Tensor"""
    return _quantize_linear(
        g, x, scale, zero_point, quant_min, quant_max, dtype, qd.quantize_per_tensor.default
    )


@converter(qd.quantize_per_tensor.tensor)
def quantize_per_tensor_tensor(g: GraphBuilder, x, scale, zero_point, quant_min, quant_max, dtype):
    """quantize_per_tensor.tensor(Tensor input, Tensor scale, Tensor zero_point,
    int quant_min, int quant_max, ScalarType dtype) -> Tensor"""
    return _quantize_linear(
        g, x, scale, zero_point, quant_min, quant_max, dtype, qd.quantize_per_tensor.tensor
    )


@converter(qd.dequantize_per_tensor.default)
def dequantize_per_tensor(
    g: GraphBuilder, x, scale, zero_point, quant_min, quant_max, dtype, *, out_dtype=None
):
    """dequantize_per_tensor(Tensor input, float scale, int zero_point, int quant_min,
    int quant_max, ScalarType dtype, *, ScalarType? out_dtype=None) -> Tensor"""
    return _dequantize_linear(
        g, x, scale, zero_point, dtype, out_dtype, qd.dequantize_per_tensor.default
    )


@converter(qd.dequantize_per_tensor.tensor)
def dequantize_per_tensor_tensor(
    g: GraphBuilder, x, scale, zero_point, quant_min, quant_max, dtype, *, out_dtype=None
):
    """dequantize_per_tensor.tensor(Tensor input, Tensor scale, Tensor zero_point,
    int quant_min, int quant_max, ScalarType dtype, *, ScalarType? out_dtype=None)"""
    return _dequantize_linear(
        g, x, scale, zero_point, dtype, out_dtype, qd.dequantize_per_tensor.tensor
    )


@converter(qd.quantize_per_channel.default)
def quantize_per_channel(
    g: GraphBuilder, x, scales, zero_points, axis, quant_min, quant_max, dtype
):
    """quantize_per_channel(Tensor input, Tensor scales, Tensor zero_points, int axis,
    int quant_min, int quant_max, ScalarType dtype) -> Tensor"""
    return _quantize_linear(
        g,
        x,
        scales,
        zero_points,
        quant_min,
        quant_max,
        dtype,
        qd.quantize_per_channel.default,
        axis=axis,
    )


@converter(qd.dequantize_per_channel.default)
def dequantize_per_channel(
    g: GraphBuilder, x, scales, zero_points, axis, quant_min, quant_max, dtype, *, out_dtype=None
):
    """dequantize_per_channel(Tensor input, Tensor scales, Tensor? zero_points, int axis,
    int quant_min, int quant_max, ScalarType dtype, *, ScalarType? out_dtype=None)"""
    return _dequantize_linear(
        g, x, scales, zero_points, dtype, out_dtype, qd.dequantize_per_channel.default, axis=axis
    )


# --- per token and dynamic quantization: arithmetic, as torch computes it ---


@converter(qd.quantize_per_token.default)
def quantize_per_token(g: GraphBuilder, x, scales, zero_points, quant_min, quant_max, dtype):
    """quantize_per_token(Tensor input, Tensor scales, Tensor zero_points, int quant_min,
    int quant_max, ScalarType dtype) -> Tensor"""
    qtype = _qtype(g, dtype, qd.quantize_per_token.default)
    t = promote(g, x, scales)  # x * (1 / scales) runs in float64 with float64 scales
    y = g.op.Mul(cast_to(g, x, t), g.op.Reciprocal(cast_to(g, scales, t)))
    y = g.op.Round(g.op.Add(y, cast_to(g, zero_points, t)))
    return g.op.Cast(g.op.Clip(y, _scalar(g, quant_min, t), _scalar(g, quant_max, t)), to=qtype)


@converter(qd.dequantize_per_token.default)
def dequantize_per_token(
    g: GraphBuilder, x, scales, zero_points, quant_min, quant_max, dtype, output_dtype=torch.float32
):
    """dequantize_per_token(Tensor input, Tensor scales, Tensor zero_points,
    int quant_min, int quant_max, ScalarType dtype, ScalarType output_dtype) -> Tensor"""
    _qtype(g, dtype, qd.dequantize_per_token.default)
    t = g.get_type(scales)
    y = g.op.Mul(g.op.Sub(cast_to(g, x, t), cast_to(g, zero_points, t)), scales)
    return cast_to(g, y, onnx_dtype(output_dtype, FLOAT))


def _neg_pos(g: GraphBuilder, low: str, high: str, t: int):
    zero = _scalar(g, 0, t)
    return g.op.Min(low, zero), g.op.Max(high, zero)


@converter(qd.choose_qparams.tensor)
def choose_qparams_tensor(g: GraphBuilder, x, quant_min, quant_max, eps, dtype):
    """choose_qparams.tensor(Tensor input, int quant_min, int quant_max, float eps,
    ScalarType dtype) -> (Tensor, Tensor): affine per-tensor scale and zero point"""
    _qtype(g, dtype, qd.choose_qparams.tensor)
    t = FLOAT if g.get_type(x) == TensorProto.BFLOAT16 else g.get_type(x)
    flat = g.op.Reshape(cast_to(g, x, t), i64([-1]))
    low, high = _neg_pos(g, g.op.ReduceMin(flat, keepdims=1), g.op.ReduceMax(flat, keepdims=1), t)
    scale = g.op.Div(g.op.Sub(high, low), _scalar(g, float(quant_max - quant_min), t))
    scale = g.op.Max(cast_to(g, scale, FLOAT), _scalar(g, eps, FLOAT))
    zero_point = g.op.Sub(
        _scalar(g, quant_min, FLOAT), g.op.Round(g.op.Div(cast_to(g, low, FLOAT), scale))
    )
    zero_point = g.op.Clip(zero_point, _scalar(g, quant_min, FLOAT), _scalar(g, quant_max, FLOAT))
    return (cast_to(g, scale, TensorProto.DOUBLE), g.op.Cast(zero_point, to=TensorProto.INT64))


@converter(qd.choose_qparams_per_token_asymmetric.default)
def choose_qparams_per_token_asymmetric(g: GraphBuilder, x, dtype, *, ctx: NodeContext):
    """choose_qparams_per_token_asymmetric(Tensor input, ScalarType dtype)
    -> (Tensor, Tensor): int8 range, one scale and zero point per last-axis row"""
    t = g.get_type(x)
    qmin, qmax = -128.0, 127.0
    axis = i64([-1])
    low, high = _neg_pos(
        g, g.op.ReduceMin(x, axis, keepdims=1), g.op.ReduceMax(x, axis, keepdims=1), t
    )
    scale = g.op.Div(g.op.Sub(high, low), _scalar(g, qmax - qmin, t))
    scale = g.op.Max(scale, _scalar(g, float(np.finfo(np.float32).eps), t))
    dmin, dmax = g.op.Div(low, scale), g.op.Div(high, scale)
    use_min = g.op.Greater(
        g.op.Add(g.op.Add(dmin, _scalar(g, qmin, t)), g.op.Add(dmax, _scalar(g, qmax, t))),
        _scalar(g, 0, t),
    )
    zero_point = g.op.Where(
        use_min, g.op.Sub(_scalar(g, qmin, t), dmin), g.op.Sub(_scalar(g, qmax, t), dmax)
    )
    zero_point = g.op.Round(g.op.Clip(zero_point, _scalar(g, qmin, t), _scalar(g, qmax, t)))
    return cast_to(g, scale, ctx.dtype(0)), g.op.Cast(zero_point, to=ctx.dtype(1))
