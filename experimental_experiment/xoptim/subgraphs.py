"""The optimizer inside subgraphs (If branches, Loop and Scan bodies, nested too).

:func:`optimize_builder <experimental_experiment.xoptim.optimize_builder>` runs the same
passes and patterns on every subgraph, each one in a child builder
(:meth:`GraphBuilder.make_subgraph_builder
<experimental_experiment.xbuilder.GraphBuilder.make_subgraph_builder>`) which shares
names, dtypes, shapes and initializers with the enclosing graph:

* a body sees the outer names it uses with what is known about them; they are neither
  produced by the body nor removable by it, so its passes never rename nor remove them,
* only initializers fold: a value computed by the enclosing graph, a subgraph input or
  a loop-carried value never does; what a body folds becomes an initializer of the
  main graph, which the body reads as an outer-scope name,
* the subgraph keeps its inputs and outputs (their names are part of the control-flow
  node's contract), new names stay unique in the whole model.

A subgraph is left as it is when it holds initializers of its own, or when a name it
defines is defined elsewhere in the model too (a model read from a file may reuse a
name in two scopes, the shared dtype/shape table could not tell them apart).
Local functions are handled by :mod:`experimental_experiment.xoptim.functions`.
"""

from __future__ import annotations

import logging
from collections import Counter
from typing import Callable, Sequence

from onnx import FunctionProto, GraphProto, NodeProto

from ..xbuilder import GraphBuilder
from ..xbuilder.graph_utils import subgraphs
from ..xbuilder.shape_inference import infer_node
from .loader import record_value_info

logger = logging.getLogger(__name__)


def count_nodes(
    nodes: Sequence[NodeProto] | GraphProto | FunctionProto, *, recursive: bool = True
) -> int:
    """Number of nodes in ``nodes`` (a list of NodeProto, a GraphProto or a
    FunctionProto), the nodes of their subgraphs included when ``recursive``."""
    seq = nodes.node if isinstance(nodes, (GraphProto, FunctionProto)) else nodes
    total = 0
    for node in seq:
        total += 1
        if recursive:
            for sub in subgraphs(node):
                total += count_nodes(sub)
    return total


def subgraph_nodes(g: GraphBuilder) -> int:
    """Number of nodes inside the subgraphs of a builder's nodes (nested ones too)."""
    return sum(count_nodes(sub) for node in g.nodes for sub in subgraphs(node))


def _count_definitions(graph: GraphProto, counter: Counter) -> None:
    for vi in graph.input:
        counter[vi.name] += 1
    for init in graph.initializer:
        counter[init.name] += 1
    _count_node_outputs(graph.node, counter)


def _count_node_outputs(nodes, counter: Counter) -> None:
    for node in nodes:
        for o in node.output:
            if o:
                counter[o] += 1
        for sub in subgraphs(node):
            _count_definitions(sub, counter)


def ambiguous_names(g: GraphBuilder) -> frozenset[str]:
    """Names defined more than once in a builder's graph and its subgraphs."""
    counter: Counter = Counter()
    for name in [*g.inputs, *g.initializers]:
        counter[name] += 1
    _count_node_outputs(g.nodes, counter)
    return frozenset(n for n, c in counter.items() if c > 1)


def _skip_reason(sub: GraphProto, ambiguous: frozenset[str]) -> str | None:
    if len(sub.initializer) or len(sub.sparse_initializer):
        return "it has initializers of its own"
    own = {i.name for i in sub.input} | {o for n in sub.node for o in n.output if o}
    clash = sorted(own & ambiguous)
    if clash:
        return f"it defines names defined in another scope too: {clash[:3]}"
    return None


def _copy(node: NodeProto) -> NodeProto:
    new = NodeProto()
    new.CopyFrom(node)
    return new


def optimize_subgraph(
    g: GraphBuilder, sub: GraphProto, optimize_graph: Callable, ambiguous: frozenset[str]
) -> int | None:
    """Optimizes the subgraph ``sub`` of a node of builder ``g`` in place with
    ``optimize_graph(child_builder)``; returns the number of nodes removed (nested
    subgraphs included, may be negative), None when the subgraph is left as it is."""
    reason = _skip_reason(sub, ambiguous)
    if reason:
        logger.info("[xoptim] subgraph %r is not optimized: %s", sub.name, reason)
        return None
    before = count_nodes(sub)
    child = g.make_subgraph_builder()
    child.inputs = [i.name for i in sub.input]
    child.outputs = [o.name for o in sub.output]
    for vi in [*sub.input, *sub.output, *sub.value_info]:
        record_value_info(child, vi)
    child.nodes = [_copy(n) for n in sub.node]
    for node in child.nodes:
        if any(o and (not child.get_type(o) or child.get_shape(o) is None) for o in node.output):
            infer_node(child, node)  # a body nobody typed (a function's, a file's)
    optimize_graph(child)
    del sub.node[:]
    sub.node.extend(child.nodes)
    defined = set(child.inputs) | {o for n in child.nodes for o in n.output if o}
    kept = [vi for vi in sub.value_info if vi.name in defined]
    if len(kept) != len(sub.value_info):
        del sub.value_info[:]
        sub.value_info.extend(kept)
    return before - count_nodes(sub)


def optimize_subgraphs(
    g: GraphBuilder, optimize_graph: Callable, ambiguous: frozenset[str]
) -> int | None:
    """Optimizes every subgraph of the nodes of builder ``g`` (see the module's
    docstring); ``optimize_graph(child)`` optimizes one child builder, recursively.

    :return: the number of nodes removed inside the subgraphs, None when ``g`` has no
        subgraph (or none could be optimized)
    """
    removed = None
    for node in g.nodes:
        for sub in list(subgraphs(node)):
            n = optimize_subgraph(g, sub, optimize_graph, ambiguous)
            if n is not None:
                removed = (removed or 0) + n
    return removed
