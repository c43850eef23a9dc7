"""The index of a builder's main graph the optimizer keeps across rounds: the producer
and the consumers of every result, updated when a match is applied (no rebuild each
round; a rebuild only when a graph pass changed the graph)."""

from __future__ import annotations

from typing import Iterable

from onnx import NodeProto

from ..xbuilder import GraphBuilder
from ..xbuilder.graph_utils import used_names
from .node_set import NodeMap


class GraphIndex:
    """Producers and consumers of every result of a builder's main graph.

    :param g: the GraphBuilder (``g.nodes``, ``g.outputs``)

    .. code-block:: python

        from experimental_experiment.xoptim.graph_index import GraphIndex

        index = GraphIndex(g)
        node = index.node_of("x")  # None for an input or an initializer
        index.replace(removed_nodes, new_nodes)  # after a rewrite
    """

    def __init__(self, g: GraphBuilder):
        self.g = g
        self.producer: dict[str, tuple[NodeProto, int]] = {}
        self.consumers: dict[str, list[NodeProto]] = {}
        self.outputs = set(g.outputs)
        self._positions: NodeMap[int] | None = None
        self.add(g.nodes)

    def add(self, nodes: Iterable[NodeProto]) -> None:
        """Indexes new nodes."""
        self._positions = None
        for node in nodes:
            for i, o in enumerate(node.output):
                if o:
                    self.producer[o] = (node, i)
            for name in used_names(node):
                self.consumers.setdefault(name, []).append(node)

    def remove(self, nodes: Iterable[NodeProto]) -> None:
        """Forgets removed nodes."""
        self._positions = None
        for node in nodes:
            for o in node.output:
                p = self.producer.get(o)
                if p is not None and p[0] is node:
                    del self.producer[o]
            for name in used_names(node):
                users = [c for c in self.consumers.get(name, ()) if c is not node]
                if users:
                    self.consumers[name] = users
                else:
                    self.consumers.pop(name, None)

    def replace(self, removed: Iterable[NodeProto], new: Iterable[NodeProto]) -> None:
        """Applies a rewrite to the index: ``removed`` are gone, ``new`` are added."""
        self.remove(removed)
        self.add(new)

    def node_of(self, name: str) -> NodeProto | None:
        p = self.producer.get(name)
        return None if p is None else p[0]

    def n_consumers(self, name: str) -> int:
        return len(self.consumers.get(name, ()))

    def reset_positions(self) -> None:
        """Forgets the node positions (``g.nodes`` was reordered)."""
        self._positions = None

    def position(self, node: NodeProto) -> int:
        """The rank of ``node`` in ``g.nodes`` (computed once per graph state)."""
        if self._positions is None:
            self._positions = NodeMap((n, i) for i, n in enumerate(self.g.nodes))
        return self._positions[node]
