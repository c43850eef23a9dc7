"""The declarative pattern graph (variables, nodes, values, the recorder ``op``) and
what a pattern's ``match`` returns: a :class:`Match`, or a :class:`Refusal` with its
reason (a value, nothing is stored on the pattern); :mod:`.matcher` and :mod:`.pattern`
import it."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Union

from onnx import NodeProto

if TYPE_CHECKING:  # only for annotations: pattern imports this module
    from .pattern import Pattern

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


@dataclass
class Match:
    """A match: ``nodes`` are removed, ``outputs`` keep their names after the rewrite.

    :param pattern: the pattern which matched
    :param nodes: matched nodes, in graph order or not (the engine sorts them)
    :param outputs: names the rewrite produces (default: the outputs of the node
        given to ``match``, the anchor)
    :param bound: values given to ``rewrite`` (declarative) or read by ``apply``

    .. code-block:: python

        from experimental_experiment.xoptim import Match, Pattern

        class ConcatOfOneToIdentity(Pattern):
            anchor = "Concat"

            def match(self, g, node):
                if len(node.input) != 1:
                    return None
                return Match(self, [node], bound={"x": node.input[0]})

            def apply(self, op, match):
                return op.Identity(match.bound["x"])
    """

    pattern: "Pattern"
    nodes: list[NodeProto]
    outputs: list[str] | None = None
    bound: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Refusal:
    """A structural match refused by the pattern, with the reason (false in a boolean
    context, like no match): ``return self.refuse("...")`` in ``match``.

    :param reason: why the pattern refused the match, shown by ``optimize(..., verbose=1)``
        and kept in the optimization report

    .. code-block:: python

        def match(self, g, node):
            ...
            if g.get_type(x) != g.get_type(node.output[0]):
                return self.refuse("the type changes")
    """

    reason: str

    def __bool__(self) -> bool:
        return False


#: what ``Pattern.match`` returns
MatchResult = Union[Match, Refusal, None]
