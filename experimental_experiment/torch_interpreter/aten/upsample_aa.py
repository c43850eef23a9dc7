"""Antialiased bilinear and bicubic upsampling (``F.interpolate(..., antialias=True)``).

ONNX Resize's ``antialias`` does not place its filter as torch does when downsampling,
so the result is two matrix products, ``Wh @ x @ Ww^T``, with torch's weights computed
at export time: a triangle (bilinear) or Keys cubic with a = -0.5 (bicubic) filter
widened by the scale when downsampling, each output's weights normalized to sum to 1.
The spatial sizes must be static; batch and channels may be dynamic.
"""

from __future__ import annotations

import numpy as np

from ...xbuilder import GraphBuilder
from ...xbuilder.dtypes import onnx_to_np_dtype
from ..errors import UnsupportedOpError
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


def aa_weights(n_in: int, n_out: int, align_corners: bool, scale: float | None = None,
               mode: str = "linear") -> np.ndarray:
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


def _upsample_aa(g: GraphBuilder, x, output_size, align_corners: bool, scales,
                 mode: str) -> str:
    rank = rank_of(g, x)
    in_dims = list((g.get_shape(x) if g.has_shape(x) else (None,) * rank)[-2:])
    out_dims = list(output_size)
    if not all(isinstance(d, int) for d in in_dims + out_dims):
        raise UnsupportedOpError(
            f"antialiased {mode} upsampling: the spatial sizes must be static, the input has "
            f"{in_dims} and the output {out_dims}; the antialiasing weights are computed at "
            "export time, keep the last two dimensions static in dynamic_shapes")
    t = g.get_type(x)
    ct = compute_type(t)
    np_dtype = onnx_to_np_dtype(ct)
    wh = aa_weights(in_dims[0], out_dims[0], align_corners, scales[0], mode)
    ww = aa_weights(in_dims[1], out_dims[1], align_corners, scales[1], mode)
    y = g.op.MatMul(g.make_constant(wh.astype(np_dtype)), cast_to(g, x, ct))
    y = g.op.MatMul(y, g.make_constant(np.ascontiguousarray(ww.T).astype(np_dtype)))
    return cast_to(g, y, t)


def _vec(g: GraphBuilder, x, output_size, align_corners, scale_factors, mode: str):
    if output_size is None:
        shape = g.get_shape(x) if g.has_shape(x) else None
        if not shape or not all(isinstance(d, int) for d in shape[-2:]):
            raise UnsupportedOpError(
                f"antialiased {mode} upsampling: scale factors on dynamic spatial sizes "
                f"(shape {shape}); keep the last two dimensions static")
        output_size = [int(np.floor(d * s)) for d, s in zip(shape[-2:], scale_factors)]
        return _upsample_aa(g, x, output_size, align_corners, tuple(scale_factors), mode)
    return _upsample_aa(g, x, output_size, align_corners, (None, None), mode)


@converter(aten._upsample_bilinear2d_aa.default)
def aten__upsample_bilinear2d_aa(g: GraphBuilder, x, output_size, align_corners,
                                 scales_h=None, scales_w=None):
    """_upsample_bilinear2d_aa(Tensor self, SymInt[2] output_size, bool align_corners,
    float? scales_h=None, float? scales_w=None) -> Tensor"""
    return _upsample_aa(g, x, output_size, align_corners, (scales_h, scales_w), "linear")


@converter(aten._upsample_bilinear2d_aa.vec)
def aten__upsample_bilinear2d_aa_vec(g: GraphBuilder, x, output_size, align_corners,
                                     scale_factors):
    """_upsample_bilinear2d_aa.vec(Tensor input, SymInt[]? output_size,
    bool align_corners, float[]? scale_factors) -> Tensor"""
    return _vec(g, x, output_size, align_corners, scale_factors, "linear")


@converter(aten._upsample_bicubic2d_aa.default)
def aten__upsample_bicubic2d_aa(g: GraphBuilder, x, output_size, align_corners,
                                scales_h=None, scales_w=None):
    """_upsample_bicubic2d_aa(Tensor self, SymInt[2] output_size, bool align_corners,
    float? scales_h=None, float? scales_w=None) -> Tensor"""
    return _upsample_aa(g, x, output_size, align_corners, (scales_h, scales_w), "cubic")


@converter(aten._upsample_bicubic2d_aa.vec)
def aten__upsample_bicubic2d_aa_vec(g: GraphBuilder, x, output_size, align_corners,
                                    scale_factors):
    """_upsample_bicubic2d_aa.vec(Tensor input, SymInt[]? output_size,
    bool align_corners, float[]? scale_factors) -> Tensor"""
    return _vec(g, x, output_size, align_corners, scale_factors, "cubic")
