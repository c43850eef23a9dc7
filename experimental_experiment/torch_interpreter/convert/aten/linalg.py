"""Linear algebra with no ONNX operator: det, slogdet, inv, solve, cholesky, ...

Composition in standard ONNX ops (no contrib op): Gauss-Jordan elimination with
partial pivoting, unrolled over the ``n`` columns of the matrix, so ``n`` (the last two
dimensions) must be static; batch dimensions may be dynamic. A row swap is a product
with a one-hot permutation matrix (exact); a zero pivot (singular matrix) is replaced
by one so that the determinant is zero and nothing divides by zero there.
Cholesky is unrolled column by column the same way.
"""

from __future__ import annotations

import numpy as np

from ....xbuilder import GraphBuilder
from ....xbuilder.dtypes import onnx_to_np_dtype
from ...errors import UnsupportedOpError
from ..registry import converter
from ._helpers import aten, rank_of

_I64 = np.int64


def _n(g: GraphBuilder, a: str) -> int:
    """Static matrix size, 0 for an empty batch too (nothing to eliminate then,
    and onnxruntime's ArgMax mishandles empty batches)."""
    shape = g.get_shape(a)
    if shape is None or not isinstance(shape[-1], int):
        raise UnsupportedOpError("linear algebra needs a static matrix size")
    if any(d == 0 for d in shape[:-2]):
        return 0
    return shape[-1]


def _const(g: GraphBuilder, a: str, value) -> str:
    return g.make_constant(np.asarray(value, dtype=onnx_to_np_dtype(g.get_type(a))))


def _col(g: GraphBuilder, m: str, k: int) -> str:
    """m[..., :, k:k+1]"""
    return g.op.Slice(m, np.array([k], _I64), np.array([k + 1], _I64), np.array([-1], _I64))


def _row(g: GraphBuilder, m: str, k: int) -> str:
    """m[..., k:k+1, :]"""
    return g.op.Slice(m, np.array([k], _I64), np.array([k + 1], _I64), np.array([-2], _I64))


def _unit(g: GraphBuilder, a: str, n: int, k: int) -> str:
    """Boolean column [n, 1], True at row k."""
    return g.make_constant((np.arange(n) == k).reshape((n, 1)))


def gauss_jordan(g: GraphBuilder, a: str, b: str | None, n: int):
    """Eliminates ``a`` [..., n, n]; returns (det, x) where ``x`` solves ``a x = b``
    (None when b is None)."""
    det = None
    rows = np.arange(n, dtype=_I64)
    for k in range(n):
        # partial pivoting: the largest |a[i, k]| for i >= k
        below = g.op.Slice(
            _col(g, a, k), np.array([k], _I64), np.array([n], _I64), np.array([-2], _I64)
        )
        p = g.op.Add(g.op.ArgMax(g.op.Abs(below), axis=-2, keepdims=1), np.array(k, _I64))
        if k < n - 1:
            # permutation vector: swap rows k and p
            perm = g.op.Where(
                g.op.Equal(rows.reshape((n, 1)), np.array(k, _I64)),
                p,
                g.op.Where(
                    g.op.Equal(rows.reshape((n, 1)), p), np.array(k, _I64), rows.reshape((n, 1))
                ),
            )
            pmat = g.op.Cast(g.op.Equal(perm, rows.reshape((1, n))), to=g.get_type(a))
            a = g.op.MatMul(pmat, a)
            if b is not None:
                b = g.op.MatMul(pmat, b)
            sign = g.op.Where(g.op.Equal(p, np.array(k, _I64)), _const(g, a, 1), _const(g, a, -1))
        pivot = g.op.Slice(
            _row(g, a, k), np.array([k], _I64), np.array([k + 1], _I64), np.array([-1], _I64)
        )
        term = g.op.Mul(pivot, sign) if k < n - 1 else pivot
        det = term if det is None else g.op.Mul(det, term)
        safe = g.op.Where(g.op.Equal(pivot, _const(g, a, 0)), _const(g, a, 1), pivot)
        is_k = _unit(g, a, n, k)
        factors = g.op.Where(is_k, _const(g, a, 0), _col(g, a, k))
        row_a = g.op.Div(_row(g, a, k), safe)
        a = g.op.Where(is_k, row_a, g.op.Sub(a, g.op.Mul(factors, row_a)))
        if b is not None:
            row_b = g.op.Div(_row(g, b, k), safe)
            b = g.op.Where(is_k, row_b, g.op.Sub(b, g.op.Mul(factors, row_b)))
    det = g.op.Squeeze(det, np.array([-2, -1], _I64))
    return det, b


def _batch_ones(g: GraphBuilder, a: str) -> str:
    """ones of a's batch shape (the determinant of empty matrices)."""
    shape = g.op.Shape(a, start=0, end=-2)
    return g.op.Expand(_const(g, a, 1), shape)


def _eye_like(g: GraphBuilder, a: str, n: int) -> str:
    eye = _const(g, a, np.eye(g.get_shape(a)[-1]))
    return g.op.Expand(eye, g.op.Shape(a))


@converter(aten.linalg_det.default, aten.det.default)
def aten_linalg_det(g: GraphBuilder, a: str) -> str:
    """linalg_det(Tensor A) -> Tensor"""
    n = _n(g, a)
    if n == 0:
        return _batch_ones(g, a)
    return gauss_jordan(g, a, None, n)[0]


@converter(aten.logdet.default)
def aten_logdet(g: GraphBuilder, a: str) -> str:
    """logdet(Tensor self) -> Tensor (nan for a negative determinant)"""
    return g.op.Log(aten_linalg_det(g, a))


@converter(aten.linalg_slogdet.default)
def aten_linalg_slogdet(g: GraphBuilder, a: str) -> tuple[str, str]:
    """linalg_slogdet(Tensor A) -> (Tensor sign, Tensor logabsdet)"""
    det = aten_linalg_det(g, a)
    return g.op.Sign(det), g.op.Log(g.op.Abs(det))


def inverse(g: GraphBuilder, a: str) -> str:
    n = _n(g, a)
    if n == 0:
        return g.op.Identity(a)
    return gauss_jordan(g, a, _eye_like(g, a, n), n)[1]


@converter(aten.linalg_inv.default, aten.inverse.default)
def aten_linalg_inv(g: GraphBuilder, a: str) -> str:
    """linalg_inv(Tensor A) -> Tensor"""
    return inverse(g, a)


@converter(aten.linalg_inv_ex.default)
def aten_linalg_inv_ex(g: GraphBuilder, a: str, *, check_errors: bool = False) -> tuple[str, str]:
    """linalg_inv_ex(Tensor A, *, bool check_errors=False) -> (Tensor inverse, Tensor info)"""
    info = g.op.Cast(g.op.Expand(np.array(0, _I64), g.op.Shape(a, start=0, end=-2)), to=6)
    return inverse(g, a), info


def _transpose(g: GraphBuilder, m: str) -> str:
    rank = rank_of(g, m)
    return g.op.Transpose(m, perm=list(range(rank - 2)) + [rank - 1, rank - 2])


def solve(g: GraphBuilder, a: str, b: str, left: bool = True) -> str:
    """x with a x = b (left) or x a = b; b may be a vector (torch's rules)."""
    n = _n(g, a)
    if not left:
        return _transpose(g, solve(g, _transpose(g, a), _transpose(g, b)))
    ra, rb = rank_of(g, a), rank_of(g, b)
    size = g.get_shape(a)[-1]
    vector = rb == 1 or (rb == ra - 1 and g.get_shape(b)[-1] == size)
    if vector:
        b = g.op.Unsqueeze(b, np.array([-1], _I64))
    # broadcast batch dimensions
    a2 = g.op.Expand(
        a, g.op.Concat(g.op.Shape(b, start=0, end=-2), np.array([size, size], _I64), axis=0)
    )
    b2 = g.op.Expand(
        b, g.op.Concat(g.op.Shape(a2, start=0, end=-2), g.op.Shape(b, start=-2), axis=0)
    )
    x = g.op.Identity(b2) if n == 0 else gauss_jordan(g, a2, b2, n)[1]
    return g.op.Squeeze(x, np.array([-1], _I64)) if vector else x


@converter(aten.linalg_solve.default)
def aten_linalg_solve(g: GraphBuilder, a: str, b: str, *, left: bool = True) -> str:
    """linalg_solve(Tensor A, Tensor B, *, bool left=True) -> Tensor"""
    return solve(g, a, b, left)


@converter(aten.linalg_solve_ex.default)
def aten_linalg_solve_ex(
    g: GraphBuilder, a: str, b: str, *, left: bool = True, check_errors: bool = False
):
    """linalg_solve_ex(Tensor A, Tensor B, *, bool left=True, bool check_errors=False)
    -> (Tensor result, Tensor info)"""
    info = g.op.Cast(g.op.Expand(np.array(0, _I64), g.op.Shape(a, start=0, end=-2)), to=6)
    return solve(g, a, b, left), info


def _triangle(g: GraphBuilder, a: str, upper: bool, unit: bool) -> str:
    t = g.op.Trilu(a, upper=int(upper))
    if unit:
        eye = g.make_constant(np.eye(g.get_shape(a)[-1], dtype=bool))
        t = g.op.Where(eye, _const(g, a, 1), t)
    return t


@converter(aten.linalg_solve_triangular.default)
def aten_linalg_solve_triangular(
    g: GraphBuilder, a: str, b: str, *, upper: bool, left: bool = True, unitriangular: bool = False
) -> str:
    """linalg_solve_triangular(Tensor self, Tensor B, *, bool upper, bool left=True,
    bool unitriangular=False) -> Tensor"""
    return solve(g, _triangle(g, a, upper, unitriangular), b, left)


@converter(aten.triangular_solve.default)
def aten_triangular_solve(
    g: GraphBuilder,
    b: str,
    a: str,
    upper: bool = True,
    transpose: bool = False,
    unitriangular: bool = False,
) -> tuple[str, str]:
    """triangular_solve(Tensor self, Tensor A, bool upper=True, bool transpose=False,
    bool unitriangular=False) -> (Tensor solution, Tensor cloned_coefficient)"""
    t = _triangle(g, a, upper, unitriangular)
    m = _transpose(g, t) if transpose else t
    x = solve(g, m, b)
    return x, g.op.Identity(a)


def cholesky(g: GraphBuilder, a: str, upper: bool = False) -> str:
    """Lower factor L (a = L L^T), column by column."""
    n = _n(g, a)
    if n == 0:
        return g.op.Identity(a)
    low = g.op.Mul(a, _const(g, a, 0))
    for j in range(n):
        # v = a[:, j] - L @ L[j, :]^T
        v = g.op.Sub(_col(g, a, j), g.op.MatMul(low, _transpose(g, _row(g, low, j))))
        d = g.op.Sqrt(
            g.op.Slice(v, np.array([j], _I64), np.array([j + 1], _I64), np.array([-2], _I64))
        )
        below = g.make_constant((np.arange(n) > j).reshape((n, 1)))
        col = g.op.Where(_unit(g, a, n, j), d, g.op.Where(below, g.op.Div(v, d), _const(g, a, 0)))
        onehot = _const(g, a, (np.arange(n) == j).reshape((1, n)))
        low = g.op.Add(low, g.op.Mul(col, onehot))
    return _transpose(g, low) if upper else low


@converter(aten.linalg_cholesky.default, aten.cholesky.default)
def aten_linalg_cholesky(g: GraphBuilder, a, upper=False):
    """linalg_cholesky(Tensor self, *, bool upper=False) -> Tensor"""
    return cholesky(g, a, upper)


@converter(aten.linalg_cholesky_ex.default)
def aten_linalg_cholesky_ex(
    g: GraphBuilder, a: str, *, upper: bool = False, check_errors: bool = False
):
    """linalg_cholesky_ex(Tensor self, *, bool upper=False, bool check_errors=False)
    -> (Tensor L, Tensor info)"""
    info = g.op.Cast(g.op.Expand(np.array(0, _I64), g.op.Shape(a, start=0, end=-2)), to=6)
    return cholesky(g, a, upper), info


def _gram(g: GraphBuilder, factor: str, upper: bool) -> str:
    """L L^T or U^T U."""
    if upper:
        return g.op.MatMul(_transpose(g, factor), factor)
    return g.op.MatMul(factor, _transpose(g, factor))


@converter(aten.cholesky_solve.default)
def aten_cholesky_solve(g: GraphBuilder, b: str, factor: str, upper: bool = False) -> str:
    """cholesky_solve(Tensor self, Tensor input2, bool upper=False) -> Tensor"""
    return solve(g, _gram(g, factor, upper), b)


@converter(aten.cholesky_inverse.default)
def aten_cholesky_inverse(g: GraphBuilder, factor: str, upper: bool = False) -> str:
    """cholesky_inverse(Tensor self, bool upper=False) -> Tensor"""
    return inverse(g, _gram(g, factor, upper))


@converter(aten.linalg_matrix_power.default, aten.matrix_power.default)
def aten_linalg_matrix_power(g: GraphBuilder, a: str, n: int) -> str:
    """linalg_matrix_power(Tensor self, int n) -> Tensor (by repeated squaring)"""
    if n == 0:
        return _eye_like(g, a, _n(g, a))
    if n < 0:
        a, n = inverse(g, a), -n
    result, power = None, a
    while n:
        if n & 1:
            result = power if result is None else g.op.MatMul(result, power)
        n >>= 1
        if n:
            power = g.op.MatMul(power, power)
    return g.op.Identity(result) if result is a else result


@converter(aten.linalg_matrix_exp.default, aten.matrix_exp.default)
def aten_linalg_matrix_exp(g: GraphBuilder, a: str) -> str:
    """linalg_matrix_exp(Tensor self) -> Tensor

    Scaling and squaring in float64 with a fixed scale 2**-12 and a Taylor expansion of
    degree 12, then 12 squarings (accurate for norms up to a few hundreds)."""
    from ._helpers import cast_to

    n = g.get_shape(a)[-1] if g.get_shape(a) else None
    if not isinstance(n, int):
        raise UnsupportedOpError("matrix_exp needs a static matrix size", argument="self")
    t = g.get_type(a)
    x = g.op.Mul(cast_to(g, a, 11), np.array(2.0**-12))
    eye = g.op.Expand(np.eye(n, dtype=np.float64), g.op.Shape(x))
    result, term = eye, eye
    for k in range(1, 13):
        term = g.op.Div(g.op.MatMul(term, x), np.array(float(k)))
        result = g.op.Add(result, term)
    for _ in range(12):
        result = g.op.MatMul(result, result)
    return cast_to(g, result, t)
