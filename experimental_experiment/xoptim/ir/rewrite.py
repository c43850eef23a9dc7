"""The pattern base class on the IR and the application of a match: the matched nodes
are replaced, the replacement's values take the names of the matched outputs."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import onnx_ir as ir


@dataclass
class IRMatch:
    """A match: ``nodes`` are removed (the anchor last), ``bound`` is read by
    ``rewrite``.

    :param nodes: the matched nodes, the anchor (whose outputs are replaced) last
    :param bound: values found by ``match``
    """

    nodes: list[ir.Node]
    bound: dict[str, Any] = field(default_factory=dict)


class IRPattern:
    """Base class of the IR patterns: ``anchor`` names the op type(s) of the last node of
    a match, ``match`` returns an ``IRMatch`` or None, ``rewrite`` returns the new
    nodes and the values replacing the anchor's outputs (an existing value is allowed:
    the anchor's outputs are then replaced by it).

    .. code-block:: python

        import onnx_ir as ir
        from experimental_experiment.xoptim.ir import IRMatch, IRPattern
        from experimental_experiment.xoptim.ir.values import producer, used_once_by

        class NegNegToIdentity(IRPattern):
            anchor = ("Neg",)

            def match(self, node):
                first = producer(node.inputs[0], "Neg")
                if first is None or not used_once_by(first.outputs[0], node):
                    return None
                return IRMatch([first, node], {"x": first.inputs[0]})

            def rewrite(self, graph, match):
                return [], [match.bound["x"]]
    """

    anchor: tuple[str, ...] = ()
    domain: str = ""

    @property
    def name(self) -> str:
        return type(self).__name__

    def match(self, node: ir.Node) -> IRMatch | None:  # pragma: no cover - overridden
        raise NotImplementedError

    def rewrite(
        self, graph: ir.Graph, match: IRMatch
    ) -> tuple[list[ir.Node], list[ir.Value]]:  # pragma: no cover
        raise NotImplementedError


def escapes(match: IRMatch) -> bool:
    """Tells if a result of a matched node other than the anchor is used outside the
    match or is a graph output (the engine then refuses the match)."""
    inside = set(map(id, match.nodes))
    for node in match.nodes[:-1]:
        for out in node.outputs:
            if out.is_graph_output() or any(id(u.node) not in inside for u in out.uses()):
                return True
    return False


def apply_match(graph: ir.Graph, pattern: IRPattern, match: IRMatch) -> bool:
    """Replaces the matched nodes; returns False when the match is refused."""
    if escapes(match):
        return False
    root = match.nodes[-1]
    new_nodes, new_values = pattern.rewrite(graph, match)
    created = {id(v) for n in new_nodes for v in n.outputs}
    for i, (old, new) in enumerate(zip(root.outputs, new_values)):
        if id(new) not in created and old.is_graph_output():
            # an existing value replaces a graph output: keep the output's name
            ident = ir.node("Identity", [new], name=f"{root.name}_identity")
            new_nodes.append(ident)
            new_values[i] = ident.outputs[0]
    for old, new in zip(root.outputs, new_values):
        if id(new) in created or old.is_graph_output():
            new.name = old.name
            if new.type is None:
                new.type = old.type
            if new.shape is None:
                new.shape = old.shape
        old.replace_all_uses_with(new, replace_graph_outputs=True)
    graph.insert_after(root, new_nodes)
    graph.remove(match.nodes, safe=True)
    return True
