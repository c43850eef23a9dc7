"""Symmetric eigenvalues, singular values and the pseudo-inverse in ONNX ops.

Cyclic Jacobi rotations in float64, unrolled (``SWEEPS`` sweeps over the pairs
``p < q`` of a static ``n x n`` matrix; batch dimensions broadcast). Each rotation is
a product with a matrix built from one-hot constants, so nothing is data dependent.
Singular values are the square roots of the eigenvalues of ``A^T A`` (or ``A A^T``),
which loses the relative accuracy of singular values far below the largest one (the
absolute error stays near ``1e-8 * sigma_max``). Eigenvectors are only used where their
signs do not matter (pinv): ``linalg.eigh`` and ``linalg.svd`` are not converted.
"""

from __future__ import annotations

import numpy as np

from ....xbuilder import GraphBuilder
from ...errors import UnsupportedOpError
from ..node_context import NodeContext
from ..registry import converter
from ._helpers import aten, cast_to, rank_of

_I64 = np.int64
DOUBLE = 11
SWEEPS = 8


def _c(v) -> np.ndarray:
    return np.asarray(v, dtype=np.float64)


def _transpose(g: GraphBuilder, m: str) -> str:
    r = rank_of(g, m)
    return g.op.Transpose(m, perm=list(range(r - 2)) + [r - 1, r - 2])


def _entry(g: GraphBuilder, a: str, i: int, j: int) -> str:
    return g.op.Slice(
        a, np.array([i, j], _I64), np.array([i + 1, j + 1], _I64), np.array([-2, -1], _I64)
    )


def jacobi(g: GraphBuilder, a: str, n: int, vectors: bool):
    """(eigenvalues [..., n] unsorted, eigenvectors [..., n, n] or None) of a symmetric
    float64 matrix."""
    v = g.op.Expand(_c(np.eye(n)), g.op.Shape(a)) if vectors else None
    for _ in range(SWEEPS):
        for p in range(n):
            for q in range(p + 1, n):
                app, aqq, apq = _entry(g, a, p, p), _entry(g, a, q, q), _entry(g, a, p, q)
                zero = g.op.Equal(apq, _c(0))
                safe = g.op.Where(zero, _c(1), apq)
                tau = g.op.Div(g.op.Sub(aqq, app), g.op.Mul(safe, _c(2)))
                sign = g.op.Where(g.op.Less(tau, _c(0)), _c(-1), _c(1))
                t = g.op.Div(
                    sign, g.op.Add(g.op.Abs(tau), g.op.Sqrt(g.op.Add(_c(1), g.op.Mul(tau, tau))))
                )
                t = g.op.Where(zero, _c(0), t)
                c = g.op.Reciprocal(g.op.Sqrt(g.op.Add(_c(1), g.op.Mul(t, t))))
                s = g.op.Mul(t, c)
                e_diag = np.zeros((n, n))
                e_diag[p, p] = e_diag[q, q] = 1
                e_pq = np.zeros((n, n))
                e_pq[p, q], e_pq[q, p] = 1, -1
                rot = g.op.Add(
                    g.op.Add(_c(np.eye(n)), g.op.Mul(g.op.Sub(c, _c(1)), _c(e_diag))),
                    g.op.Mul(s, _c(e_pq)),
                )
                a = g.op.MatMul(_transpose(g, rot), g.op.MatMul(a, rot))
                if vectors:
                    v = g.op.MatMul(v, rot)
    diag = g.op.ReduceSum(g.op.Mul(a, _c(np.eye(n))), np.array([-1], _I64), keepdims=0)
    return diag, v


def _static_n(g: GraphBuilder, a: str) -> tuple[int, int]:
    shape = g.get_shape(a)
    if shape is None or not all(isinstance(d, int) for d in shape[-2:]):
        raise UnsupportedOpError("eigenvalues need static matrix sizes", argument="self")
    return shape[-2], shape[-1]


def _symmetrize(g: GraphBuilder, a: str, uplo: str) -> str:
    upper = int(uplo.upper() == "U")
    tri = g.op.Trilu(a, upper=upper)
    strict = g.op.Trilu(a, np.array(1 if upper else -1, _I64), upper=upper)
    return g.op.Add(tri, _transpose(g, strict))


def _empty_batch(g: GraphBuilder, a: str) -> bool:
    return any(d == 0 for d in (g.get_shape(a) or ())[:-2])


def _batch_rows(g: GraphBuilder, a: str, k: int) -> str:
    """A [..., k] tensor of a's batch shape (the values of an empty batch)."""
    shape = g.op.Concat(g.op.Shape(a, start=0, end=-2), np.array([k], _I64), axis=0)
    row = g.op.Slice(a, np.array([0, 0], _I64), np.array([1, k], _I64), np.array([-2, -1], _I64))
    return g.op.Reshape(row, shape)


def _empty_values(g: GraphBuilder, a: str) -> str:
    """An empty [..., 0] tensor for empty matrices (onnxruntime's ReduceSum gets the
    shape of empty inputs wrong)."""
    shape = g.op.Concat(g.op.Shape(a, start=0, end=-2), np.array([0], _I64), axis=0)
    return g.op.Reshape(
        g.op.Slice(a, np.array([0], _I64), np.array([0], _I64), np.array([-1], _I64)), shape
    )


def _sorted(g: GraphBuilder, values: str, n: int, largest: bool) -> str:
    return g.op.TopK(
        values, np.array([n], _I64), axis=-1, largest=int(largest), sorted=1, outputs=2
    )[0]


@converter(aten.linalg_eigvalsh.default)
def aten_linalg_eigvalsh(g: GraphBuilder, a: str, UPLO: str = "L", *, ctx: NodeContext) -> str:
    """linalg_eigvalsh(Tensor self, str UPLO="L") -> Tensor (ascending)"""
    _, n = _static_n(g, a)
    if _empty_batch(g, a):
        return cast_to(g, _batch_rows(g, a, n), ctx.dtype())
    if n == 0:
        return cast_to(g, _empty_values(g, a), ctx.dtype())
    sym = _symmetrize(g, cast_to(g, a, DOUBLE), UPLO)
    values, _ = jacobi(g, sym, n, False)
    return cast_to(g, _sorted(g, values, n, False), ctx.dtype())


def _gram(g: GraphBuilder, a: str, m: int, n: int) -> tuple[str, int]:
    """A^T A (n <= m) or A A^T, and its size."""
    at = _transpose(g, a)
    return (g.op.MatMul(at, a), n) if n <= m else (g.op.MatMul(a, at), m)


@converter(aten.linalg_svdvals.default)
def aten_linalg_svdvals(
    g: GraphBuilder, a: str, *, driver: str | None = None, ctx: NodeContext
) -> str:
    """linalg_svdvals(Tensor A, *, str? driver=None) -> Tensor (descending)"""
    m, n = _static_n(g, a)
    gram, k = _gram(g, cast_to(g, a, DOUBLE), m, n)
    if _empty_batch(g, a) and k > 0:
        return cast_to(g, _batch_rows(g, gram, k), ctx.dtype())
    if k == 0:
        return cast_to(g, _empty_values(g, gram), ctx.dtype())
    values, _ = jacobi(g, gram, k, False)
    sigma = g.op.Sqrt(g.op.Max(values, _c(0)))
    return cast_to(g, _sorted(g, sigma, k, True), ctx.dtype())


def _cutoff(g: GraphBuilder, top: str, atol, rtol, default_rtol: float) -> str:
    """max(atol, rtol * sigma_max) with torch's defaults."""

    def as_tensor(v):
        if v is None:
            return None
        if isinstance(v, str):
            return g.op.Unsqueeze(cast_to(g, v, DOUBLE), np.array([-1], _I64))
        return g.make_constant(_c(v))

    atol_t, rtol_t = as_tensor(atol), as_tensor(rtol)
    if rtol_t is None:
        rtol_t = g.make_constant(_c(default_rtol if atol is None else 0.0))
        if atol is not None and not isinstance(atol, str) and atol <= 0:
            rtol_t = g.make_constant(_c(default_rtol))
    cut = g.op.Mul(rtol_t, top)
    return cut if atol_t is None else g.op.Max(atol_t, cut)


@converter(aten.linalg_pinv.atol_rtol_tensor, aten.linalg_pinv.atol_rtol_float)
def aten_linalg_pinv(
    g: GraphBuilder, a, *, atol=None, rtol=None, hermitian=False, ctx: NodeContext
):
    """linalg_pinv.atol_rtol_tensor(Tensor self, *, Tensor? atol=None, Tensor? rtol=None,
    bool hermitian=False) -> Tensor"""
    m, n = _static_n(g, a)
    ad = cast_to(g, a, DOUBLE)
    eps = float(np.finfo(np.float32 if ctx.dtype() == 1 else np.float64).eps)
    if m == 0 or n == 0 or _empty_batch(g, a):
        return cast_to(g, _transpose(g, ad), ctx.dtype())
    if hermitian:
        values, vecs = jacobi(g, _symmetrize(g, ad, "L"), n, True)
        absval = g.op.Abs(values)
        top = g.op.ReduceMax(absval, np.array([-1], _I64), keepdims=1)
        cut = _cutoff(g, top, atol, rtol, eps * n)
        inv = g.op.Where(
            g.op.Greater(absval, cut),
            g.op.Reciprocal(g.op.Where(g.op.Equal(values, _c(0)), _c(1), values)),
            _c(0),
        )
        res = g.op.MatMul(
            g.op.Mul(vecs, g.op.Unsqueeze(inv, np.array([-2], _I64))), _transpose(g, vecs)
        )
        return cast_to(g, res, ctx.dtype())
    gram, k = _gram(g, ad, m, n)
    values, vecs = jacobi(g, gram, k, True)
    sigma = g.op.Sqrt(g.op.Max(values, _c(0)))
    top = g.op.ReduceMax(sigma, np.array([-1], _I64), keepdims=1)
    cut = _cutoff(g, top, atol, rtol, eps * max(m, n))
    inv = g.op.Where(
        g.op.Greater(sigma, cut),
        g.op.Reciprocal(g.op.Where(g.op.Equal(values, _c(0)), _c(1), values)),
        _c(0),
    )
    # (A^T A)^+ A^T  or  A^T (A A^T)^+
    gram_pinv = g.op.MatMul(
        g.op.Mul(vecs, g.op.Unsqueeze(inv, np.array([-2], _I64))), _transpose(g, vecs)
    )
    at = _transpose(g, ad)
    res = g.op.MatMul(gram_pinv, at) if n <= m else g.op.MatMul(at, gram_pinv)
    return cast_to(g, res, ctx.dtype())
