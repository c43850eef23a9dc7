"""LU factorization (LAPACK's getrf conventions), unpacking and solving, in ONNX ops.

Partial pivoting unrolled over the ``min(m, n)`` columns (static matrix sizes): the
pivot is the first largest ``|a[i, k]|`` for ``i >= k``, rows are swapped with a
one-hot permutation matrix, multipliers are stored below the diagonal, pivots are
1-based (int32) as LAPACK returns them. Solving rebuilds ``A = P L U`` and runs the
Gauss-Jordan solver of :mod:`.linalg`.
"""

from __future__ import annotations

import numpy as np

from ....xbuilder import GraphBuilder
from ...errors import UnsupportedOpError
from ..registry import converter
from ._helpers import aten
from .linalg import _const, _transpose, solve

_I64 = np.int64
INT32 = 6


def _mn(g: GraphBuilder, a: str) -> tuple[int, int]:
    shape = g.get_shape(a)
    if shape is None or not all(isinstance(d, int) for d in shape[-2:]):
        raise UnsupportedOpError("LU needs static matrix sizes", argument="A")
    return shape[-2], shape[-1]


def lu_factor(g: GraphBuilder, a: str):
    """(LU, pivots int64 0-based [..., k], accumulated permutation matrix Pacc with
    Pacc @ A = L @ U)."""
    m, n = _mn(g, a)
    k_max = min(m, n)
    rows = np.arange(m, dtype=_I64).reshape((m, 1))
    pacc, pivots = None, []
    for k in range(k_max):
        col = g.op.Slice(
            a, np.array([k, k], _I64), np.array([m, k + 1], _I64), np.array([-2, -1], _I64)
        )
        p = g.op.Add(g.op.ArgMax(g.op.Abs(col), axis=-2, keepdims=1), np.array(k, _I64))
        pivots.append(p)
        if k < m - 1:
            perm = g.op.Where(
                g.op.Equal(rows, np.array(k, _I64)),
                p,
                g.op.Where(g.op.Equal(rows, p), np.array(k, _I64), rows),
            )
            pmat = g.op.Cast(g.op.Equal(perm, rows.reshape((1, m))), to=g.get_type(a))
            a = g.op.MatMul(pmat, a)
            pacc = pmat if pacc is None else g.op.MatMul(pmat, pacc)
        pivot = g.op.Slice(
            a, np.array([k, k], _I64), np.array([k + 1, k + 1], _I64), np.array([-2, -1], _I64)
        )
        safe = g.op.Where(g.op.Equal(pivot, _const(g, a, 0)), _const(g, a, 1), pivot)
        below = g.make_constant((np.arange(m) > k).reshape((m, 1)))
        right = g.make_constant((np.arange(n) > k).reshape((1, n)))
        at_k = g.make_constant((np.arange(n) == k).reshape((1, n)))
        colk = g.op.Slice(a, np.array([k], _I64), np.array([k + 1], _I64), np.array([-1], _I64))
        factors = g.op.Where(below, g.op.Div(colk, safe), _const(g, a, 0))  # [..., m, 1]
        rowk = g.op.Where(
            right,
            g.op.Slice(a, np.array([k], _I64), np.array([k + 1], _I64), np.array([-2], _I64)),
            _const(g, a, 0),
        )
        a = g.op.Sub(a, g.op.Mul(factors, rowk))
        a = g.op.Where(g.op.And(below, at_k), factors, a)
    if pivots:
        piv = g.op.Concat(*pivots, axis=-1)  # [..., 1, k]
        piv = g.op.Squeeze(piv, np.array([-2], _I64))
    else:
        piv = None
    return a, piv, pacc


@converter(aten.linalg_lu_factor_ex.default)
def aten_linalg_lu_factor_ex(
    g: GraphBuilder, a: str, *, pivot: bool = True, check_errors: bool = False
):
    """linalg_lu_factor_ex(Tensor A, *, bool pivot=True, bool check_errors=False)
    -> (Tensor LU, Tensor pivots, Tensor info)"""
    if not pivot:
        raise UnsupportedOpError("LU without pivoting", argument="pivot")
    lu, piv, _ = lu_factor(g, a)
    batch = g.op.Shape(a, start=0, end=-2)
    info = g.op.Cast(g.op.Expand(np.array(0, _I64), batch), to=INT32)
    if piv is None:
        piv = g.op.Expand(np.zeros((0,), _I64), g.op.Concat(batch, np.array([0], _I64), axis=0))
    else:
        piv = g.op.Add(piv, np.array(1, _I64))
    return lu, g.op.Cast(piv, to=INT32), info


def _unpack(g: GraphBuilder, lu: str):
    """(L unit lower [m, k], U upper [k, n])."""
    m, n = _mn(g, lu)
    k = min(m, n)
    low = g.op.Slice(lu, np.array([0], _I64), np.array([k], _I64), np.array([-1], _I64))
    low = g.op.Add(g.op.Trilu(low, np.array(-1, _I64), upper=0), _const(g, lu, np.eye(m, k)))
    up = g.op.Slice(lu, np.array([0], _I64), np.array([k], _I64), np.array([-2], _I64))
    return low, g.op.Trilu(up, upper=1)


def _perm_from_pivots(g: GraphBuilder, pivots: str, m: int, like: str) -> str:
    """P = P_1 P_2 ... P_k with P_i swapping i and pivots[i] - 1 (LAPACK)."""
    shape = g.get_shape(pivots)
    k = shape[-1] if shape else None
    if not isinstance(k, int):
        raise UnsupportedOpError("lu_unpack needs a static number of pivots", argument="LU_pivots")
    piv = g.op.Sub(g.op.Cast(pivots, to=7), np.array(1, _I64))
    cols = np.arange(m, dtype=_I64).reshape((1, m))
    pmat = None
    for i in range(k):
        p = g.op.Slice(piv, np.array([i], _I64), np.array([i + 1], _I64), np.array([-1], _I64))
        p = g.op.Unsqueeze(p, np.array([-1], _I64))  # [..., 1, 1]
        rows = np.arange(m, dtype=_I64).reshape((m, 1))
        perm = g.op.Where(
            g.op.Equal(rows, np.array(i, _I64)),
            p,
            g.op.Where(g.op.Equal(rows, p), np.array(i, _I64), rows),
        )
        swap = g.op.Cast(g.op.Equal(perm, cols), to=g.get_type(like))
        pmat = swap if pmat is None else g.op.MatMul(pmat, swap)
    if pmat is None:
        return _const(g, like, np.eye(m))
    return pmat


@converter(aten.lu_unpack.default)
def aten_lu_unpack(
    g: GraphBuilder, lu: str, pivots: str, unpack_data: bool = True, unpack_pivots: bool = True
) -> tuple[str, str, str]:
    """lu_unpack(Tensor LU_data, Tensor LU_pivots, bool unpack_data=True,
    bool unpack_pivots=True) -> (Tensor P, Tensor L, Tensor U)"""
    m, _ = _mn(g, lu)
    low, up = _unpack(g, lu)
    p = _perm_from_pivots(g, pivots, m, lu)
    shape = g.op.Concat(g.op.Shape(lu, start=0, end=-2), np.array([m, m], _I64), axis=0)
    return g.op.Expand(p, shape), low, up


@converter(aten.linalg_lu.default)
def aten_linalg_lu(g: GraphBuilder, a: str, *, pivot: bool = True) -> tuple[str, str, str]:
    """linalg_lu(Tensor A, *, bool pivot=True) -> (Tensor P, Tensor L, Tensor U)"""
    if not pivot:
        raise UnsupportedOpError("LU without pivoting", argument="pivot")
    m, _ = _mn(g, a)
    lu, _, pacc = lu_factor(g, a)
    low, up = _unpack(g, lu)
    shape = g.op.Concat(g.op.Shape(a, start=0, end=-2), np.array([m, m], _I64), axis=0)
    p = _const(g, a, np.eye(m)) if pacc is None else _transpose(g, pacc)
    return g.op.Expand(p, shape), low, up


def _rebuild(g: GraphBuilder, lu: str, pivots: str) -> str:
    m, _ = _mn(g, lu)
    low, up = _unpack(g, lu)
    return g.op.MatMul(_perm_from_pivots(g, pivots, m, lu), g.op.MatMul(low, up))


@converter(aten.linalg_lu_solve.default)
def aten_linalg_lu_solve(
    g: GraphBuilder, lu: str, pivots: str, b: str, *, left: bool = True, adjoint: bool = False
) -> str:
    """linalg_lu_solve(Tensor LU, Tensor pivots, Tensor B, *, bool left=True,
    bool adjoint=False) -> Tensor"""
    a = _rebuild(g, lu, pivots)
    if adjoint:
        a = _transpose(g, a)
    return solve(g, a, b, left)


@converter(aten.lu_solve.default)
def aten_lu_solve(g: GraphBuilder, b: str, lu: str, pivots: str) -> str:
    """lu_solve(Tensor self, Tensor LU_data, Tensor LU_pivots) -> Tensor"""
    return solve(g, _rebuild(g, lu, pivots), b)


@converter(aten.linalg_lu_factor.default)
def aten_linalg_lu_factor(g: GraphBuilder, a: str, *, pivot: bool = True) -> tuple[str, str]:
    """linalg_lu_factor(Tensor A, *, bool pivot=True) -> (Tensor LU, Tensor pivots)"""
    lu, piv, _ = aten_linalg_lu_factor_ex(g, a, pivot=pivot)
    return lu, piv
