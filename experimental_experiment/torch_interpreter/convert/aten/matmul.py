"""Matrix products: mm, bmm, addmm, matmul, linear, baddbmm, dot, einsum."""

from __future__ import annotations

from typing import Sequence

from onnx import TensorProto

from ....xbuilder import GraphBuilder
from ..node_context import NodeContext
from ..registry import converter
from ._helpers import aten, cast_to


@converter(
    aten.mm.default, aten.bmm.default, aten.matmul.default, aten.dot.default, aten.mv.default
)
def aten_matmul(g: GraphBuilder, x: str, y: str) -> str:
    """matmul(Tensor self, Tensor other) -> Tensor"""
    return g.op.MatMul(x, y)


@converter(aten.t.default, aten.numpy_T.default)
def aten_t(g: GraphBuilder, x: str) -> str:
    """t(Tensor self) -> Tensor (2-D transposed, 0-D and 1-D unchanged)"""
    rank = g.get_rank(x)
    if rank is not None and rank < 2:
        return g.op.Identity(x)
    return g.op.Transpose(x, perm=list(reversed(range(rank))))


@converter(aten.linear.default)
def aten_linear(g: GraphBuilder, x: str, weight: str, bias: str | None = None) -> str:
    """linear(Tensor input, Tensor weight, Tensor? bias=None) -> Tensor"""
    if g.get_rank(x) == 2 and g.get_rank(weight) == 2:
        return g.op.Gemm(x, weight, bias, transB=1) if bias else g.op.Gemm(x, weight, transB=1)
    wt = g.op.Transpose(weight, perm=[1, 0]) if g.get_rank(weight) == 2 else weight
    y = g.op.MatMul(x, wt)
    return g.op.Add(y, bias) if bias else y


@converter(aten.addmm.default)
def aten_addmm(
    g: GraphBuilder,
    bias: str,
    x: str,
    y: str,
    *,
    beta: float | str = 1,
    alpha: float | str = 1,
    ctx: NodeContext,
):
    """addmm(Tensor self, Tensor mat1, Tensor mat2, *, Scalar beta=1, Scalar alpha=1)"""
    if g.get_type(x) not in (1, 10, 11, 16):  # Gemm has float kernels only
        return aten_baddbmm(g, bias, x, y, beta=beta, alpha=alpha, ctx=ctx)
    return g.op.Gemm(x, y, bias, alpha=float(alpha), beta=float(beta))


@converter(aten.baddbmm.default, aten.addbmm.default)
def aten_baddbmm(
    g: GraphBuilder,
    bias: str,
    x: str,
    y: str,
    *,
    beta: float | str = 1,
    alpha: float | str = 1,
    ctx: NodeContext,
):
    """baddbmm(Tensor self, Tensor batch1, Tensor batch2, *, Scalar beta=1, Scalar alpha=1)"""
    prod = g.op.MatMul(x, y)
    if ctx.node.target == aten.addbmm.default:
        prod = g.op.ReduceSum(prod, [0], keepdims=0)
    if alpha != 1:
        prod = g.op.Mul(prod, cast_to(g, alpha, g.get_type(prod)))
    if beta == 0:
        return prod
    if beta != 1:
        bias = g.op.Mul(bias, cast_to(g, beta, g.get_type(bias)))
    return g.op.Add(prod, bias)


@converter(aten.addmv.default)
def aten_addmv(
    g: GraphBuilder,
    bias: str,
    mat: str,
    vec: str,
    *,
    beta: float | str = 1,
    alpha: float | str = 1,
    ctx: NodeContext,
):
    """addmv(Tensor self, Tensor mat, Tensor vec, *, Scalar beta=1, Scalar alpha=1)"""
    return aten_baddbmm(g, bias, mat, vec, beta=beta, alpha=alpha, ctx=ctx)


# onnxruntime's CPU Einsum has no bfloat16 kernel (float, double, float16, int32, int64)
_EINSUM_TYPES = frozenset(
    {
        TensorProto.FLOAT,
        TensorProto.DOUBLE,
        TensorProto.FLOAT16,
        TensorProto.INT32,
        TensorProto.INT64,
    }
)


@converter(aten.einsum.default)
def aten_einsum(
    g: GraphBuilder,
    equation: str,
    tensors: Sequence[str],
    *,
    path: Sequence[int] | None = None,
    ctx: NodeContext,
) -> str:
    """einsum(str equation, Tensor[] tensors, *, int[]? path=None) -> Tensor

    One ONNX Einsum (same equation syntax: letters, ``...``, implicit output); the
    contraction order ``path`` is left to the runtime. Types without an Einsum kernel
    in onnxruntime are computed in float32 (bfloat16) or int64 (other integers, bool)."""
    t = ctx.dtype()
    if t in _EINSUM_TYPES:
        compute = t
    else:
        compute = TensorProto.FLOAT if t == TensorProto.BFLOAT16 else TensorProto.INT64
    eq = equation.replace(" ", "")
    y = g.op.Einsum(*[cast_to(g, x, compute) for x in tensors], equation=eq)
    return cast_to(g, y, t)
