"""Base classes of the rewriting patterns.

A pattern is written in one of two forms; both go through the same engine
(:mod:`experimental_experiment.xoptim.optimizer`), which removes the matched nodes,
inserts the new ones where the last matched node was and keeps the names of the
results the matched subgraph produced (nothing downstream changes).

**Declarative form**: ``pattern`` builds the subgraph to find with the same ``op.X``
API as the builder. Its parameters are pattern variables: used as an input, a variable
binds a result name; used as an attribute value, it binds the attribute's python value
(None when the node has no such attribute). A python number or numpy array given as
an input matches a constant whose every element is (close to) that value. ``Add``,
``Mul``, ``Max``, ``Min``, ``And``, ``Or``, ``Equal`` match their inputs in either order.
Attributes the pattern does not name must be absent from the matched nodes.
``check`` may refuse a structural match and says why (kept in the report; a ``check``
with a parameter ``outputs`` receives the names of the matched outputs), ``rewrite``
builds the replacement with ``op.X`` (python scalars become constants like with
``g.op``; ``op.g`` is the :class:`GraphBuilder`) and returns the result names, in the
order ``pattern`` returned them::

    from experimental_experiment.xoptim import Pattern

    class TransposeTransposeToTranspose(Pattern):
        "Transpose(Transpose(x, perm=p1), perm=p2) -> Transpose(x, perm=p1∘p2)."

        def pattern(self, op, x, p1, p2):
            return op.Transpose(op.Transpose(x, perm=p1), perm=p2)

        def check(self, g, x, p1, p2):
            if p1 is None or p2 is None:
                return "a perm attribute is missing"
            return None  # accepted

        def rewrite(self, op, x, p1, p2):
            return op.Transpose(x, perm=[p1[i] for i in p2])

Returning an existing name (``return x``) replaces the matched subgraph by ``x``.

**Imperative form**: for what a fixed graph cannot express (variadic inputs, optional
attributes, shape-dependent choices). ``anchor`` names the op type(s) of the last node
of the match; ``match`` returns a :class:`Match` or ``self.refuse(reason)`` (a
:class:`Refusal <experimental_experiment.xoptim.pattern_graph.Refusal>`, false like None);
``apply`` builds the replacement of ``match.outputs``::

    from experimental_experiment.xoptim import Match, Pattern

    class ConcatOfOneToIdentity(Pattern):
        "Concat(x) -> x."

        anchor = "Concat"

        def match(self, g, node):
            if len(node.input) != 1:
                return None  # not the structure: not reported
            if g.get_type(node.input[0]) == 0:
                return self.refuse("unknown type")  # reported with its reason
            # nodes: every node removed (the anchor included); outputs default to the
            # anchor's outputs, they keep their names
            return Match(self, [node], bound={"x": node.input[0]})

        def apply(self, op, match):
            return match.bound["x"]

In both forms the engine refuses a match when a result produced inside the match but
not among ``match.outputs`` is used outside of it (or is a graph output), and when the
replacement changes the element type of an output. ``min_opset`` / ``max_opset``
restrict a pattern to some opsets of the default domain. ``g.get_type(name)``,
``g.get_shape(name)``, ``g.get_rank(name)``, ``g.is_constant(name)``,
``g.get_constant(name)`` give what the builder knows (prefer
:func:`experimental_experiment.xoptim.matcher.small_constant`, which never converts
a large weight); ``self.producer(g, name)`` and ``self.n_consumers(g, name)`` walk
the graph in ``match``.

A pattern joins a set when its class is added to ``DEFAULT_PATTERNS``
(:mod:`experimental_experiment.xoptim.patterns`) or ``ORT_PATTERNS``
(:mod:`experimental_experiment.xoptim.patterns_ort`); a list of instances can also be
given directly: ``optimize_model(model, patterns=[MyPattern()])``.
:func:`experimental_experiment.xoptim.testing.check_pattern` optimizes a small model and
compares onnxruntime's results before and after.
"""

from __future__ import annotations

import inspect
from typing import Any

from onnx import NodeProto

from ..xbuilder import GraphBuilder
from .match import Match, MatchResult, Refusal, RewriteResult
from .matcher import graph_index, match_declarative
from .pattern_graph import (  # noqa: F401  (part of the pattern API)
    COMMUTATIVE,
    PatternNode,
    PatternOp,
    PatternResult,
    PatternValue,
    Var,
)


class RewriteOp:
    """``op.X(...)`` in ``rewrite``/``apply``: adds nodes to the builder ``op.g``."""

    def __init__(self, g: GraphBuilder):
        self.g = g

    def __getattr__(self, op_type: str) -> Any:
        if op_type.startswith("_"):
            raise AttributeError(op_type)
        return getattr(self.g.op, op_type)


class Pattern:
    """Base class of the patterns, see the module docstring for both forms.

    :param verbose: verbosity of this pattern (logging)

    .. code-block:: python

        from experimental_experiment.xoptim import Pattern, optimize

        class NegNegToIdentity(Pattern):
            "Neg(Neg(x)) -> x."

            def pattern(self, op, x):
                return op.Neg(op.Neg(x))

            def rewrite(self, op, x):
                return op.Identity(x)

        res = optimize(model, patterns=[NegNegToIdentity()])
    """

    #: op type(s) of the last node of a match (imperative form); derived from the
    #: pattern graph in the declarative form
    anchor: str | tuple[str, ...] | None = None
    #: domain of the anchor
    anchor_domain: str = ""
    #: the pattern applies only when the default-domain opset is in [min_opset, max_opset]
    min_opset: int = 1
    max_opset: int = 10_000

    def __init__(self, verbose: int = 0):
        self.verbose = verbose
        self._graph: tuple[list[PatternNode], list[PatternValue], list[Var]] | None = None

    @property
    def name(self) -> str:
        return type(self).__name__

    def __repr__(self) -> str:
        return f"{self.name}()"

    # declarative form
    def is_declarative(self) -> bool:
        return type(self).pattern is not Pattern.pattern

    def pattern(self, op: PatternOp, *args: Var) -> PatternResult:  # pragma: no cover - overridden
        raise NotImplementedError

    def check(self, g: GraphBuilder, **bound: Any) -> str | None:
        """Returns None to accept a structural match, a reason to refuse it."""
        return None

    # pragma: no cover - overridden
    def rewrite(self, op: RewriteOp, **bound: Any) -> RewriteResult:
        raise NotImplementedError

    def pattern_graph(self) -> tuple[list[PatternNode], list[PatternValue], list[Var]]:
        """(nodes, outputs, variables) of the declarative pattern, built once."""
        if self._graph is None:
            params = list(inspect.signature(self.pattern).parameters)[1:]
            variables = [Var(p) for p in params]
            op = PatternOp()
            outs = self.pattern(op, *variables)
            outs = list(outs) if isinstance(outs, (tuple, list)) else [outs]
            self._graph = (op.nodes, outs, variables)
        return self._graph

    def anchors(self) -> tuple[tuple[str, str], ...] | None:
        """(domain, op_type) of the nodes a match may end with, None for any node."""
        if self.is_declarative():
            _, outs, _ = self.pattern_graph()
            root = outs[0].node
            return ((root.domain, root.op_type),)
        if self.anchor is None:
            return None
        types = (self.anchor,) if isinstance(self.anchor, str) else self.anchor
        return tuple((self.anchor_domain, t) for t in types)

    # imperative form
    def match(self, g: GraphBuilder, node: NodeProto) -> MatchResult:
        """Returns a Match ending at ``node``, a Refusal (``self.refuse(reason)``) or
        None."""
        return match_declarative(self, g, node)

    def apply(self, op: RewriteOp, match: Match) -> RewriteResult:
        """Builds the replacement; returns the names replacing ``match.outputs``."""
        return self.rewrite(op, **match.bound)

    # helpers for the imperative form (valid during matching)
    @staticmethod
    def producer(g: GraphBuilder, name: str) -> NodeProto | None:
        """The node producing ``name`` (None for inputs, initializers)."""
        return graph_index(g).node_of(name)

    @staticmethod
    def n_consumers(g: GraphBuilder, name: str) -> int:
        """Number of nodes using ``name`` (+1 if it is a graph output)."""
        index = graph_index(g)
        return index.n_consumers(name) + (name in index.outputs)

    def refuse(self, reason: str) -> Refusal:
        """Why a structural match is refused, as a value ``match`` returns."""
        return Refusal(reason)
