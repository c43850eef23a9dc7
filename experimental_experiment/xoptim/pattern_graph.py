"""The declarative pattern graph (variables, nodes, values, the recorder ``op``);
:mod:`.matcher` and :mod:`.pattern` import it. ``Match`` and ``Refusal`` live in
:mod:`experimental_experiment.xoptim.match` (re-exported here), which imports neither."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol, Tuple, Union

from .match import Match, MatchResult, PatternLike, Refusal  # noqa: F401  (re-exported)

#: operators matched in any input order by the declarative form
COMMUTATIVE = frozenset("Add Mul Max Min And Or Xor Equal Sum".split())


class Var:
    """A pattern variable: binds a result name (input) or an attribute value."""

    __slots__ = ("name",)

    def __init__(self, name: str):
        self.name = name

    def __repr__(self) -> str:
        return f"Var({self.name!r})"


@dataclass(eq=False)
class PatternNode:
    """A node of the pattern graph."""

    op_type: str
    domain: str
    inputs: list  # PatternValue | Var | constant | None
    attributes: dict[str, Any]
    n_outputs: int


@dataclass(eq=False)
class PatternValue:
    """The output ``index`` of a pattern node."""

    node: PatternNode
    index: int


#: what ``Pattern.pattern`` returns: the output or outputs of the pattern graph
PatternResult = Union[PatternValue, Tuple[PatternValue, ...]]


class PatternOp:
    """Records the pattern graph: ``op.Transpose(x, perm=p)`` adds a PatternNode."""

    def __init__(self):
        self.nodes: list[PatternNode] = []

    def __getattr__(self, op_type: str):
        if op_type.startswith("_"):
            raise AttributeError(op_type)

        def make(*inputs, outputs: int = 1, domain: str = "", **attributes):
            inputs = list(inputs)
            while inputs and inputs[-1] is None:
                inputs.pop()
            node = PatternNode(op_type, domain, inputs, attributes, outputs)
            self.nodes.append(node)
            values = tuple(PatternValue(node, i) for i in range(outputs))
            return values[0] if outputs == 1 else values

        return make


class DeclarativePatternLike(PatternLike, Protocol):
    """What the declarative matcher needs from a pattern (``Pattern`` meets it)."""

    def pattern_graph(self) -> tuple[list[PatternNode], list[PatternValue], list[Var]]: ...

    def check(self, g: Any, **bound: Any) -> str | None: ...

    def refuse(self, reason: str) -> Refusal: ...
