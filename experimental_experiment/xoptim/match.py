"""What a pattern's ``match`` returns: a ``Match``, or a ``Refusal`` with its
reason (a value, nothing is stored on the pattern), and the protocol a pattern meets.
:mod:`.pattern_graph`, :mod:`.matcher`, :mod:`.pattern` and the optimizer import this
module, which imports none of them (no import cycle, not even a type-only one)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Protocol, Sequence, Union

from onnx import NodeProto


class PatternLike(Protocol):
    """What a ``Match`` needs from its pattern (``Pattern`` meets it)."""

    @property
    def name(self) -> str: ...

    def apply(self, op: Any, match: Match) -> RewriteResult: ...


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

    pattern: PatternLike
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

#: what ``Pattern.apply`` and ``Pattern.rewrite`` return: the name or names replacing
#: the matched outputs
RewriteResult = Union[str, Sequence[str]]
