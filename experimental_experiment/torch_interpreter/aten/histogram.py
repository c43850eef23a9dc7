"""torch.histogram: counts (or weights, or a density) per bin, with the bin edges.

torch places an element ``x`` in the bin ``i`` with ``edges[i] <= x < edges[i + 1]``
(the last bin also holds ``x == edges[-1]``) and drops the elements outside
``[edges[0], edges[-1]]`` (NaN included). The converters do the same with a comparison
against every edge, so the bins count exactly what torch counts.
"""

from __future__ import annotations

import numpy as np

from ...xbuilder import GraphBuilder
from ..errors import UnsupportedOpError
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


def _histogram(g: GraphBuilder, x: str, edges: str, n_bins: int, weight, density: bool):
    """(hist, edges) of the flattened ``x`` over the 1-D ``edges`` of ``n_bins + 1``."""
    t = g.get_type(x)
    flat = g.op.Reshape(x, np.array([-1], _I64))
    col = g.op.Unsqueeze(flat, np.array([1], _I64))  # [N, 1]
    # index of the bin: number of edges <= x, minus one; x == last edge -> last bin
    above = g.op.Cast(g.op.LessOrEqual(g.op.Unsqueeze(edges, np.array([0], _I64)), col),
                      to=INT64)
    idx = g.op.Sub(g.op.ReduceSum(above, np.array([1], _I64), keepdims=1),
                   np.array(1, _I64))
    idx = g.op.Min(idx, np.array(n_bins - 1, _I64))
    first = g.op.Slice(edges, np.array([0], _I64), np.array([1], _I64))
    last = g.op.Slice(edges, np.array([-1], _I64), np.array([n_bins + 1], _I64))
    inside = g.op.And(g.op.GreaterOrEqual(col, first), g.op.LessOrEqual(col, last))
    onehot = g.op.And(g.op.Equal(idx, np.arange(n_bins, dtype=_I64).reshape((1, n_bins))),
                      inside)  # [N, bins]
    mass = g.op.Cast(onehot, to=t)
    if weight is not None:
        w = g.op.Reshape(cast_to(g, weight, t), np.array([-1, 1], _I64))
        mass = g.op.Mul(mass, w)
    hist = g.op.ReduceSum(mass, np.array([0], _I64), keepdims=0)
    if density:
        # torch divides by the total, then by each bin's width
        hist = g.op.Div(hist, g.op.ReduceSum(hist, keepdims=0))
        widths = g.op.Sub(g.op.Slice(edges, np.array([1], _I64), np.array([n_bins + 1], _I64)),
                          g.op.Slice(edges, np.array([0], _I64), np.array([n_bins], _I64)))
        hist = g.op.Div(hist, widths)
    return hist, g.op.Identity(edges)


@converter(aten.histogram.bin_ct)
def aten_histogram_bin_ct(g: GraphBuilder, x, bins=100, *, range=None, weight=None,
                          density=False):
    """histogram.bin_ct(Tensor self, int bins=100, *, float[]? range=None,
    Tensor? weight=None, bool density=False) -> (Tensor hist, Tensor bin_edges)"""
    if not isinstance(bins, int):
        raise UnsupportedOpError(
            f"histogram: the number of bins is dynamic ({bins!r}); the output size "
            "would depend on the data, give a Python int as bins")
    t = g.get_type(x)
    if range is not None and float(range[0]) != float(range[1]):
        lo, hi = _scalar(g, range[0], t), _scalar(g, range[1], t)
    else:
        if range is None:
            flat = g.op.Reshape(x, np.array([-1], _I64))
            lo, hi = g.op.ReduceMin(flat, keepdims=0), g.op.ReduceMax(flat, keepdims=0)
        else:
            lo, hi = _scalar(g, range[0], t), _scalar(g, range[1], t)
        # an empty range: torch widens it by 0.5 on each side
        same = g.op.Equal(lo, hi)
        lo = g.op.Where(same, g.op.Sub(lo, _scalar(g, 0.5, t)), lo)
        hi = g.op.Where(same, g.op.Add(hi, _scalar(g, 0.5, t)), hi)
    edges = _linspace(g, lo, hi, bins, t)
    return _histogram(g, x, edges, bins, weight, density)


@converter(aten.histogram.bins_tensor)
def aten_histogram_bins_tensor(g: GraphBuilder, x, bins, *, weight=None, density=False):
    """histogram.bins_tensor(Tensor self, Tensor bins, *, Tensor? weight=None,
    bool density=False) -> (Tensor hist, Tensor bin_edges)"""
    shape = g.get_shape(bins) if g.has_shape(bins) else None
    if not shape or not isinstance(shape[0], int):
        raise UnsupportedOpError(
            f"histogram: the number of bin edges of {bins!r} is not static "
            f"(shape {shape}); export with a fixed number of edges (a static dimension)")
    return _histogram(g, x, cast_to(g, bins, g.get_type(x)), shape[0] - 1, weight, density)
