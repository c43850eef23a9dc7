"""Matching of the declarative patterns, and the graph index the engine uses."""

from __future__ import annotations

import inspect

import numpy as np
from onnx import NodeProto

from ..xbuilder import GraphBuilder
from ..xbuilder.graph_utils import (  # noqa: F401  (attribute_value: pattern API)
    attribute_value,
    constant_value,
)
from .graph_index import GraphIndex
from .match import Match, MatchResult
from .pattern_graph import COMMUTATIVE, DeclarativePatternLike, PatternNode, PatternValue, Var


class IndexedGraph:
    """The builder as a pattern sees it in ``match``: every attribute of the builder
    ``builder``, and ``index``, the ``GraphIndex`` the optimizer keeps up to date
    (``Pattern.producer`` / ``Pattern.n_consumers`` read it).

    :param builder: the GraphBuilder being optimized
    :param index: its index (computed when not given)
    """

    def __init__(self, builder: GraphBuilder, index: GraphIndex | None = None):
        self.builder = builder
        self.index = index if index is not None else GraphIndex(builder)

    def __getattr__(self, name: str):
        return getattr(self.builder, name)


def graph_index(g: GraphBuilder) -> GraphIndex:
    """The optimizer's index when ``g`` is an :class:`IndexedGraph`, else a new one
    (a pattern called outside the optimizer)."""
    return g.index if isinstance(g, IndexedGraph) else GraphIndex(g)


def small_constant(g: GraphBuilder, name: str, max_size: int = 1024) -> np.ndarray | None:
    """The value of a constant with at most ``max_size`` elements (large weights are
    never converted), None otherwise.

    :param g: the :class:`GraphBuilder` being optimized
    :param name: the name of the result
    :param max_size: the maximum number of elements
    :return: a numpy array or None

    .. code-block:: python

        from experimental_experiment.xoptim.matcher import small_constant

        def match(self, g, node):  # a method of a pattern anchored on Unsqueeze
            axes = small_constant(g, node.input[1])
            if axes is None:
                return self.refuse("the axes are not a small constant")
            ...
    """
    return constant_value(g, name, max_size)


def constant_equals(
    g: GraphBuilder, name: str, expected: float | np.ndarray, rtol: float = 1e-3
) -> bool:
    """Tells if ``name`` is a constant whose every element is close to ``expected``."""
    value = small_constant(g, name)
    if value is None or value.size == 0:
        return False
    try:
        return bool(
            np.allclose(
                value.astype(np.float64), np.asarray(expected, np.float64), rtol=rtol, atol=0
            )
        )
    except (TypeError, ValueError):
        return False


def _same_attr(expected, got) -> bool:
    if isinstance(expected, (list, tuple)):
        return got is not None and list(expected) == list(got)
    return expected == got


class _Matcher:
    def __init__(self, g: GraphBuilder, index: GraphIndex):
        self.g = g
        self.index = index

    def node(self, pn: PatternNode, gn: NodeProto, b: dict) -> dict | None:
        if pn.op_type != gn.op_type or pn.domain != gn.domain:
            return None
        if pn in b["nodes"]:  # PatternNode: hashed by identity (eq=False)
            return b if b["nodes"][pn] is gn else None
        if any(u is gn for u in b["used"]):  # a few nodes: the pattern's size
            return None
        inputs = list(gn.input)
        while inputs and not inputs[-1]:
            inputs.pop()
        if len(inputs) != len(pn.inputs) or len(gn.output) != pn.n_outputs:
            return None
        b = {"nodes": {**b["nodes"], pn: gn}, "used": (*b["used"], gn), "vars": dict(b["vars"])}
        names = {a.name for a in gn.attribute}
        if names - set(pn.attributes):
            return None
        for key, expected in pn.attributes.items():
            got = attribute_value(gn, key)
            if isinstance(expected, Var):
                b = self.bind(expected, got, b)
                if b is None:
                    return None
            elif not _same_attr(expected, got):
                return None
        orders = [list(range(len(inputs)))]
        if pn.op_type in COMMUTATIVE and pn.domain == "" and len(inputs) == 2:
            orders.append([1, 0])
        for order in orders:
            res = b
            for k, i in enumerate(order):
                res = self.value(pn.inputs[k], inputs[i], res)
                if res is None:
                    break
            if res is not None:
                return res
        return None

    def bind(self, var: Var, value, b: dict) -> dict | None:
        if var.name in b["vars"]:
            return b if _same_attr(b["vars"][var.name], value) else None
        b["vars"][var.name] = value
        return b

    def value(self, p, name: str, b: dict) -> dict | None:
        if p is None:
            return b if not name else None
        if isinstance(p, Var):
            return self.bind(p, name, {**b, "vars": dict(b["vars"])})
        if isinstance(p, PatternValue):
            prod = self.index.producer.get(name)
            if prod is None or prod[1] != p.index:
                return None
            return self.node(p.node, prod[0], b)
        return b if constant_equals(self.g, name, p) else None


def match_declarative(
    pattern: DeclarativePatternLike,
    g: GraphBuilder,
    node: NodeProto,
    index: GraphIndex | None = None,
) -> MatchResult:
    """Matches the declarative ``pattern`` on the subgraph ending at ``node``."""
    index = index or graph_index(g)
    _, outs, variables = pattern.pattern_graph()
    b = _Matcher(g, index).node(outs[0].node, node, {"nodes": {}, "used": (), "vars": {}})
    if b is None:
        return None
    outputs = []
    for out in outs:
        gn = b["nodes"].get(out.node)
        if gn is None:
            raise NotImplementedError(
                f"{pattern.name}: every output of a pattern must come from a node "
                "upstream of the first output's node"
            )
        outputs.append(gn.output[out.index])
    bound = {v.name: b["vars"].get(v.name) for v in variables}
    extra = {"outputs": outputs} if "outputs" in inspect.signature(pattern.check).parameters else {}
    reason = pattern.check(g, **bound, **extra)
    if reason:
        return pattern.refuse(reason)
    nodes = list(b["nodes"].values())
    return Match(pattern, nodes, outputs, bound)
