"""torch.histogram and torch.histogramdd: counts (or weights, or a density) per bin,
with the bin edges.

torch places an element ``x`` in the bin ``i`` with ``edges[i] <= x < edges[i + 1]``
(the last bin also holds ``x == edges[-1]``) and drops the elements outside
``[edges[0], edges[-1]]`` (NaN included). The converters do the same with a comparison
against every edge, so the bins count exactly what torch counts, then add every
element's weight into its bin (ScatterElements with reduction add).
"""

from __future__ import annotations

from typing import Sequence

import numpy as np

from ....xbuilder import GraphBuilder
from ....xbuilder.dtypes import onnx_to_np_dtype
from ...errors import UnsupportedOpError
from ..registry import converter
from ._helpers import INT64, aten, cast_to

_I64 = np.int64


def _scalar(g: GraphBuilder, v: float, t: int) -> str:
    return cast_to(g, float(v), t)


def _linspace(g: GraphBuilder, lo: str, hi: str, bins: int, t: int) -> str:
    """``bins + 1`` edges from ``lo`` to ``hi`` computed as torch's linspace does:
    the first half from ``lo``, the second half back from ``hi`` (so that the last edge
    is ``hi`` exactly)."""
    steps = bins + 1
    step = g.op.Div(g.op.Sub(hi, lo), _scalar(g, bins, t))
    i = np.arange(steps)
    half = steps // 2
    from_lo = g.op.Add(lo, g.op.Mul(step, cast_to(g, i.astype(np.float64), t)))
    from_hi = g.op.Sub(hi, g.op.Mul(step, cast_to(g, (steps - 1 - i).astype(np.float64), t)))
    return g.op.Where(g.make_constant(i < half), from_lo, from_hi)


def _bin_of(g: GraphBuilder, col: str, edges: str, n_bins: int) -> tuple[str, str]:
    """Bin index ([N, 1] int64) of each value of ``col`` [N, 1] and whether it is
    inside the edges."""
    # number of edges <= x, minus one; x == last edge -> last bin
    above = g.op.Cast(g.op.LessOrEqual(g.op.Unsqueeze(edges, np.array([0], _I64)), col), to=INT64)
    idx = g.op.Sub(g.op.ReduceSum(above, np.array([1], _I64), keepdims=1), np.array(1, _I64))
    idx = g.op.Min(idx, np.array(n_bins - 1, _I64))
    first = g.op.Slice(edges, np.array([0], _I64), np.array([1], _I64))
    last = g.op.Slice(edges, np.array([-1], _I64), np.array([n_bins + 1], _I64))
    inside = g.op.And(g.op.GreaterOrEqual(col, first), g.op.LessOrEqual(col, last))
    return idx, inside


def _widths(g: GraphBuilder, edges: str, n_bins: int) -> str:
    return g.op.Sub(
        g.op.Slice(edges, np.array([1], _I64), np.array([n_bins + 1], _I64)),
        g.op.Slice(edges, np.array([0], _I64), np.array([n_bins], _I64)),
    )


def _histogramdd(
    g: GraphBuilder,
    cols: list[str],
    edges: list[str],
    n_bins: list[int],
    weight,
    density: bool,
    t: int,
) -> str:
    """Histogram of the points whose coordinate ``d`` is ``cols[d]`` ([N, 1] each) over
    the 1-D ``edges[d]`` of ``n_bins[d] + 1`` values: a tensor of shape ``n_bins``."""
    flat, inside, stride = None, None, 1
    for d in reversed(range(len(cols))):
        idx, ins = _bin_of(g, cols[d], edges[d], n_bins[d])
        if stride != 1:
            idx = g.op.Mul(idx, np.array(stride, _I64))
        flat = idx if flat is None else g.op.Add(flat, idx)
        inside = ins if inside is None else g.op.And(inside, ins)
        stride *= n_bins[d]
    if weight is None:
        mass = g.op.Cast(inside, to=t)  # [N, 1]
    else:  # the weights of the dropped elements are never read (NaN included)
        w = g.op.Reshape(cast_to(g, weight, t), np.array([-1, 1], _I64))
        mass = g.op.Where(inside, w, _scalar(g, 0, t))
    zeros = g.make_constant(np.zeros((stride,), dtype=onnx_to_np_dtype(t)))
    flat = g.op.Where(inside, flat, np.array(0, _I64))
    last = np.array([-1], _I64)
    hist = g.op.ScatterElements(
        zeros, g.op.Reshape(flat, last), g.op.Reshape(mass, last), axis=0, reduction="add"
    )
    hist = g.op.Reshape(hist, np.array(n_bins, _I64))
    if density:
        # torch divides by the total, then by each bin's width along every axis
        hist = g.op.Div(hist, g.op.ReduceSum(hist, keepdims=0))
        for d, e in enumerate(edges):
            shape = [1] * len(n_bins)
            shape[d] = -1
            hist = g.op.Div(hist, g.op.Reshape(_widths(g, e, n_bins[d]), np.array(shape, _I64)))
    return hist


def _histogram(g: GraphBuilder, x: str, edges: str, n_bins: int, weight, density: bool):
    """(hist, edges) of the flattened ``x`` over the 1-D ``edges`` of ``n_bins + 1``."""
    col = g.op.Reshape(x, np.array([-1, 1], _I64))
    hist = _histogramdd(g, [col], [edges], [n_bins], weight, density, g.get_type(x))
    return hist, g.op.Identity(edges)


def _range_edges(g: GraphBuilder, values: str, bins: int, lo_hi, t: int) -> str:
    """Edges of ``bins`` equal bins over ``lo_hi`` or the range of ``values``, widened
    by 0.5 on each side when empty (as torch)."""
    if lo_hi is not None and float(lo_hi[0]) != float(lo_hi[1]):
        return _linspace(g, _scalar(g, lo_hi[0], t), _scalar(g, lo_hi[1], t), bins, t)
    if lo_hi is None:
        flat = g.op.Reshape(values, np.array([-1], _I64))
        lo, hi = g.op.ReduceMin(flat, keepdims=0), g.op.ReduceMax(flat, keepdims=0)
        # no value: torch takes [0, 1]
        empty = g.op.Equal(g.op.Size(flat), np.array(0, _I64))
        lo = g.op.Where(empty, _scalar(g, 0, t), lo)
        hi = g.op.Where(empty, _scalar(g, 1, t), hi)
    else:
        lo, hi = _scalar(g, lo_hi[0], t), _scalar(g, lo_hi[1], t)
    same = g.op.Equal(lo, hi)
    lo = g.op.Where(same, g.op.Sub(lo, _scalar(g, 0.5, t)), lo)
    hi = g.op.Where(same, g.op.Add(hi, _scalar(g, 0.5, t)), hi)
    return _linspace(g, lo, hi, bins, t)


@converter(aten.histogram.bin_ct)
def aten_histogram_bin_ct(
    g: GraphBuilder,
    x: str,
    bins: int = 100,
    *,
    range: Sequence[float] | None = None,
    weight: str | None = None,
    density: bool = False,
) -> tuple[str, str]:
    """histogram.bin_ct(Tensor self, int bins=100, *, float[]? range=None,
    Tensor? weight=None, bool density=False) -> (Tensor hist, Tensor bin_edges)"""
    if not isinstance(bins, int):
        raise UnsupportedOpError(
            f"histogram: the number of bins is dynamic ({bins!r}); the output size "
            "would depend on the data, give a Python int as bins"
        )
    edges = _range_edges(g, x, bins, range, g.get_type(x))
    return _histogram(g, x, edges, bins, weight, density)


@converter(aten.histogram.bins_tensor)
def aten_histogram_bins_tensor(
    g: GraphBuilder, x: str, bins: str, *, weight: str | None = None, density: bool = False
) -> tuple[str, str]:
    """histogram.bins_tensor(Tensor self, Tensor bins, *, Tensor? weight=None,
    bool density=False) -> (Tensor hist, Tensor bin_edges)"""
    shape = g.get_shape(bins) if g.has_shape(bins) else None
    if not shape or not isinstance(shape[0], int):
        raise UnsupportedOpError(
            f"histogram: the number of bin edges of {bins!r} is not static "
            f"(shape {shape}); export with a fixed number of edges (a static dimension)"
        )
    return _histogram(g, x, cast_to(g, bins, g.get_type(x)), shape[0] - 1, weight, density)


def _dd_points(g: GraphBuilder, x: str, dims: int) -> list[str]:
    """The coordinates of the points of ``x`` [..., dims]: ``dims`` columns [N, 1]."""
    pts = g.op.Reshape(x, np.array([-1, dims], _I64))
    return [
        g.op.Slice(pts, np.array([d], _I64), np.array([d + 1], _I64), np.array([1], _I64))
        for d in range(dims)
    ]


def _dd_edges(g: GraphBuilder, x: str, bins, range) -> tuple[list[str], list[str]]:
    dims = len(bins)
    cols = _dd_points(g, x, dims)
    t = g.get_type(x)
    edges = [
        _range_edges(
            g, cols[d], int(b), None if range is None else (range[2 * d], range[2 * d + 1]), t
        )
        for d, b in enumerate(bins)
    ]
    return cols, edges


@converter(aten._histogramdd_bin_edges.default)
def aten__histogramdd_bin_edges(
    g: GraphBuilder,
    x: str,
    bins: Sequence[int],
    *,
    range: Sequence[float] | None = None,
    weight: str | None = None,
    density: bool = False,
):
    """_histogramdd_bin_edges(Tensor self, int[] bins, *, float[]? range=None,
    Tensor? weight=None, bool density=False) -> Tensor[]"""
    return tuple(g.op.Identity(e) for e in _dd_edges(g, x, bins, range)[1])


@converter(aten._histogramdd_from_bin_cts.default)
def aten__histogramdd_from_bin_cts(
    g: GraphBuilder,
    x: str,
    bins: Sequence[int],
    *,
    range: Sequence[float] | None = None,
    weight: str | None = None,
    density: bool = False,
) -> str:
    """_histogramdd_from_bin_cts(Tensor self, int[] bins, *, float[]? range=None,
    Tensor? weight=None, bool density=False) -> Tensor"""
    cols, edges = _dd_edges(g, x, bins, range)
    return _histogramdd(g, cols, edges, [int(b) for b in bins], weight, density, g.get_type(x))


@converter(aten._histogramdd_from_bin_tensors.default)
def aten__histogramdd_from_bin_tensors(
    g: GraphBuilder,
    x: str,
    bins: Sequence[str],
    *,
    weight: str | None = None,
    density: bool = False,
) -> str:
    """_histogramdd_from_bin_tensors(Tensor self, Tensor[] bins, *, Tensor? weight=None,
    bool density=False) -> Tensor"""
    t = g.get_type(x)
    n_bins = []
    for e in bins:
        shape = g.get_shape(e) if g.has_shape(e) else None
        if not shape or not isinstance(shape[0], int):
            raise UnsupportedOpError(
                f"histogramdd: the number of bin edges of {e!r} is not static "
                f"(shape {shape}); export with a fixed number of edges"
            )
        n_bins.append(shape[0] - 1)
    cols = _dd_points(g, x, len(bins))
    return _histogramdd(g, cols, [cast_to(g, e, t) for e in bins], n_bins, weight, density, t)
