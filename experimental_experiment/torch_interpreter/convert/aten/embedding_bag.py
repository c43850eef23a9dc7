"""embedding_bag: a lookup then a segment reduction (sum, mean, max) per bag.

Each looked-up row gets the number of its bag (offsets <= position, minus one), rows
equal to ``padding_idx`` are left out, then ScatterElements reduces the rows of each
bag. Only the first output (the bags) is computed; the three others (offset2bag,
bag_size, max_indices, used by the backward) are zeros of the expected type.
"""

from __future__ import annotations

import numpy as np

from ....xbuilder import GraphBuilder
from ...errors import UnsupportedOpError
from ..node_context import NodeContext
from ..registry import converter
from ._helpers import INT64, aten, cast_to

_I64 = np.int64


def _bags(
    g: GraphBuilder,
    weight,
    indices,
    offsets,
    mode,
    per_sample_weights,
    include_last_offset,
    padding_idx,
):
    idx = g.op.Reshape(cast_to(g, indices, INT64), np.array([-1], _I64))
    if g.get_rank(indices) == 2:
        length = g.op.Shape(indices, start=1, end=2)
        pos = g.op.Range(np.array(0, _I64), g.op.Squeeze(g.op.Size(indices)), np.array(1, _I64))
        bag = g.op.Div(pos, length)
        n_bags = g.op.Shape(indices, start=0, end=1)
    else:
        offs = cast_to(g, offsets, INT64)
        if include_last_offset:
            offs = g.op.Slice(offs, np.array([0], _I64), np.array([-1], _I64))
        pos = g.op.Range(np.array(0, _I64), g.op.Squeeze(g.op.Shape(idx)), np.array(1, _I64))
        le = g.op.LessOrEqual(
            g.op.Unsqueeze(offs, np.array([0], _I64)), g.op.Unsqueeze(pos, np.array([1], _I64))
        )
        bag = g.op.Sub(
            g.op.ReduceSum(g.op.Cast(le, to=INT64), np.array([1], _I64), keepdims=0),
            np.array(1, _I64),
        )
        n_bags = g.op.Shape(offs)
    rows = g.op.Gather(weight, idx, axis=0)  # [N, D]
    if per_sample_weights is not None:
        w = g.op.Reshape(per_sample_weights, np.array([-1, 1], _I64))
        rows = g.op.Mul(rows, cast_to(g, w, g.get_type(weight)))
    if padding_idx is not None and padding_idx < 0:  # counted from the end (as torch)
        rows_count = (g.get_shape(weight) or (None,))[0]
        if not isinstance(rows_count, int):
            raise UnsupportedOpError(
                "embedding_bag: negative padding_idx, dynamic weight", argument="padding_idx"
            )
        padding_idx += rows_count
    if padding_idx is not None:
        keep = g.op.Not(g.op.Equal(idx, np.array(padding_idx, _I64)))
        bag = g.op.Where(keep, bag, g.op.Squeeze(n_bags))
    # padded rows go to an extra bag dropped at the end
    dim = g.op.Shape(weight, start=1, end=2)
    shape = g.op.Concat(g.op.Add(n_bags, np.array([1], _I64)), dim, axis=0)
    target = g.op.Expand(g.op.Unsqueeze(bag, np.array([1], _I64)), g.op.Shape(rows))
    zeros = g.op.Expand(g.op.CastLike(np.array(0, np.float32), weight), shape)
    if mode == 2:
        low = g.op.CastLike(np.array(-np.inf, np.float32), weight)
        start = g.op.Expand(low, shape)
        res = g.op.ScatterElements(start, target, rows, axis=0, reduction="max")
        res = g.op.Where(g.op.Equal(res, low), zeros, res)
    else:
        res = g.op.ScatterElements(zeros, target, rows, axis=0, reduction="add")
        if mode == 1:
            ones = g.op.Expand(g.op.CastLike(np.array(1, np.float32), weight), g.op.Shape(rows))
            count = g.op.ScatterElements(zeros, target, ones, axis=0, reduction="add")
            res = g.op.Div(res, g.op.Max(count, g.op.CastLike(np.array(1, np.float32), weight)))
    return g.op.Slice(res, np.array([0], _I64), n_bags, np.array([0], _I64))


def _zeros_like_output(g: GraphBuilder, i: int, *, ctx: NodeContext) -> str:
    shape = ctx.shape(i)
    if not all(isinstance(d, int) for d in shape):
        raise UnsupportedOpError("embedding_bag: dynamic shapes of the extra outputs")
    return g.make_constant(np.zeros(shape, dtype=np.int64))


@converter(
    aten.embedding_bag.padding_idx,
    aten._embedding_bag_forward_only.default,
    aten._embedding_bag.default,
    aten.embedding_bag.default,
)
def aten_embedding_bag(
    g: GraphBuilder,
    weight,
    indices,
    offsets,
    scale_grad_by_freq=False,
    mode=0,
    sparse=False,
    per_sample_weights=None,
    include_last_offset=False,
    padding_idx=None,
    *,
    ctx: NodeContext,
):
    """embedding_bag.padding_idx(Tensor weight, Tensor indices, Tensor offsets,
    bool scale_grad_by_freq, int mode, bool sparse, Tensor? per_sample_weights,
    bool include_last_offset, int? padding_idx) -> (Tensor, Tensor, Tensor, Tensor)"""
    out = _bags(
        g, weight, indices, offsets, mode, per_sample_weights, include_last_offset, padding_idx
    )
    return (out, *(_zeros_like_output(g, i, ctx=ctx) for i in (1, 2, 3)))
