"""Activations, softmax, log_softmax and dropout.

float16 and bfloat16 inputs are computed in float32 then cast back, as torch does
(opmath) on CPU; in-place variants (``relu_``...) convert like their functional form.
"""

from __future__ import annotations

import math

import numpy as np
import torch
from onnx import helper

from ....xbuilder import GraphBuilder
from ....xbuilder.dtypes import FLOAT_TYPES, i64
from ...errors import UnsupportedOpError
from ..node_context import NodeContext
from ..registry import converter
from ._helpers import BOOL, aten, cast_to, onnx_dtype
from ._nn_helpers import FLOAT, upcast


def _back(g: GraphBuilder, y: str, *, ctx: NodeContext) -> str:
    return cast_to(g, y, ctx.dtype())


@converter(aten.relu.default, aten.relu_.default)
def aten_relu(g: GraphBuilder, x: str) -> str:
    """relu(Tensor self) -> Tensor"""
    if g.get_type(x) in FLOAT_TYPES:
        return g.op.Relu(x)
    return g.op.Max(x, 0)


@converter(aten.relu6.default, aten.relu6_.default)
def aten_relu6(g: GraphBuilder, x: str) -> str:
    """relu6(Tensor self) -> Tensor"""
    return g.op.Clip(x, 0, 6)


@converter(aten.hardtanh.default, aten.hardtanh_.default)
def aten_hardtanh(
    g: GraphBuilder, x: str, min_val: float | str = -1.0, max_val: float | str = 1.0
) -> str:
    """hardtanh(Tensor self, Scalar min_val=-1, Scalar max_val=1) -> Tensor"""
    return g.op.Clip(x, min_val, max_val)


@converter(aten.gelu.default, aten.gelu_.default)
def aten_gelu(g: GraphBuilder, x: str, *, approximate: str = "none", ctx: NodeContext) -> str:
    """gelu(Tensor self, *, str approximate='none') -> Tensor"""
    xf = upcast(g, x)
    half = g.op.Mul(xf, 0.5)
    if approximate == "tanh":
        cube = g.op.Mul(g.op.Mul(xf, xf), xf)
        inner = g.op.Mul(g.op.Add(xf, g.op.Mul(cube, 0.044715)), math.sqrt(2.0 / math.pi))
        return _back(g, g.op.Mul(half, g.op.Add(g.op.Tanh(inner), 1.0)), ctx=ctx)
    if approximate != "none":
        raise ValueError(f"gelu: unknown approximate={approximate!r}")
    return _back(g, g.op.Mul(half, g.op.Add(g.op.Erf(g.op.Mul(xf, math.sqrt(0.5))), 1.0)), ctx=ctx)


@converter(aten.gelu.default, aten.gelu_.default, min_opset=20)
def aten_gelu_20(g: GraphBuilder, x: str, *, approximate: str = "none", ctx: NodeContext) -> str:
    """gelu(Tensor self, *, str approximate='none') -> Tensor (ONNX Gelu, opset 20)"""
    return _back(g, g.op.Gelu(upcast(g, x), approximate=approximate), ctx=ctx)


@converter(aten.silu.default, aten.silu_.default)
def aten_silu(g: GraphBuilder, x: str, *, ctx: NodeContext) -> str:
    """silu(Tensor self) -> Tensor"""
    xf = upcast(g, x)
    return _back(g, g.op.Mul(xf, g.op.Sigmoid(xf)), ctx=ctx)


@converter(aten.leaky_relu.default, aten.leaky_relu_.default)
def aten_leaky_relu(
    g: GraphBuilder, x: str, negative_slope: float | str = 0.01, *, ctx: NodeContext
) -> str:
    """leaky_relu(Tensor self, Scalar negative_slope=0.01) -> Tensor"""
    return _back(g, g.op.LeakyRelu(upcast(g, x), alpha=float(negative_slope)), ctx=ctx)


@converter(aten.elu.default, aten.elu_.default)
def aten_elu(
    g: GraphBuilder,
    x: str,
    alpha: float | str = 1.0,
    scale: float | str = 1.0,
    input_scale: float | str = 1.0,
    *,
    ctx: NodeContext,
) -> str:
    """elu(Tensor self, Scalar alpha=1, Scalar scale=1, Scalar input_scale=1) -> Tensor"""
    xf = upcast(g, x)
    if scale == 1 and input_scale == 1:
        return _back(g, g.op.Elu(xf, alpha=float(alpha)), ctx=ctx)
    xs = xf if input_scale == 1 else g.op.Mul(xf, float(input_scale))
    neg = g.op.Mul(g.op.Sub(g.op.Exp(xs), 1.0), float(alpha) * float(scale))
    pos = g.op.Mul(xf, float(scale))
    return _back(g, g.op.Where(g.op.Greater(xf, 0.0), pos, neg), ctx=ctx)


@converter(aten.selu.default, aten.selu_.default)
def aten_selu(g: GraphBuilder, x: str, *, ctx: NodeContext) -> str:
    """selu(Tensor self) -> Tensor (ONNX defaults are torch's constants)"""
    return _back(g, g.op.Selu(upcast(g, x)), ctx=ctx)


@converter(aten.celu.default, aten.celu_.default)
def aten_celu(g: GraphBuilder, x: str, alpha: float | str = 1.0, *, ctx: NodeContext) -> str:
    """celu(Tensor self, Scalar alpha=1.0) -> Tensor"""
    xf = upcast(g, x)
    alpha = float(alpha)
    neg = g.op.Mul(g.op.Sub(g.op.Exp(g.op.Div(xf, alpha)), 1.0), alpha)
    return _back(g, g.op.Add(g.op.Max(xf, 0.0), g.op.Min(neg, 0.0)), ctx=ctx)


def _hardsigmoid(g: GraphBuilder, xf: str) -> str:
    if g.get_type(xf) == FLOAT:
        return g.op.HardSigmoid(xf, alpha=1.0 / 6, beta=0.5)
    return g.op.Clip(g.op.Add(g.op.Div(xf, 6.0), 0.5), 0.0, 1.0)


@converter(aten.hardsigmoid.default, aten.hardsigmoid_.default)
def aten_hardsigmoid(g: GraphBuilder, x: str, *, ctx: NodeContext) -> str:
    """hardsigmoid(Tensor self) -> Tensor"""
    return _back(g, _hardsigmoid(g, upcast(g, x)), ctx=ctx)


@converter(aten.hardswish.default, aten.hardswish_.default)
def aten_hardswish(g: GraphBuilder, x: str, *, ctx: NodeContext) -> str:
    """hardswish(Tensor self) -> Tensor"""
    xf = upcast(g, x)
    if g.get_type(xf) == FLOAT:
        return _back(g, g.op.HardSwish(xf), ctx=ctx)
    return _back(g, g.op.Mul(xf, _hardsigmoid(g, xf)), ctx=ctx)


def _softplus(g: GraphBuilder, xf: str) -> str:
    """log(1 + exp(x)) without overflow: max(x, 0) + log(1 + exp(-|x|))."""
    if g.get_type(xf) == FLOAT:
        return g.op.Softplus(xf)
    tail = g.op.Log(g.op.Add(g.op.Exp(g.op.Neg(g.op.Abs(xf))), 1.0))
    return g.op.Add(g.op.Max(xf, 0.0), tail)


@converter(aten.softplus.default)
def aten_softplus(
    g: GraphBuilder,
    x: str,
    beta: float | str = 1.0,
    threshold: float | str = 20.0,
    *,
    ctx: NodeContext,
) -> str:
    """softplus(Tensor self, Scalar beta=1, Scalar threshold=20) -> Tensor"""
    xf = upcast(g, x)
    bx = xf if beta == 1 else g.op.Mul(xf, float(beta))
    sp = _softplus(g, bx)
    if beta != 1:
        sp = g.op.Div(sp, float(beta))
    return _back(g, g.op.Where(g.op.Greater(bx, float(threshold)), xf, sp), ctx=ctx)


@converter(aten.mish.default, aten.mish_.default)
def aten_mish(g: GraphBuilder, x: str, *, ctx: NodeContext):
    """mish(Tensor self) -> Tensor: x * tanh(softplus(x))"""
    xf = upcast(g, x)
    return _back(g, g.op.Mul(xf, g.op.Tanh(_softplus(g, xf))), ctx=ctx)


@converter(aten.prelu.default, aten._prelu_kernel.default)
def aten_prelu(g: GraphBuilder, x: str, weight: str) -> str:
    """prelu(Tensor self, Tensor weight) -> Tensor (weight broadcast on axis 1)"""
    rank = g.get_rank(x)
    w = cast_to(g, weight, g.get_type(x))
    if rank is not None and rank >= 2 and g.get_rank(weight) == 1:
        w = g.op.Reshape(w, i64([-1] + [1] * (rank - 2)))
    elif rank == 0:  # a 0-d input keeps its rank: the single weight becomes a scalar
        w = g.op.Reshape(w, i64([]))
    return g.op.Where(g.op.Greater(x, 0), x, g.op.Mul(x, w))


@converter(aten.threshold.default, aten.threshold_.default)
def aten_threshold(
    g: GraphBuilder, x: str, threshold: float | str, value: float | str, *, ctx: NodeContext
) -> str:
    """threshold(Tensor self, Scalar threshold, Scalar value) -> Tensor"""
    t = ctx.dtype()
    return g.op.Where(g.op.Greater(x, cast_to(g, threshold, t)), x, cast_to(g, value, t))


@converter(aten.hardshrink.default)
def aten_hardshrink(g: GraphBuilder, x: str, lambd: float | str = 0.5, *, ctx: NodeContext) -> str:
    """hardshrink(Tensor self, Scalar lambd=0.5) -> Tensor"""
    xf = upcast(g, x)
    keep = g.op.Greater(g.op.Abs(xf), float(lambd))
    return _back(g, g.op.Where(keep, xf, cast_to(g, 0.0, g.get_type(xf))), ctx=ctx)


@converter(aten.softshrink.default)
def aten_softshrink(g: GraphBuilder, x: str, lambd: float | str = 0.5, *, ctx: NodeContext) -> str:
    """softshrink(Tensor self, Scalar lambd=0.5) -> Tensor"""
    xf = upcast(g, x)
    lambd = float(lambd)
    shrunk = g.op.Sub(xf, g.op.Mul(g.op.Sign(xf), lambd))
    keep = g.op.Greater(g.op.Abs(xf), lambd)
    return _back(g, g.op.Where(keep, shrunk, cast_to(g, 0.0, g.get_type(xf))), ctx=ctx)


@converter(aten.log_sigmoid.default)
def aten_log_sigmoid(g: GraphBuilder, x: str, *, ctx: NodeContext):
    """log_sigmoid(Tensor self) -> Tensor: -softplus(-x)"""
    return _back(g, g.op.Neg(_softplus(g, g.op.Neg(upcast(g, x)))), ctx=ctx)


@converter(aten.glu.default)
def aten_glu(g: GraphBuilder, x: str, dim: int = -1, *, ctx: NodeContext):
    """glu(Tensor self, int dim=-1) -> Tensor: a * sigmoid(b), a, b halves of dim"""
    xf = upcast(g, x)
    a, b = g.op.Split(xf, axis=dim, num_outputs=2, outputs=2)
    return _back(g, g.op.Mul(a, g.op.Sigmoid(b)), ctx=ctx)


def _softmax(g: GraphBuilder, op: str, x, dim: int, dtype=None, *, ctx: NodeContext):
    if dtype is not None:
        x = cast_to(g, x, onnx_dtype(dtype, g.get_type(x)))
    xf = upcast(g, x)
    if g.get_rank(x) == 0:
        one = i64([0])
        y = getattr(g.op, op)(g.op.Unsqueeze(xf, one), axis=0)
        return _back(g, g.op.Squeeze(y, one), ctx=ctx)
    return _back(g, getattr(g.op, op)(xf, axis=dim), ctx=ctx)


@converter(aten.softmax.int)
def aten_softmax(
    g: GraphBuilder, x: str, dim: int, dtype: torch.dtype | None = None, *, ctx: NodeContext
) -> str:
    """softmax.int(Tensor self, int dim, ScalarType? dtype=None) -> Tensor"""
    return _softmax(g, "Softmax", x, dim, dtype, ctx=ctx)


@converter(aten._softmax.default)
def aten__softmax(
    g: GraphBuilder, x: str, dim: int, half_to_float: bool, *, ctx: NodeContext
) -> str:
    """_softmax(Tensor self, int dim, bool half_to_float) -> Tensor"""
    return _softmax(g, "Softmax", x, dim, ctx=ctx)


@converter(aten.log_softmax.int)
def aten_log_softmax(
    g: GraphBuilder, x: str, dim: int, dtype: torch.dtype | None = None, *, ctx: NodeContext
) -> str:
    """log_softmax.int(Tensor self, int dim, ScalarType? dtype=None) -> Tensor"""
    return _softmax(g, "LogSoftmax", x, dim, dtype, ctx=ctx)


@converter(aten._log_softmax.default)
def aten__log_softmax(
    g: GraphBuilder, x: str, dim: int, half_to_float: bool, *, ctx: NodeContext
) -> str:
    """_log_softmax(Tensor self, int dim, bool half_to_float) -> Tensor"""
    return _softmax(g, "LogSoftmax", x, dim, ctx=ctx)


def _random_dropout(g: GraphBuilder, x, p, outputs=1):
    """ONNX Dropout in training mode: random, as torch's is."""
    ratio = np.array(float(p), dtype=np.float32)
    return g.op.Dropout(x, ratio, np.array(True), outputs=outputs)


@converter(aten.dropout.default, aten.dropout_.default)
def aten_dropout(g: GraphBuilder, x: str, p: float, train: bool) -> str:
    """dropout(Tensor input, float p, bool train) -> Tensor (identity in eval mode)"""
    if not train or p == 0:
        return g.op.Identity(x)
    return _random_dropout(g, x, p)


@converter(aten.native_dropout.default)
def aten_native_dropout(g: GraphBuilder, x: str, p: float, train: bool | None) -> tuple[str, str]:
    """native_dropout(Tensor input, float p, bool? train) -> (Tensor, Tensor)

    In eval mode, the output is the input and the mask is all True.
    """
    if not train or p == 0:
        true = helper.make_tensor("value", BOOL, [1], [True])
        mask = g.op.ConstantOfShape(g.op.Shape(x), value=true)
        return g.op.Identity(x), mask
    return _random_dropout(g, x, p, outputs=2)


@converter(
    aten.feature_dropout.default,
    aten.feature_dropout_.default,
    aten.alpha_dropout.default,
    aten.alpha_dropout_.default,
    aten.feature_alpha_dropout.default,
    aten.feature_alpha_dropout_.default,
)
def aten_feature_dropout(
    g: GraphBuilder, x: str, p: float, train: bool, *, ctx: NodeContext
) -> str:
    """feature_dropout(Tensor input, float p, bool train) -> Tensor (eval mode only)"""
    if not train or p == 0:
        return g.op.Identity(x)
    raise UnsupportedOpError(
        f"{ctx.node.target} in training mode (p={p}) has no ONNX equivalent; "
        "export the model in eval mode (model.eval())"
    )
