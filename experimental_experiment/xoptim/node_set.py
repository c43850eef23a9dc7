"""Containers of graph nodes keyed by object identity.

A ``NodeProto`` is not hashable (protobuf messages compare by value), so the optimizer
cannot put nodes in a ``set`` nor use them as ``dict`` keys. ``NodeMap`` and
``NodeSet`` key them by identity and keep a reference to every member: the key of
a member can never be reused by another object while the member is in the container
(a bare ``id()`` in a set can, once the node is freed)."""

from __future__ import annotations

from typing import Any, Generic, Iterable, Iterator, TypeVar

V = TypeVar("V")


class NodeMap(Generic[V]):
    """A mapping node -> value keyed by the node's identity, in insertion order.

    :param items: initial ``(node, value)`` pairs

    .. code-block:: python

        from experimental_experiment.xoptim.node_set import NodeMap

        position = NodeMap((n, i) for i, n in enumerate(g.nodes))
        first = min(match.nodes, key=position.__getitem__)
    """

    __slots__ = ("_items",)

    def __init__(self, items: Iterable[tuple[Any, V]] = ()):
        self._items: dict[int, tuple[Any, V]] = {}
        for node, value in items:
            self[node] = value

    def __setitem__(self, node: Any, value: V) -> None:
        self._items[id(node)] = (node, value)

    def __getitem__(self, node: Any) -> V:
        return self._items[id(node)][1]

    def get(self, node: Any, default: V | None = None) -> V | None:
        item = self._items.get(id(node))
        return default if item is None else item[1]

    def pop(self, node: Any, default: V | None = None) -> V | None:
        item = self._items.pop(id(node), None)
        return default if item is None else item[1]

    def __contains__(self, node: Any) -> bool:
        return id(node) in self._items

    def __len__(self) -> int:
        return len(self._items)

    def __iter__(self) -> Iterator[Any]:
        return (node for node, _ in self._items.values())

    def values(self) -> Iterator[V]:
        return (value for _, value in self._items.values())


class NodeSet:
    """A set of nodes keyed by identity, in insertion order.

    :param nodes: initial members

    .. code-block:: python

        from experimental_experiment.xoptim.node_set import NodeSet

        claimed = NodeSet(match.nodes)
        assert match.nodes[0] in claimed
    """

    __slots__ = ("_map",)

    def __init__(self, nodes: Iterable[Any] = ()):
        self._map: NodeMap[None] = NodeMap((n, None) for n in nodes)

    def add(self, node: Any) -> None:
        self._map[node] = None

    def update(self, nodes: Iterable[Any]) -> None:
        for n in nodes:
            self._map[n] = None

    def discard(self, node: Any) -> None:
        self._map.pop(node)

    def __contains__(self, node: Any) -> bool:
        return node in self._map

    def __len__(self) -> int:
        return len(self._map)

    def __iter__(self) -> Iterator[Any]:
        return iter(self._map)
