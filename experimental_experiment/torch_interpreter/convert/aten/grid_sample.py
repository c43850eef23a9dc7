"""3-D grid sampling (``F.grid_sample`` on a 5-D input).

ONNX GridSample takes N-D inputs from opset 20; below, the sampling is composed: the
grid is mapped to input coordinates (with torch's padding modes), then the 8 corners
(trilinear) or the nearest voxel are gathered from the flattened input. The composition
works for any number of spatial axes and keeps every dimension dynamic.
"""

from __future__ import annotations

import itertools

import numpy as np

from ....xbuilder import GraphBuilder
from ...errors import UnsupportedOpError
from ..registry import converter
from ._helpers import INT64, aten, cast_to, compute_type, rank_of
from ._nn_helpers import FLOAT

_I64 = np.int64
_MODES = {0: "linear", 1: "nearest", 2: "cubic"}
_PADDINGS = {0: "zeros", 1: "border", 2: "reflection"}


def _check(interpolation_mode: int, padding_mode: int, spatial: int):
    if interpolation_mode not in (0, 1) or padding_mode not in _PADDINGS:
        raise UnsupportedOpError(
            f"grid_sampler_{spatial}d: interpolation_mode={interpolation_mode} "
            f"({_MODES.get(interpolation_mode, '?')}), padding_mode={padding_mode} is not "
            "supported; torch only allows bilinear (0) and nearest (1) on volumes"
        )


@converter(aten.grid_sampler_3d.default, min_opset=20)
def aten_grid_sampler_3d_opset20(
    g: GraphBuilder,
    x: str,
    grid: str,
    interpolation_mode: int,
    padding_mode: int,
    align_corners: bool,
) -> str:
    """grid_sampler_3d(Tensor input, Tensor grid, int interpolation_mode,
    int padding_mode, bool align_corners) -> Tensor (ONNX GridSample, opset 20)"""
    _check(interpolation_mode, padding_mode, 3)
    return g.op.GridSample(
        x,
        grid,
        mode=_MODES[interpolation_mode],
        padding_mode=_PADDINGS[padding_mode],
        align_corners=int(bool(align_corners)),
    )


def _reflect(g: GraphBuilder, c: str, low: str, high: str) -> str:
    """torch's reflect_coordinates: folds ``c`` into [low / 2, high / 2] (``low`` and
    ``high`` are twice the bounds, one per component)."""
    half = np.array(0.5, dtype=np.float32)
    lo = g.op.Mul(low, half)
    span = g.op.Mul(g.op.Sub(high, low), half)
    a = g.op.Abs(g.op.Sub(c, lo))
    extra = g.op.Mod(a, span, fmod=1)
    flips = g.op.Floor(g.op.Div(a, span))
    even = g.op.Equal(
        g.op.Sub(flips, g.op.Mul(g.op.Floor(g.op.Mul(flips, half)), np.array(2, dtype=np.float32))),
        np.array(0, dtype=np.float32),
    )
    folded = g.op.Where(even, g.op.Add(extra, lo), g.op.Add(g.op.Sub(span, extra), lo))
    # one element (span 0): torch returns 0
    return g.op.Where(
        g.op.Equal(span, np.array(0, dtype=np.float32)), np.array(0, dtype=np.float32), folded
    )


def grid_sample_composed(
    g: GraphBuilder,
    x: str,
    grid: str,
    interpolation_mode: int,
    padding_mode: int,
    align_corners: bool,
) -> str:
    """torch's grid sampling of ``x`` [N, C, *spatial] at ``grid`` [N, *out, spatial]
    (the last axis of the grid lists the coordinates from the last axis of ``x``)."""
    rank = rank_of(g, x)
    spatial = rank - 2
    t = g.get_type(x)
    f32 = FLOAT  # coordinates are computed in float32
    # sizes in the grid's component order: W, H, D
    sizes_i = g.op.Gather(g.op.Shape(x), np.arange(rank - 1, 1, -1, dtype=_I64))
    sizes = g.op.Cast(sizes_i, to=f32)
    one = np.array(1, dtype=np.float32)
    zero = np.array(0, dtype=np.float32)
    c = cast_to(g, grid, f32)
    if align_corners:
        c = g.op.Mul(
            g.op.Mul(g.op.Add(c, one), np.array(0.5, dtype=np.float32)), g.op.Sub(sizes, one)
        )
    else:
        c = g.op.Mul(
            g.op.Sub(g.op.Mul(g.op.Add(c, one), sizes), one), np.array(0.5, dtype=np.float32)
        )
    top = g.op.Sub(sizes, one)
    if padding_mode == 2:
        two = np.array(2, dtype=np.float32)
        if align_corners:
            c = _reflect(g, c, g.op.Mul(sizes, zero), g.op.Mul(top, two))
        else:
            c = _reflect(
                g, c, g.op.Sub(g.op.Mul(sizes, zero), one), g.op.Sub(g.op.Mul(sizes, two), one)
            )
    if padding_mode in (1, 2):
        c = g.op.Min(g.op.Max(c, zero), top)

    # flat index of a voxel: sum(index * strides), strides = 1, W, W * H
    parts, acc = [np.array([1], dtype=_I64)], None
    for k in range(1, spatial):
        size_k = g.op.Slice(sizes_i, np.array([k - 1], dtype=_I64), np.array([k], dtype=_I64))
        acc = size_k if acc is None else g.op.Mul(acc, size_k)
        parts.append(acc)
    strides = g.op.Concat(*parts, axis=0) if spatial > 1 else parts[0]
    x_flat = g.op.Reshape(cast_to(g, x, compute_type(t)), np.array([0, 0, -1], dtype=_I64))
    n_points = g.op.ReduceProd(g.op.Shape(grid, start=1, end=-1), keepdims=1)
    gather_shape = g.op.Concat(g.op.Shape(x, start=0, end=2), n_points, axis=0)

    def sample(idx_f: str) -> tuple[str, str]:
        """Values at integer coordinates ``idx_f`` and whether they are inside."""
        inside = g.op.And(g.op.GreaterOrEqual(idx_f, zero), g.op.LessOrEqual(idx_f, top))
        inside = g.op.ReduceMin(g.op.Cast(inside, to=f32), np.array([-1], dtype=_I64), keepdims=0)
        idx = g.op.Cast(g.op.Min(g.op.Max(idx_f, zero), top), to=INT64)
        flat = g.op.ReduceSum(g.op.Mul(idx, strides), np.array([-1], dtype=_I64), keepdims=0)
        flat = g.op.Reshape(flat, np.array([0, 1, -1], dtype=_I64))  # [N, 1, P]
        vals = g.op.GatherElements(x_flat, g.op.Expand(flat, gather_shape), axis=2)
        return vals, inside

    def spread(w: str) -> str:
        """[N, *out] -> [N, 1, P] to multiply the gathered values."""
        return g.op.Reshape(w, np.array([0, 1, -1], dtype=_I64))

    if interpolation_mode == 1:
        vals, inside = sample(g.op.Round(c))  # round half to even, as torch's nearbyint
        y = g.op.Mul(vals, cast_to(g, spread(inside), compute_type(t)))
    else:
        i0 = g.op.Floor(c)
        frac = g.op.Sub(c, i0)
        y = None
        for bits in itertools.product((0.0, 1.0), repeat=spatial):
            b = np.array(bits, dtype=np.float32)
            # weight of the corner: frac where the bit is 1, 1 - frac where it is 0
            w = g.op.Add(g.op.Mul(frac, b * 2 - 1), one - b)
            vals, inside = sample(g.op.Add(i0, b))
            w = g.op.Mul(g.op.ReduceProd(w, np.array([-1], dtype=_I64), keepdims=0), inside)
            term = g.op.Mul(vals, cast_to(g, spread(w), compute_type(t)))
            y = term if y is None else g.op.Add(y, term)
    final = g.op.Concat(g.op.Shape(x, start=0, end=2), g.op.Shape(grid, start=1, end=-1), axis=0)
    return cast_to(g, g.op.Reshape(y, final), t)


@converter(aten.grid_sampler_3d.default)
def aten_grid_sampler_3d(
    g: GraphBuilder,
    x: str,
    grid: str,
    interpolation_mode: int,
    padding_mode: int,
    align_corners: bool,
) -> str:
    """grid_sampler_3d(Tensor input, Tensor grid, int interpolation_mode,
    int padding_mode, bool align_corners) -> Tensor (composed below opset 20)"""
    _check(interpolation_mode, padding_mode, 3)
    return grid_sample_composed(g, x, grid, interpolation_mode, padding_mode, align_corners)
