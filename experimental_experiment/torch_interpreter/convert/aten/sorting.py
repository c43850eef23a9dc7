"""Sorting and positions: topk, sort, argsort, kthvalue, cumsum, tril/triu, nonzero."""

from __future__ import annotations

import numpy as np
import torch

from ....xbuilder import GraphBuilder
from ....xbuilder.dtypes import i64
from ..node_context import NodeContext
from ..registry import converter
from ._helpers import BOOL, INT64, aten, cast_to, rank_of


def _k(g: GraphBuilder, k) -> str:
    """1-D int64 tensor [k] from an int or a SymInt."""
    if isinstance(k, int):
        return g.make_constant(i64([k]))
    return g.op.Reshape(cast_to(g, k, INT64), i64([1]))


def _dim_size(g: GraphBuilder, x: str, dim: int) -> str:
    dim %= max(rank_of(g, x), 1)
    return g.op.Shape(x, start=dim, end=dim + 1)


@converter(aten.topk.default)
def aten_topk(
    g: GraphBuilder, x: str, k: int | str, dim: int = -1, largest: bool = True, sorted: bool = True
):
    """topk(Tensor self, SymInt k, int dim=-1, bool largest=True, bool sorted=True)"""
    return g.op.TopK(x, _k(g, k), axis=dim, largest=int(largest), sorted=int(sorted), outputs=2)


def _sort(g: GraphBuilder, x, dim, descending):
    # TopK keeps the lower index first among equal values: a stable sort
    return g.op.TopK(
        x, _dim_size(g, x, dim), axis=dim, largest=int(descending), sorted=1, outputs=2
    )


@converter(aten.sort.default)
def aten_sort(g: GraphBuilder, x: str, dim: int = -1, descending: bool = False) -> tuple[str, str]:
    """sort(Tensor self, int dim=-1, bool descending=False) -> (Tensor values, Tensor indices)"""
    return _sort(g, x, dim, descending)


@converter(aten.sort.stable)
def aten_sort_stable(
    g: GraphBuilder, x: str, *, stable: bool | None = None, dim: int = -1, descending: bool = False
):
    """sort.stable(Tensor self, *, bool? stable, int dim=-1, bool descending=False)"""
    return _sort(g, x, dim, descending)


@converter(aten.argsort.default)
def aten_argsort(g: GraphBuilder, x: str, dim: int = -1, descending: bool = False) -> str:
    """argsort(Tensor self, int dim=-1, bool descending=False) -> Tensor"""
    return _sort(g, x, dim, descending)[1]


@converter(aten.argsort.stable)
def aten_argsort_stable(
    g: GraphBuilder, x: str, *, stable: bool, dim: int = -1, descending: bool = False
):
    """argsort.stable(Tensor self, *, bool stable, int dim=-1, bool descending=False)"""
    return _sort(g, x, dim, descending)[1]


@converter(aten.msort.default)
def aten_msort(g: GraphBuilder, x: str) -> str:
    """msort(Tensor self) -> Tensor"""
    return _sort(g, x, 0, False)[0]


@converter(aten.kthvalue.default)
def aten_kthvalue(g: GraphBuilder, x: str, k: int | str, dim: int = -1, keepdim: bool = False):
    """kthvalue(Tensor self, SymInt k, int dim=-1, bool keepdim=False) -> (values, indices)"""
    values, indices = g.op.TopK(x, _k(g, k), axis=dim, largest=0, sorted=1, outputs=2)
    last = i64([-1] if keepdim else -1)
    return g.op.Gather(values, last, axis=dim), g.op.Gather(indices, last, axis=dim)


@converter(aten.cumsum.default)
def aten_cumsum(
    g: GraphBuilder, x: str, dim: int, *, dtype: torch.dtype | None = None, ctx: NodeContext
) -> str:
    """cumsum(Tensor self, int dim, *, ScalarType? dtype=None) -> Tensor"""
    t = ctx.dtype()
    if rank_of(g, x) == 0:
        return cast_to(g, g.op.Identity(x), t)
    return g.op.CumSum(cast_to(g, x, t), i64(dim))


def _trilu(g: GraphBuilder, x, diagonal, upper: int):
    k = i64(diagonal) if isinstance(diagonal, int) else cast_to(g, diagonal, INT64)
    return g.op.Trilu(x, k, upper=upper)


@converter(aten.tril.default)
def aten_tril(g: GraphBuilder, x: str, diagonal: int = 0) -> str:
    """tril(Tensor self, int diagonal=0) -> Tensor"""
    return _trilu(g, x, diagonal, 0)


@converter(aten.triu.default)
def aten_triu(g: GraphBuilder, x: str, diagonal: int = 0) -> str:
    """triu(Tensor self, int diagonal=0) -> Tensor"""
    return _trilu(g, x, diagonal, 1)


@converter(aten.nonzero.default, aten.argwhere.default)
def aten_nonzero(g: GraphBuilder, x: str) -> str:
    """nonzero(Tensor self) -> Tensor (int64 [N, rank])"""
    if rank_of(g, x) == 0:  # [1 if x != 0 else 0, 0]
        k = g.op.Cast(g.op.Cast(x, to=BOOL), to=INT64)
        return g.op.Expand(
            np.zeros((1, 0), dtype=np.int64),
            g.op.Concat(g.op.Reshape(k, i64([1])), i64([0]), axis=0),
        )
    return g.op.Transpose(g.op.NonZero(x), perm=[1, 0])


@converter(aten.where.default, aten.nonzero_numpy.default)
def aten_where_one(g: GraphBuilder, condition: str):
    """where(Tensor condition) -> Tensor[] (one 1-D index tensor per dimension)"""
    if rank_of(g, condition) == 0:  # torch sees a 0-d tensor as a 1-D one
        condition = g.op.Unsqueeze(condition, i64([0]))
    nz = g.op.NonZero(condition)
    return tuple(g.op.Gather(nz, i64(i), axis=0) for i in range(rank_of(g, condition)))
