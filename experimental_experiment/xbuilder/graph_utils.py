"""Graph walking shared by the builder and the optimizer: the names a node uses
(its subgraphs included), renaming them, removing what no output needs, reading an
attribute or a constant."""

from __future__ import annotations

from typing import Any

import numpy as np
from onnx import AttributeProto, NodeProto, helper


def subgraphs(node: NodeProto):
    """The subgraphs held by the attributes of a node (If, Loop, Scan)."""
    for att in node.attribute:
        if att.type == AttributeProto.GRAPH:
            yield att.g
        elif att.type == AttributeProto.GRAPHS:
            yield from att.graphs


def used_names(node: NodeProto) -> set[str]:
    """Inputs of a node, including names its subgraphs take from the outer scope."""
    names = {i for i in node.input if i}
    for sub in subgraphs(node):
        for n in sub.node:
            names |= used_names(n)
        names |= {o.name for o in sub.output}
    return names


def rename_inputs(node: NodeProto, mapping: dict[str, str]) -> None:
    """Renames inputs of a node and of its subgraphs' nodes (recursively)."""
    for i, name in enumerate(node.input):
        if name in mapping:
            node.input[i] = mapping[name]
    for sub in subgraphs(node):
        for n in sub.node:
            rename_inputs(n, mapping)
        for o in sub.output:
            if o.name in mapping:
                # an outer result returned directly by a branch
                o.name = mapping[o.name]


def subgraph_users(g):
    """Nodes of a builder which hold subgraphs."""
    return [n for n in g.nodes if any(True for _ in subgraphs(n))]


def remove_unused(g, *, keep_initializers: bool = False) -> int:
    """Removes nodes and initializers no graph output depends on (the names a node's
    subgraphs take from the outer scope count as used); ``keep_initializers`` for a
    subgraph builder, which shares the initializers of the main graph."""
    needed = set(g.outputs)
    kept = []
    for node in reversed(g.nodes):
        if any(o in needed for o in node.output if o):
            kept.append(node)
            needed |= used_names(node)
    kept.reverse()
    removed = len(g.nodes) - len(kept)
    g.nodes[:] = kept
    if keep_initializers:
        return removed
    for name in [n for n in g.initializers if n not in needed]:
        g.remove_initializer(name)
    return removed


def attribute_value(node: NodeProto, name: str, default: Any = None) -> Any:
    """Python value of an attribute of ``node`` (strings decoded, repeated fields as
    lists), ``default`` when the node has no such attribute: the one attribute reader."""
    for a in node.attribute:
        if a.name == name:
            v = helper.get_attribute_value(a)
            if isinstance(v, bytes):
                return v.decode()
            if isinstance(v, (list, tuple)) or type(v).__name__ == "RepeatedScalarContainer":
                return [x.decode() if isinstance(x, bytes) else x for x in v]
            return v
    return default


def constant_value(g, name: str, max_size: int | None = None) -> np.ndarray | None:
    """The value of the constant ``name`` of builder ``g``, None when it is not a
    constant or has more than ``max_size`` elements (large weights are never read):
    the one constant reader."""
    if not name or not g.is_constant(name):
        return None
    if max_size is not None:
        shape = g.get_shape(name)
        if shape is None or int(np.prod(shape)) > max_size:
            return None
    return np.asarray(g.get_constant(name))


def constant_ints(g, name: str, max_size: int | None = 1 << 16) -> list[int] | None:
    """The values of an integer constant as a list, None otherwise."""
    value = constant_value(g, name, max_size)
    if value is None or value.dtype.kind not in "iu":
        return None
    return [int(v) for v in value.reshape(-1)]
