"""Antialiased bilinear and bicubic upsampling (``F.interpolate(..., antialias=True)``).

ONNX Resize's ``antialias`` does not place its filter as torch does when downsampling,
so the result is two matrix products, ``Wh @ x @ Ww^T``, with torch's weights computed
at export time: a triangle (bilinear) or Keys cubic with a = -0.5 (bicubic) filter
widened by the scale when downsampling, each output's weights normalized to sum to 1.
The weights are constants when the spatial sizes are static, computed in the graph
(float64) when they are dynamic.
"""

from __future__ import annotations

from typing import Sequence

import numpy as np
from onnx import TensorProto

from ....xbuilder import GraphBuilder
from ....xbuilder.dtypes import onnx_to_np_dtype
from ..registry import converter
from ._helpers import aten, cast_to, compute_type, rank_of


def _triangle(x: np.ndarray) -> np.ndarray:
    return np.maximum(0.0, 1.0 - np.abs(x))


def _cubic(x: np.ndarray, a: float = -0.5) -> np.ndarray:
    x = np.abs(x)
    near = ((a + 2) * x - (a + 3)) * x * x + 1
    far = (((x - 5) * x + 8) * x - 4) * a
    return np.where(x < 1, near, np.where(x < 2, far, 0.0))


# mode -> (filter, half width of its support)
_FILTERS = {"linear": (_triangle, 1.0), "cubic": (_cubic, 2.0)}


def aa_weights(
    n_in: int, n_out: int, align_corners: bool, scale: float | None = None, mode: str = "linear"
) -> np.ndarray:
    """``[n_out, n_in]`` weights of torch's antialiased interpolation on one axis
    (``scale`` is the optional scale factor given to interpolate)."""
    filt, half = _FILTERS[mode]
    if align_corners:
        ratio = (n_in - 1) / (n_out - 1) if n_out > 1 else 0.0
    else:
        ratio = 1.0 / scale if scale else n_in / n_out
    support = half * ratio if ratio >= 1.0 else half  # in inputs
    inv = 1.0 / ratio if ratio >= 1.0 else 1.0
    a = np.zeros((n_out, n_in), dtype=np.float64)
    for i in range(n_out):
        center = ratio * (i + 0.5)
        lo = max(int(center - support + 0.5), 0)
        hi = min(int(center + support + 0.5), n_in)
        w = filt((np.arange(lo, hi) - center + 0.5) * inv)
        total = w.sum()
        a[i, lo:hi] = w / total if total != 0 else w
    return a


def _filter(g: GraphBuilder, x: str, mode: str) -> str:
    """The filter of ``mode`` applied to the float64 tensor ``x``."""
    one = np.array(1.0)
    ax = g.op.Abs(x)
    if mode == "linear":
        return g.op.Max(g.op.Sub(one, ax), np.array(0.0))
    a = -0.5
    near = g.op.Add(
        g.op.Mul(g.op.Mul(g.op.Sub(g.op.Mul(ax, np.array(a + 2)), np.array(a + 3)), ax), ax), one
    )
    far = g.op.Mul(
        g.op.Sub(
            g.op.Mul(g.op.Add(g.op.Mul(g.op.Sub(ax, np.array(5.0)), ax), np.array(8.0)), ax),
            np.array(4.0),
        ),
        np.array(a),
    )
    return g.op.Where(
        g.op.Less(ax, one), near, g.op.Where(g.op.Less(ax, np.array(2.0)), far, np.array(0.0))
    )


def _runtime_weights(
    g: GraphBuilder, n_in: str, n_out: str, align_corners: bool, scale, mode: str
) -> str:
    """aa_weights computed in the graph (float64) for sizes known at runtime only:
    ``n_in`` and ``n_out`` are 1-D int64 tensors of one element."""
    double = TensorProto.DOUBLE
    fin, fout = g.op.Cast(n_in, to=double), g.op.Cast(n_out, to=double)
    one, half = np.array([1.0]), np.array([0.5])
    if align_corners:
        ratio = g.op.Where(
            g.op.Greater(fout, one),
            g.op.Div(g.op.Sub(fin, one), g.op.Max(g.op.Sub(fout, one), one)),
            np.array([0.0]),
        )
    elif scale:
        ratio = g.make_constant(np.array([1.0 / scale]))
    else:
        ratio = g.op.Div(fin, fout)
    width = _FILTERS[mode][1]
    wide = g.op.GreaterOrEqual(ratio, one)
    support = g.op.Where(wide, g.op.Mul(ratio, np.array([width])), np.array([width]))
    inv = g.op.Where(wide, g.op.Div(one, ratio), one)

    def arange(n):
        r = g.op.Range(
            np.array(0, np.int64), g.op.Squeeze(n, np.array([0], np.int64)), np.array(1, np.int64)
        )
        return g.op.Cast(r, to=double)

    center = g.op.Unsqueeze(
        g.op.Mul(ratio, g.op.Add(arange(n_out), half)), np.array([1], np.int64)
    )  # [n_out, 1]

    def trunc(v):  # C++'s static_cast<int64_t>
        return g.op.Cast(g.op.Cast(v, to=TensorProto.INT64), to=double)

    lo = g.op.Max(trunc(g.op.Add(g.op.Sub(center, support), half)), np.array([0.0]))
    hi = g.op.Min(trunc(g.op.Add(g.op.Add(center, support), half)), fin)
    j = g.op.Unsqueeze(arange(n_in), np.array([0], np.int64))  # [1, n_in]
    inside = g.op.And(g.op.GreaterOrEqual(j, lo), g.op.Less(j, hi))
    arg = g.op.Mul(g.op.Add(g.op.Sub(j, center), half), inv)
    w = g.op.Where(inside, _filter(g, arg, mode), np.array([0.0]))
    total = g.op.ReduceSum(w, np.array([1], np.int64), keepdims=1)
    return g.op.Where(g.op.Equal(total, np.array([0.0])), w, g.op.Div(w, total))


def _axis_weights(
    g: GraphBuilder, x: str, axis: int, n_in, n_out, align_corners: bool, scale, mode: str, ct: int
) -> str:
    """[n_out, n_in] weights of one axis: a constant when both sizes are static."""
    if isinstance(n_in, int) and isinstance(n_out, int):
        w = aa_weights(n_in, n_out, align_corners, scale, mode)
        return g.make_constant(w.astype(onnx_to_np_dtype(ct)))
    size_in = g.op.Shape(x, start=axis, end=axis + 1)
    size_out = (
        np.array([n_out], np.int64)
        if isinstance(n_out, int)
        else g.op.Reshape(cast_to(g, n_out, TensorProto.INT64), np.array([1], np.int64))
    )
    if isinstance(size_out, np.ndarray):
        size_out = g.make_constant(size_out)
    return cast_to(g, _runtime_weights(g, size_in, size_out, align_corners, scale, mode), ct)


def _upsample_aa(g: GraphBuilder, x, output_size, align_corners: bool, scales, mode: str) -> str:
    rank = rank_of(g, x)
    in_dims = list((g.get_shape(x) if g.has_shape(x) else (None,) * rank)[-2:])
    out_dims = list(output_size)
    t = g.get_type(x)
    ct = compute_type(t)
    wh = _axis_weights(g, x, rank - 2, in_dims[0], out_dims[0], align_corners, scales[0], mode, ct)
    ww = _axis_weights(g, x, rank - 1, in_dims[1], out_dims[1], align_corners, scales[1], mode, ct)
    y = g.op.MatMul(wh, cast_to(g, x, ct))
    y = g.op.MatMul(y, g.op.Transpose(ww, perm=[1, 0]))
    return cast_to(g, y, t)


def _vec(g: GraphBuilder, x, output_size, align_corners, scale_factors, mode: str):
    if output_size is None:
        rank = rank_of(g, x)
        shape = list(g.get_shape(x) if g.has_shape(x) else (None,) * rank)
        output_size = []
        for axis, s in zip((rank - 2, rank - 1), scale_factors):
            d = shape[axis]
            if isinstance(d, int):
                output_size.append(int(np.floor(d * s)))
            else:  # floor(size * scale), computed at runtime
                size = g.op.Cast(g.op.Shape(x, start=axis, end=axis + 1), to=TensorProto.DOUBLE)
                output_size.append(
                    g.op.Cast(g.op.Floor(g.op.Mul(size, np.array([s]))), to=TensorProto.INT64)
                )
        return _upsample_aa(g, x, output_size, align_corners, tuple(scale_factors), mode)
    return _upsample_aa(g, x, output_size, align_corners, (None, None), mode)


@converter(aten._upsample_bilinear2d_aa.default)
def aten__upsample_bilinear2d_aa(
    g: GraphBuilder,
    x: str,
    output_size: int | str | Sequence[int | str],
    align_corners: bool,
    scales_h: float | None = None,
    scales_w: float | None = None,
) -> str:
    """_upsample_bilinear2d_aa(Tensor self, SymInt[2] output_size, bool align_corners,
    float? scales_h=None, float? scales_w=None) -> Tensor"""
    return _upsample_aa(g, x, output_size, align_corners, (scales_h, scales_w), "linear")


@converter(aten._upsample_bilinear2d_aa.vec)
def aten__upsample_bilinear2d_aa_vec(
    g: GraphBuilder,
    x: str,
    output_size: Sequence[int | str] | None,
    align_corners: bool,
    scale_factors: Sequence[float] | None,
) -> str:
    """_upsample_bilinear2d_aa.vec(Tensor input, SymInt[]? output_size,
    bool align_corners, float[]? scale_factors) -> Tensor"""
    return _vec(g, x, output_size, align_corners, scale_factors, "linear")


@converter(aten._upsample_bicubic2d_aa.default)
def aten__upsample_bicubic2d_aa(
    g: GraphBuilder,
    x: str,
    output_size: int | str | Sequence[int | str],
    align_corners: bool,
    scales_h: float | None = None,
    scales_w: float | None = None,
) -> str:
    """_upsample_bicubic2d_aa(Tensor self, SymInt[2] output_size, bool align_corners,
    float? scales_h=None, float? scales_w=None) -> Tensor"""
    return _upsample_aa(g, x, output_size, align_corners, (scales_h, scales_w), "cubic")


@converter(aten._upsample_bicubic2d_aa.vec)
def aten__upsample_bicubic2d_aa_vec(
    g: GraphBuilder,
    x: str,
    output_size: Sequence[int | str] | None,
    align_corners: bool,
    scale_factors: Sequence[float] | None,
) -> str:
    """_upsample_bicubic2d_aa.vec(Tensor input, SymInt[]? output_size,
    bool align_corners, float[]? scale_factors) -> Tensor"""
    return _vec(g, x, output_size, align_corners, scale_factors, "cubic")
