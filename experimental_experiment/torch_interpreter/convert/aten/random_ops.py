"""Random tensors: rand, randn, randint (and their ``*_like``), bernoulli.

The ONNX model draws new numbers at every run (no ``seed`` attribute): it follows the
distribution of torch's operator, not torch's generator, so outputs only match eager
where the model's result does not depend on the draw. Numbers are drawn in float32
(double for float64 and the integer ranges of randint) since onnxruntime implements
RandomUniformLike and RandomNormalLike for these two types only, then cast.
The optimizer neither folds nor merges these nodes (``xoptim.passes._NOT_FOLDABLE``).
"""

from __future__ import annotations

import numpy as np
import torch
from onnx import TensorProto

from ....xbuilder import GraphBuilder
from ....xbuilder.dtypes import FLOAT_TYPES, onnx_to_np_dtype
from ...errors import UnsupportedOpError
from ..node_context import NodeContext
from ..registry import converter
from ._helpers import aten, cast_to, shape_tensor
from .creation import full_of_shape

FLOAT = TensorProto.FLOAT
DOUBLE = TensorProto.DOUBLE


def _sizes(size) -> list:
    if isinstance(size, (int, str)):
        return [size]
    return list(size)


def _shape(g: GraphBuilder, size=None, like=None) -> str:
    """1-D int64 shape: of ``like`` (a tensor name) or built from ``size`` (SymInt[])."""
    if like is not None:
        if g.is_static_shape(like):
            return shape_tensor(g, list(g.get_shape(like)))
        return g.op.Shape(like)
    return shape_tensor(g, _sizes(size))


def _draw_type(elem_type: int) -> int:
    return DOUBLE if elem_type == DOUBLE else FLOAT


def _uniform(g: GraphBuilder, shape: str, draw: int, low: float = 0.0, high: float = 1.0) -> str:
    zeros = full_of_shape(g, shape, 0, draw)
    return g.op.RandomUniformLike(zeros, dtype=draw, low=float(low), high=float(high))


def _check_float(elem_type: int, name: str) -> None:
    if elem_type not in FLOAT_TYPES:
        raise UnsupportedOpError(f"{name} of a non floating type ({elem_type})")


def _below_one(g: GraphBuilder, y: str, elem_type: int) -> str:
    """Keeps a uniform draw cast to float16/bfloat16 below 1 (rounding may reach it)."""
    if elem_type in (FLOAT, DOUBLE):
        return y
    if elem_type == TensorProto.BFLOAT16:
        top = np.array(1 - 2.0**-8, dtype=np.float32)  # largest bfloat16 below 1
        return cast_to(g, g.op.Min(y, top), elem_type)
    y = cast_to(g, y, elem_type)
    dt = onnx_to_np_dtype(elem_type)
    one = np.array(1, dtype=dt)
    return g.op.Min(y, np.nextafter(one, np.array(0, dtype=dt)).astype(dt))


def _rand(g: GraphBuilder, shape: str, elem_type: int) -> str:
    _check_float(elem_type, "rand")
    draw = _draw_type(elem_type)
    return _below_one(g, _uniform(g, shape, draw), elem_type)


def _randn(g: GraphBuilder, shape: str, elem_type: int) -> str:
    _check_float(elem_type, "randn")
    draw = _draw_type(elem_type)
    zeros = full_of_shape(g, shape, 0, draw)
    y = g.op.RandomNormalLike(zeros, dtype=draw, mean=0.0, scale=1.0)
    return cast_to(g, y, elem_type)


@converter(aten.rand.default)
def aten_rand(
    g: GraphBuilder,
    size,
    *,
    dtype=None,
    layout=None,
    device=None,
    pin_memory=None,
    ctx: NodeContext,
):
    """rand(SymInt[] size, *, ScalarType? dtype=None, ...) -> Tensor, uniform in [0, 1)"""
    return _rand(g, _shape(g, size), ctx.dtype())


@converter(aten.rand_like.default)
def aten_rand_like(
    g: GraphBuilder,
    x,
    *,
    dtype=None,
    layout=None,
    device=None,
    pin_memory=None,
    memory_format=None,
    ctx: NodeContext,
):
    """rand_like(Tensor self, *, ScalarType? dtype=None, ...) -> Tensor"""
    return _rand(g, _shape(g, like=x), ctx.dtype())


@converter(aten.randn.default)
def aten_randn(
    g: GraphBuilder,
    size,
    *,
    dtype=None,
    layout=None,
    device=None,
    pin_memory=None,
    ctx: NodeContext,
):
    """randn(SymInt[] size, *, ScalarType? dtype=None, ...) -> Tensor, standard normal"""
    return _randn(g, _shape(g, size), ctx.dtype())


@converter(aten.randn_like.default)
def aten_randn_like(
    g: GraphBuilder,
    x,
    *,
    dtype=None,
    layout=None,
    device=None,
    pin_memory=None,
    memory_format=None,
    ctx: NodeContext,
):
    """randn_like(Tensor self, *, ScalarType? dtype=None, ...) -> Tensor"""
    return _randn(g, _shape(g, like=x), ctx.dtype())


def _randint(g: GraphBuilder, shape: str, low, high, elem_type: int) -> str:
    """floor(u * (high - low)) + low with u uniform in [0, 1), in double, then cast."""
    if isinstance(high, str) or isinstance(low, str):
        span = g.op.Sub(cast_to(g, high, DOUBLE), cast_to(g, low, DOUBLE))
    else:
        span = np.array(float(high) - float(low), dtype=np.float64)
    r = g.op.Floor(g.op.Mul(_uniform(g, shape, DOUBLE), span))
    # u * span may round up to span itself in double
    r = g.op.Min(r, g.op.Sub(span, np.array(1.0, dtype=np.float64)))
    r = g.op.Add(r, cast_to(g, low, DOUBLE))
    return cast_to(g, r, elem_type)


@converter(aten.randint.default)
def aten_randint(
    g: GraphBuilder,
    high,
    size,
    *,
    dtype=None,
    layout=None,
    device=None,
    pin_memory=None,
    ctx: NodeContext,
):
    """randint(SymInt high, SymInt[] size, *, ScalarType? dtype=long, ...) -> Tensor"""
    return _randint(g, _shape(g, size), 0, high, ctx.dtype())


@converter(aten.randint.low)
def aten_randint_low(
    g: GraphBuilder,
    low,
    high,
    size,
    *,
    dtype=None,
    layout=None,
    device=None,
    pin_memory=None,
    ctx: NodeContext,
):
    """randint.low(SymInt low, SymInt high, SymInt[] size, *, ...) -> Tensor"""
    return _randint(g, _shape(g, size), low, high, ctx.dtype())


@converter(aten.randint_like.default)
def aten_randint_like(
    g: GraphBuilder,
    x,
    high,
    *,
    dtype=None,
    layout=None,
    device=None,
    pin_memory=None,
    memory_format=None,
    ctx: NodeContext,
):
    """randint_like(Tensor self, SymInt high, *, ScalarType? dtype=None, ...) -> Tensor"""
    return _randint(g, _shape(g, like=x), 0, high, ctx.dtype())


@converter(aten.randint_like.low_dtype)
def aten_randint_like_low(
    g: GraphBuilder,
    x,
    low,
    high,
    *,
    dtype=None,
    layout=None,
    device=None,
    pin_memory=None,
    memory_format=None,
    ctx: NodeContext,
):
    """randint_like.low_dtype(Tensor self, SymInt low, SymInt high, *, ...) -> Tensor"""
    return _randint(g, _shape(g, like=x), low, high, ctx.dtype())


@converter(aten.bernoulli.default)
def aten_bernoulli(
    g: GraphBuilder, x: str, *, generator: torch.Generator | None = None, ctx: NodeContext
):
    """bernoulli(Tensor self, *, Generator? generator=None) -> Tensor, 1 with probability
    ``self``"""
    if generator is not None:
        raise UnsupportedOpError("bernoulli with an explicit generator")
    t = ctx.dtype()
    _check_float(t, "bernoulli")
    draw = _draw_type(t)
    u = _uniform(g, _shape(g, like=x), draw)
    return cast_to(g, g.op.Less(u, cast_to(g, x, draw)), t)


@converter(aten.bernoulli.p)
def aten_bernoulli_p(
    g: GraphBuilder,
    x: str,
    p: float = 0.5,
    *,
    generator: torch.Generator | None = None,
    ctx: NodeContext,
) -> str:
    """bernoulli.p(Tensor self, float p, *, Generator? generator=None) -> Tensor"""
    if generator is not None:
        raise UnsupportedOpError("bernoulli with an explicit generator")
    t = ctx.dtype()
    draw = _draw_type(t)
    u = _uniform(g, _shape(g, like=x), draw)
    p = cast_to(g, p, draw) if isinstance(p, str) else np.array(p, dtype=onnx_to_np_dtype(draw))
    return cast_to(g, g.op.Less(u, p), t)
