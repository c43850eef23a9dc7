"""Proofs about attention masks for the attention fusions: the scalar sizes a mask is
built from, read as linear expressions of the graph's symbolic dimensions, and the
causal structure transformers' mask functions produce (``kv_index <= past + q_index``).

A mask ``M`` used as ``Where(M, scores, -inf)`` is *inside the causal mask* when it is
a conjunction (``And`` nodes) one of whose operands is
``LessOrEqual(Unsqueeze(Range(0, T, 1), [0, 1, 2]), Unsqueeze(Range(0, S, 1) + P, [0, 1, 3]))``
with ``T = P + S``: a fused kernel applying the causal mask itself, with ``M`` given as an
additive bias, computes the same scores.
"""

from __future__ import annotations

import re

from ...xbuilder.graph_utils import constant_ints
from ..matcher import attribute_value
from ..pattern import Pattern
from ._utils import is_op

#: a linear expression: symbol -> coefficient, "" -> constant term
Linear = dict

_SYMBOL = re.compile(r"^[A-Za-z_][A-Za-z_0-9]*$")


def dim_expression(dim) -> Linear | None:
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


def _shape_dim(g, node, index: int) -> Linear | None:
    """Dimension ``index`` of the selection ``Shape(x, start, end)`` makes."""
    shape = g.get_shape(node.input[0])
    if shape is None:
        return None
    start = attribute_value(node, "start") or 0
    dims = list(shape)[start:attribute_value(node, "end")] if start >= 0 else None
    if dims is None or not -len(dims) <= index < len(dims):
        return None
    return dim_expression(dims[index])


def scalar_expression(g, name: str, depth: int = 0) -> Linear | None:
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


def _range_from_zero(g, name: str) -> Linear | None:
    """The limit of ``Range(0, limit, 1)`` producing ``name``, None otherwise."""
    node = Pattern.producer(g, name)
    if not is_op(node, "Range") or constant_ints(g, node.input[0], 1) != [0] \
            or constant_ints(g, node.input[2], 1) != [1]:
        return None
    return scalar_expression(g, node.input[1])


def _positions(g, name: str, axes: list[int]) -> tuple[Linear, Linear] | None:
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


def causal_operand(g, name: str) -> tuple[Linear, Linear, Linear] | None:
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


def conjunction_operands(g, name: str, limit: int = 8) -> list[str]:
    """The operands of a tree of And nodes (``[name]`` when it is not an And)."""
    node = Pattern.producer(g, name)
    if not is_op(node, "And") or limit <= 0:
        return [name]
    return [leaf for i in node.input for leaf in conjunction_operands(g, i, limit - 1)]


def prove_causal(g, mask: str, past: Linear | None, query: Linear | None) -> str | None:
    """None if ``mask`` is inside the causal mask of a query of ``query`` positions
    after a cache of ``past`` positions, the reason otherwise."""
    if past is None or query is None:
        return "the cache or query lengths are unknown"
    found = [causal_operand(g, leaf) for leaf in conjunction_operands(g, mask)]
    found = [f for f in found if f is not None]
    if not found:
        return "the mask has no operand proven causal (kv_index <= past + q_index)"
    for offset, length, total in found:
        if same(offset, past) and same(length, query) \
                and same(total, _combine(past, query, 1)):
            return None
    return ("the causal operand of the mask is not built on the cache length and the "
            "query length of this attention")


def same_dim(g, name: str, axis: int, expr: Linear | None, depth: int = 0) -> bool:
    """True if dimension ``axis`` of ``name`` is ``expr``: from the known shape, or the
    sum of the inputs' dimensions when ``name`` is a Concat along ``axis``."""
    shape = g.get_shape(name)
    if shape is not None and same(dim_expression(shape[axis]), expr):
        return True
    node = Pattern.producer(g, name)
    if depth > 4 or not is_op(node, "Concat") or g.get_rank(name) is None:
        return False
    rank = g.get_rank(name)
    if attribute_value(node, "axis") % rank != axis % rank:
        return False
    parts = [g.get_shape(i) for i in node.input]
    if any(p is None for p in parts):
        return False
    total: Linear = {"": 0}
    for p in parts:
        e = dim_expression(p[axis])
        if e is None:
            return False
        total = _combine(total, e, 1)
    return same(total, expr)


def shape_pieces(g, name: str, depth: int = 0) -> list[Linear | None] | None:
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
