"""Small helpers shared by converters (types, constants, shapes)."""

from __future__ import annotations

import numpy as np
import torch
from onnx import TensorProto

from ....xbuilder import GraphBuilder
from ....xbuilder.dtypes import i64, onnx_to_np_dtype
from ..._torch_helper import onnx_dtype_to_torch, torch_dtype_to_onnx
from ...errors import UnsupportedOpError
from ..node_context import NodeContext

aten = torch.ops.aten
INT64 = TensorProto.INT64
BOOL = TensorProto.BOOL


def cast_to(g: GraphBuilder, x, elem_type: int):
    """Casts ``x`` (name or python scalar) to ``elem_type``; a no-op when already typed."""
    if not isinstance(x, str):
        return g.make_constant(np.asarray(x, dtype=onnx_to_np_dtype(elem_type)))
    if g.get_type(x) == elem_type:
        return x
    return g.op.Cast(x, to=elem_type)


def compute_type(elem_type: int) -> int:
    """Element type a float operator runs in: float32 for bfloat16 (onnxruntime's CPU has
    no bfloat16 kernel for Floor, Ceil, Round, Exp, Sin, Add, ... and torch computes
    bfloat16 in float32 too before rounding), ``elem_type`` otherwise."""
    return TensorProto.FLOAT if elem_type == TensorProto.BFLOAT16 else elem_type


def promote(g: GraphBuilder, x, y) -> int:
    """Element type torch computes ``x op y`` in (torch.result_type on samples)."""

    def sample(v):
        if not isinstance(v, str):
            return v
        dtype = onnx_dtype_to_torch(g.get_type(v))
        rank = g.get_rank(v)
        return torch.zeros((1,) * (1 if rank is None else rank), dtype=dtype)

    return torch_dtype_to_onnx(torch.result_type(sample(x), sample(y)))


def binary(g: GraphBuilder, op: str, x, y, compute_type: int | None = None, *, ctx: NodeContext):
    """Binary ONNX op on inputs cast to the output type (or ``compute_type``)."""
    t = compute_type or ctx.dtype()
    return getattr(g.op, op)(cast_to(g, x, t), cast_to(g, y, t))


def as_tensor(g: GraphBuilder, x, elem_type: int | None = None) -> str:
    """A name for ``x``: names pass through, scalars become constants."""
    if isinstance(x, str):
        return x if elem_type is None else cast_to(g, x, elem_type)
    return cast_to(g, x, elem_type or (TensorProto.FLOAT if isinstance(x, float) else INT64))


def shape_tensor(g: GraphBuilder, dims) -> str:
    """1-D int64 tensor from a list of ints and names of int64 scalars (SymInt)."""
    if all(isinstance(d, int) for d in dims):
        return g.make_constant(i64(dims))
    parts = []
    for d in dims:
        if isinstance(d, int):
            parts.append(g.make_constant(i64([d])))
        else:
            d = cast_to(g, d, INT64)
            rank = g.get_rank(d)
            parts.append(d if rank == 1 else g.op.Reshape(d, i64([1])))
    return g.op.Concat(*parts, axis=0)


def axes_tensor(g: GraphBuilder, axes) -> str:
    """Constant 1-D int64 tensor of axes."""
    if isinstance(axes, int):
        axes = [axes]
    return g.make_constant(i64(list(axes)))


def rank_of(g: GraphBuilder, x: str) -> int:
    rank = g.get_rank(x)
    if rank is None:
        raise UnsupportedOpError(f"the rank of {x!r} is unknown")
    return rank


def onnx_dtype(dtype: torch.dtype | None, default: int) -> int:
    """ONNX element type of an optional torch dtype argument."""
    return default if dtype is None else torch_dtype_to_onnx(dtype)


def identity(g: GraphBuilder, x: str) -> str:
    return g.op.Identity(x)
