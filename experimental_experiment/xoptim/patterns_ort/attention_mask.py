"""Proofs about attention masks for the attention fusions: the scalar sizes a mask is
built from, read as linear expressions of the graph's symbolic dimensions, and the
causal structure transformers' mask functions produce (``kv_index <= past + q_index``).

A mask ``M`` used as ``Where(M, scores, -inf)`` is *inside the causal mask* when it is
a conjunction (``And`` nodes) one of whose operands is
``LessOrEqual(Unsqueeze(Range(0, T, 1), [0, 1, 2]), Unsqueeze(Range(0, S, 1) + P, [0, 1, 3]))``
with ``T = P + S``: a fused kernel applying the causal mask itself, with ``M`` given as an
additive bias, computes the same scores.

The padding operand transformers builds reads the 2-D ``attention_mask`` through index
grids, ``GatherND(mask, Concat(batch index grid, kv index grid))`` of shape
``(B, 1, 1, T)``: :class:`GridGatherNDToSlice` replaces it by
``Unsqueeze(Slice(mask, 0, T), [1, 2])`` (one or two kernels instead of a dozen).
"""

from __future__ import annotations

import re

from onnx import NodeProto

from ...xbuilder import GraphBuilder
from ...xbuilder.dtypes import i64
from ...xbuilder.graph_utils import constant_ints
from ..matcher import attribute_value
from ..pattern import Match, MatchResult, Pattern, RewriteOp, RewriteResult
from ._utils import is_op

#: a linear expression: symbol -> coefficient, "" -> constant term
Linear = dict

_SYMBOL = re.compile(r"^[A-Za-z_][A-Za-z_0-9]*$")


def dim_expression(dim: int | str | None) -> Linear | None:
    """A dimension (int, symbol, or a sum such as ``"past+seq"``) as a linear expression."""
    if isinstance(dim, int):
        return {"": dim}
    if not isinstance(dim, str) or not dim:
        return None
    out: Linear = {}
    for term in dim.replace(" ", "").split("+"):
        if term.lstrip("-").isdigit():
            out[""] = out.get("", 0) + int(term)
        elif _SYMBOL.match(term):
            out[term] = out.get(term, 0) + 1
        else:  # anything else is one opaque symbol
            return {dim: 1}
    return out


def _combine(a: Linear, b: Linear, sign: int) -> Linear:
    out = dict(a)
    for k, v in b.items():
        out[k] = out.get(k, 0) + sign * v
    return {k: v for k, v in out.items() if v or k == ""}


def same(a: Linear | None, b: Linear | None) -> bool:
    """True when both expressions are known and equal."""
    if a is None or b is None:
        return False
    return _combine(a, b, -1) in ({}, {"": 0})


def _shape_dim(g: GraphBuilder, node, index: int) -> Linear | None:
    """Dimension ``index`` of the selection ``Shape(x, start, end)`` makes."""
    shape = g.get_shape(node.input[0])
    if shape is None:
        return None
    start = attribute_value(node, "start") or 0
    dims = list(shape)[start : attribute_value(node, "end")] if start >= 0 else None
    if dims is None or not -len(dims) <= index < len(dims):
        return None
    return dim_expression(dims[index])


def scalar_expression(g: GraphBuilder, name: str, depth: int = 0) -> Linear | None:
    """The integer scalar (or one-element tensor) ``name`` as a linear expression of the
    symbolic dimensions: constants, ``Gather(Shape(x), i)``, Add, Sub, and the nodes
    keeping one element (Squeeze, Unsqueeze, Reshape, Identity, Cast to an integer)."""
    if depth > 12:
        return None
    value = constant_ints(g, name, 1)
    if value is not None:
        return {"": value[0]} if len(value) == 1 else None
    node = Pattern.producer(g, name)
    if node is None or node.domain != "":
        return None
    op = node.op_type
    if op in ("Squeeze", "Unsqueeze", "Reshape", "Identity", "Cast"):
        return scalar_expression(g, node.input[0], depth + 1)
    if op in ("Add", "Sub"):
        a = scalar_expression(g, node.input[0], depth + 1)
        b = scalar_expression(g, node.input[1], depth + 1)
        return None if a is None or b is None else _combine(a, b, 1 if op == "Add" else -1)
    if op == "Gather" and (attribute_value(node, "axis") or 0) == 0:
        shape = Pattern.producer(g, node.input[0])
        index = constant_ints(g, node.input[1], 1)
        if is_op(shape, "Shape") and index is not None and len(index) == 1:
            return _shape_dim(g, shape, index[0])
    if op == "Shape":
        start, end = attribute_value(node, "start") or 0, attribute_value(node, "end")
        if end is not None and start >= 0 and end == start + 1:
            return _shape_dim(g, node, 0)
    return None


def _range_from_zero(g: GraphBuilder, name: str) -> Linear | None:
    """The limit of ``Range(0, limit, 1)`` producing ``name``, None otherwise."""
    node = Pattern.producer(g, name)
    if (
        not is_op(node, "Range")
        or constant_ints(g, node.input[0], 1) != [0]
        or constant_ints(g, node.input[2], 1) != [1]
    ):
        return None
    return scalar_expression(g, node.input[1])


def _positions(g: GraphBuilder, name: str, axes: list[int]) -> tuple[Linear, Linear] | None:
    """``(offset, length)`` if ``name`` is Unsqueeze(Range(0, length, 1) + offset, axes)
    (offset 0 without the Add)."""
    unsq = Pattern.producer(g, name)
    if not is_op(unsq, "Unsqueeze") or constant_ints(g, unsq.input[1], 8) != axes:
        return None
    length = _range_from_zero(g, unsq.input[0])
    if length is not None:
        return {"": 0}, length
    add = Pattern.producer(g, unsq.input[0])
    if not is_op(add, "Add"):
        return None
    for r, o in (add.input, add.input[::-1]):
        length = _range_from_zero(g, r)
        offset = scalar_expression(g, o)
        if length is not None and offset is not None:
            return offset, length
    return None


def causal_operand(g: GraphBuilder, name: str) -> tuple[Linear, Linear, Linear] | None:
    """``(past, query length, total length)`` if ``name`` is
    LessOrEqual(kv positions (1, 1, 1, total), past + query positions (1, 1, S, 1))."""
    node = Pattern.producer(g, name)
    if is_op(node, "LessOrEqual"):
        kv_name, q_name = node.input
    elif is_op(node, "GreaterOrEqual"):
        q_name, kv_name = node.input
    else:
        return None
    kv, q = _positions(g, kv_name, [0, 1, 2]), _positions(g, q_name, [0, 1, 3])
    if kv is None or q is None or not same(kv[0], {"": 0}):
        return None
    return q[0], q[1], kv[1]


def conjunction_operands(g: GraphBuilder, name: str, limit: int = 8) -> list[str]:
    """The operands of a tree of And nodes (``[name]`` when it is not an And)."""
    node = Pattern.producer(g, name)
    if not is_op(node, "And") or limit <= 0:
        return [name]
    return [leaf for i in node.input for leaf in conjunction_operands(g, i, limit - 1)]


def prove_causal(
    g: GraphBuilder, mask: str, past: Linear | None, query: Linear | None
) -> str | None:
    """None if ``mask`` is inside the causal mask of a query of ``query`` positions
    after a cache of ``past`` positions, the reason otherwise."""
    if past is None or query is None:
        return "the cache or query lengths are unknown"
    found = [causal_operand(g, leaf) for leaf in conjunction_operands(g, mask)]
    found = [f for f in found if f is not None]
    if not found:
        return "the mask has no operand proven causal (kv_index <= past + q_index)"
    for offset, length, total in found:
        if same(offset, past) and same(length, query) and same(total, _combine(past, query, 1)):
            return None
    return (
        "the causal operand of the mask is not built on the cache length and the "
        "query length of this attention"
    )


def same_dim(g: GraphBuilder, name: str, axis: int, expr: Linear | None, depth: int = 0) -> bool:
    """True if dimension ``axis`` of ``name`` is ``expr``: from the known shape, or the
    sum of the inputs' dimensions when ``name`` is a Concat along ``axis``."""
    shape = g.get_shape(name)
    if shape is not None and same(dim_expression(shape[axis]), expr):
        return True
    node = Pattern.producer(g, name)
    rank = g.get_rank(name)
    if depth > 4 or not is_op(node, "Concat") or rank is None:
        return False
    if attribute_value(node, "axis") % rank != axis % rank:
        return False
    found = [g.get_shape(i) for i in node.input]
    parts = [p for p in found if p is not None]
    if len(parts) != len(found):
        return False
    total: Linear = {"": 0}
    for p in parts:
        e = dim_expression(p[axis])
        if e is None:
            return False
        total = _combine(total, e, 1)
    return same(total, expr)


def shape_pieces(g: GraphBuilder, name: str, depth: int = 0) -> list[Linear | None] | None:
    """The values of a 1-D integer shape tensor as linear expressions: a constant, or
    a Concat of one-element pieces (:func:`scalar_expression` for each)."""
    value = constant_ints(g, name, 16)
    if value is not None:
        return [{"": v} for v in value]
    node = Pattern.producer(g, name)
    if not is_op(node, "Concat") or depth > 2:
        return None
    out: list = []
    for i in node.input:
        value = constant_ints(g, i, 16)
        if value is not None:
            out.extend({"": v} for v in value)
        else:
            out.append(scalar_expression(g, i))
    return out


_ONE: Linear = {"": 1}


def _broadcast(a: Linear | None, b: Linear | None) -> Linear | None:
    """The dimension broadcasting ``a`` and ``b`` gives, None when it is not proven."""
    if same(a, _ONE):
        return b
    if same(b, _ONE) or same(a, b):
        return a
    return None


def shape_expressions(g: GraphBuilder, name: str, depth: int = 0) -> list[Linear | None] | None:
    """The dimensions of ``name``: those of an index grid (:func:`index_grid`), or the
    known shape (None for an unknown dimension)."""
    grid = index_grid(g, name, depth)
    if grid is not None:
        return grid[1]
    shape = g.get_shape(name) if g.has_shape(name) else None
    return None if shape is None else [dim_expression(d) for d in shape]


def _shape_value(g: GraphBuilder, name: str, depth: int) -> list[Linear | None] | None:
    """The values of a 1-D shape tensor: ``Shape(x)`` (every dimension) or a constant or
    a Concat of pieces (:func:`shape_pieces`)."""
    node = Pattern.producer(g, name)
    if is_op(node, "Shape") and not node.attribute:
        return shape_expressions(g, node.input[0], depth + 1)
    return shape_pieces(g, name)


def index_grid(g: GraphBuilder, name: str, depth: int = 0) -> tuple[int, list, str] | None:
    """``(axis, dims, limit)`` when ``name`` holds ``i[axis]`` at every index ``i`` of its
    shape ``dims``: ``Unsqueeze(Range(0, limit, 1), axes)`` (one axis left), or Expand of a
    grid which keeps the length of the grid's axis (broadcast on the others)."""
    node = Pattern.producer(g, name)
    if depth > 8 or node is None:
        return None
    if is_op(node, "Unsqueeze"):
        rng, axes = Pattern.producer(g, node.input[0]), constant_ints(g, node.input[1], 8)
        if not is_op(rng, "Range") or axes is None or _range_from_zero(g, rng.output[0]) is None:
            return None
        rank = len(axes) + 1
        left = sorted(set(range(rank)) - {a % rank for a in axes if -rank <= a < rank})
        if len(left) != 1:
            return None
        limit = rng.input[1]
        dims = [_range_from_zero(g, rng.output[0]) if k == left[0] else _ONE for k in range(rank)]
        return left[0], dims, limit
    if is_op(node, "Expand"):
        grid, target = index_grid(g, node.input[0], depth + 1), None
        if grid is not None:
            target = _shape_value(g, node.input[1], depth)
        if target is None or len(target) < len(grid[1]):
            return None
        shift = len(target) - len(grid[1])
        dims = [_ONE] * shift + grid[1]
        dims = [_broadcast(a, b) for a, b in zip(dims, target)]
        axis = grid[0] + shift
        # the values along the axis stay 0..n-1: the length of the axis is kept
        if any(d is None for d in dims) or not same(dims[axis], grid[1][grid[0]]):
            return None
        return axis, dims, grid[2]
    return None


def _last_unsqueeze(g: GraphBuilder, name: str) -> str | None:
    """x if ``name`` is Unsqueeze(x, [-1]) (a new last axis)."""
    node = Pattern.producer(g, name)
    axes = constant_ints(g, node.input[1], 2) if is_op(node, "Unsqueeze") else None
    rank = g.get_rank(node.input[0]) if axes else None
    return node.input[0] if axes in ([-1], [rank]) and rank is not None else None


class GridGatherNDToSlice(Pattern):
    """GatherND(x, Concat(Unsqueeze(I, [-1]), Unsqueeze(J, [-1]), axis=-1)) for a 2-D x
    and index grids I, J (:func:`index_grid`) of shape ``(1, .., m, .., n, .., 1)``
    holding the positions along the axes of m and n ->
    ``Unsqueeze(Slice(x, [0, 0], [m, n]), the other axes)``: the output holds
    ``x[i, j]`` at position ``(.., i, .., j, ..)`` in both graphs (the Slice is left out
    along an axis whose length is known to be the grid's)."""

    anchor = "GatherND"

    def match(self, g: GraphBuilder, node: NodeProto) -> MatchResult:
        if attribute_value(node, "batch_dims") or g.get_rank(node.input[0]) != 2:
            return None
        cat = self.producer(g, node.input[1])
        rank = g.get_rank(cat.output[0]) if is_op(cat, "Concat") else None
        if (
            rank is None
            or len(cat.input) != 2
            or attribute_value(cat, "axis") not in (-1, rank - 1)
        ):
            return None
        grids = [_last_unsqueeze(g, i) for i in cat.input]
        grids = [index_grid(g, i) if i else None for i in grids]
        if any(gr is None for gr in grids):
            return None
        (p, dims, lim_p), (q, dims_q, lim_q) = grids
        if len(dims) != len(dims_q) or not all(same(a, b) for a, b in zip(dims, dims_q)):
            return self.refuse("the index grids have different shapes")
        if p >= q:
            return self.refuse("the grids do not index rows then columns in the same order")
        if any(not same(d, _ONE) for k, d in enumerate(dims) if k not in (p, q)):
            return self.refuse("the index grids have other dimensions than 1")
        return Match(
            self,
            [node],
            bound=dict(
                x=node.input[0],
                dims=[dims[p], dims[q]],
                limits=[lim_p, lim_q],
                others=[k for k in range(len(dims)) if k not in (p, q)],
            ),
        )

    def apply(self, op: RewriteOp, match: Match) -> RewriteResult:
        g, b = op.g, match.bound
        x, shape = b["x"], g.get_shape(b["x"]) if g.has_shape(b["x"]) else None
        # a slice only along the axes whose length is not known to be the grid's
        axes = [
            k for k in (0, 1) if shape is None or not same(dim_expression(shape[k]), b["dims"][k])
        ]
        if axes:
            ends = [op.Unsqueeze(b["limits"][k], i64([0])) for k in axes]
            end = ends[0] if len(ends) == 1 else op.Concat(*ends, axis=0)
            x = op.Slice(x, i64([0] * len(axes)), end, i64(axes))
        return op.Unsqueeze(x, i64(b["others"]))
