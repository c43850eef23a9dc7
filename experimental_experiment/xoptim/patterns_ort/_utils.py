"""Helpers shared by the onnxruntime patterns."""

from __future__ import annotations

from typing import TypeGuard

from onnx import NodeProto, TensorProto

from ...xbuilder import GraphBuilder
from ...xbuilder.graph_utils import constant_value
from ..matcher import attribute_value, graph_index

#: domain of onnxruntime's contrib operators
MS = "com.microsoft"
#: element types onnxruntime's CPU contrib kernels take (float32, float16)
ORT_FLOATS = frozenset({TensorProto.FLOAT, TensorProto.FLOAT16})


def scalar_value(g: GraphBuilder, name: str) -> float | None:
    """The value of a constant holding one element, None otherwise."""
    value = constant_value(g, name, 1)
    return None if value is None or value.size != 1 else float(value.reshape(-1)[0])


def is_op(
    node: NodeProto | None, op_type: str | tuple[str, ...], domain: str = ""
) -> TypeGuard[NodeProto]:
    """Tells if ``node`` is one of ``op_type`` in ``domain`` (None is none of them)."""
    types = (op_type,) if isinstance(op_type, str) else op_type
    return node is not None and node.op_type in types and node.domain == domain


def swaps_last_two(node: NodeProto, rank: int | None) -> bool:
    """True for a Transpose which only swaps its last two axes."""
    perm = attribute_value(node, "perm")
    if rank is None or rank < 2:
        return False
    if perm is None:  # reverses every axis
        return rank == 2
    return list(perm) == [*range(rank - 2), rank - 1, rank - 2]


def used_before(g: GraphBuilder, name: str, anchor: NodeProto, inside: list[NodeProto]) -> bool:
    """True if a node outside ``inside`` placed before ``anchor`` uses ``name``: the
    engine inserts the replacement where ``anchor`` is, such a consumer would come
    before the new producer of ``name``."""
    index = graph_index(g)
    limit = index.position(anchor)
    return any(
        index.position(c) < limit and not any(c is n for n in inside)
        for c in index.consumers.get(name, ())
    )


def last_dim_vector(g: GraphBuilder, x: str, v: str) -> bool:
    """True when ``v`` is 1-D and its size is the last dimension of ``x``."""
    sx, sv = g.get_shape(x), g.get_shape(v)
    return (
        sx is not None
        and sv is not None
        and len(sv) == 1
        and len(sx) >= 1
        and sx[-1] is not None
        and sv[0] == sx[-1]
    )
