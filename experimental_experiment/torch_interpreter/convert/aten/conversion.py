"""Dtype conversions, copies and no-op aliases (clone, detach, contiguous...)."""

from __future__ import annotations

import torch

from ....xbuilder import GraphBuilder
from ....xbuilder.dtypes import i64
from ..node_context import NodeContext
from ..registry import COMPLEX, converter
from ._helpers import aten, cast_to


def cast_to_output(g: GraphBuilder, x, *, ctx: NodeContext) -> str:
    """Casts ``x`` to the dtype torch gives the output, an Identity when it has it."""
    if ctx.torch_dtype().is_complex:  # complex: real pairs (aten/fft.py)
        from .fft import to_complex

        return to_complex(g, x, ctx=ctx)
    y = cast_to(g, x, ctx.dtype())
    return g.op.Identity(y) if y == x else y


@converter(
    aten.clone.default,
    aten.alias.default,
    aten.alias_copy.default,
    aten.detach.default,
    aten.detach_.default,
    aten.detach_copy.default,
    aten.lift_fresh_copy.default,
    aten.lift_fresh.default,
    aten.contiguous.default,
)
def aten_clone(g: GraphBuilder, x: str, *, memory_format: torch.memory_format | None = None) -> str:
    """clone(Tensor self, *, MemoryFormat? memory_format=None) -> Tensor"""
    return g.op.Identity(x)


@converter(aten._to_copy.default, variant=COMPLEX)
@converter(aten._to_copy.default)
def aten__to_copy(
    g: GraphBuilder,
    x: str,
    *,
    dtype: torch.dtype | None = None,
    layout: torch.layout | None = None,
    device: torch.device | str | None = None,
    pin_memory: bool | None = None,
    non_blocking: bool = False,
    memory_format: torch.memory_format | None = None,
    ctx: NodeContext,
) -> str:
    """_to_copy(Tensor self, *, ScalarType? dtype=None, Layout? layout=None,
    Device? device=None, bool? pin_memory=None, bool non_blocking=False,
    MemoryFormat? memory_format=None) -> Tensor"""
    return cast_to_output(g, x, ctx=ctx)


@converter(aten.to.dtype, variant=COMPLEX)
@converter(aten.to.dtype)
def aten_to_dtype(
    g: GraphBuilder,
    x: str,
    dtype: torch.dtype,
    non_blocking: bool = False,
    copy: bool = False,
    memory_format: torch.memory_format | None = None,
    *,
    ctx: NodeContext,
) -> str:
    """to.dtype(Tensor(a) self, ScalarType dtype, bool non_blocking=False,
    bool copy=False, MemoryFormat? memory_format=None) -> Tensor(a)"""
    return cast_to_output(g, x, ctx=ctx)


@converter(aten.to.dtype_layout, variant=COMPLEX)
@converter(aten.to.dtype_layout)
def aten_to_dtype_layout(
    g: GraphBuilder,
    x: str,
    *,
    dtype: torch.dtype | None = None,
    layout: torch.layout | None = None,
    device: torch.device | str | None = None,
    pin_memory: bool | None = None,
    non_blocking: bool = False,
    copy: bool = False,
    memory_format: torch.memory_format | None = None,
    ctx: NodeContext,
) -> str:
    """to.dtype_layout(Tensor(a) self, *, ScalarType? dtype=None, Layout? layout=None,
    Device? device=None, bool? pin_memory=None, bool non_blocking=False, bool copy=False,
    MemoryFormat? memory_format=None) -> Tensor(a)"""
    return cast_to_output(g, x, ctx=ctx)


@converter(aten.to.device, variant=COMPLEX)
@converter(aten.to.device)
def aten_to_device(
    g: GraphBuilder,
    x: str,
    device: torch.device | str,
    dtype: torch.dtype,
    non_blocking: bool = False,
    copy: bool = False,
    memory_format: torch.memory_format | None = None,
    *,
    ctx: NodeContext,
) -> str:
    """to.device(Tensor(a) self, Device device, ScalarType dtype, bool non_blocking=False,
    bool copy=False, MemoryFormat? memory_format=None) -> Tensor(a)"""
    return cast_to_output(g, x, ctx=ctx)


@converter(aten.to.other, aten.type_as.default)
def aten_type_as(g: GraphBuilder, x, other, *args, ctx: NodeContext, **kwargs):
    """type_as(Tensor self, Tensor other) -> Tensor"""
    return cast_to_output(g, x, ctx=ctx)


@converter(aten._assert_tensor_metadata.default)
def aten__assert_tensor_metadata(g: GraphBuilder, x, *args, **kwargs):
    """_assert_tensor_metadata(Tensor a, SymInt[]? size=None, SymInt[]? stride=None,
    ScalarType? dtype=None, *, Device? device=None, Layout? layout=None) -> ()"""
    return None


@converter(aten.copy.default)
def aten_copy(
    g: GraphBuilder, x: str, src: str, non_blocking: bool = False, *, ctx: NodeContext
) -> str:
    """copy(Tensor self, Tensor src, bool non_blocking=False) -> Tensor
    (``src`` broadcast to the shape of ``self`` and cast to its dtype)"""
    y = cast_to(g, src, ctx.dtype())
    shape_x, shape_src = g.get_shape(x), g.get_shape(src)
    if shape_x is not None and shape_x == shape_src:
        return g.op.Identity(y) if y == src else y
    out = ctx.shape(0)
    if all(isinstance(d, int) for d in out):
        return g.op.Expand(y, i64(out))
    return g.op.Expand(y, g.op.Shape(x))
