"""The passes: one pattern over a graph (``PatternPass``) and the fixed point of
several (``FixedPointPasses``), in the style of ``onnx_ir.passes``."""

from __future__ import annotations

from dataclasses import dataclass, field

import onnx_ir as ir

from .patterns import IR_PATTERNS
from .rewrite import IRPattern, apply_match


@dataclass
class IRResult(ir.passes.PassResult):
    """What a pass changed: ``rewrites`` (total) and ``per_pattern`` counts.

    :param rewrites: the number of rewrites applied
    :param per_pattern: that number for each pattern name
    """

    rewrites: int = 0
    per_pattern: dict[str, int] = field(default_factory=dict)


class PatternPass(ir.passes.InPlacePass):
    """Applies one pattern on every node of the main graph whose op type is an anchor
    (non-overlapping: a node removed by an earlier match is skipped).

    :param pattern: the IR pattern

    .. code-block:: python

        from experimental_experiment.xoptim.ir import PatternPass, load
        from experimental_experiment.xoptim.ir.transpose import TransposeTransposeIR

        result = PatternPass(TransposeTransposeIR())(load("model.onnx"))
        print(result.rewrites)
    """

    def __init__(self, pattern: IRPattern):
        super().__init__()
        self.pattern = pattern

    def call(self, model: ir.Model) -> IRResult:
        graph, pattern, n = model.graph, self.pattern, 0
        anchors = set(pattern.anchor)
        for node in list(graph):  # the graph changes while iterating
            if (
                node.graph is not graph
                or node.op_type not in anchors
                or node.domain != pattern.domain
            ):
                continue
            m = pattern.match(node)
            if m is not None and apply_match(graph, pattern, m):
                n += 1
        return IRResult(model, modified=n > 0, rewrites=n, per_pattern={pattern.name: n})


class FixedPointPasses(ir.passes.InPlacePass):
    """Runs the passes in order until a whole round changes nothing (or
    ``max_rounds``).

    :param passes: the pattern passes
    :param max_rounds: the maximum number of rounds

    .. code-block:: python

        from experimental_experiment.xoptim.ir import default_passes, load

        result = default_passes()(load("model.onnx"))
        print(result.per_pattern)
    """

    def __init__(self, passes: list[PatternPass], max_rounds: int = 10):
        super().__init__()
        self.passes, self.max_rounds = passes, max_rounds

    def call(self, model: ir.Model) -> IRResult:
        total = IRResult(model, modified=False)
        for _ in range(self.max_rounds):
            changed = 0
            for p in self.passes:
                res = p.call(model)  # an IRResult (__call__ types it as a PassResult)
                for k, v in res.per_pattern.items():
                    total.per_pattern[k] = total.per_pattern.get(k, 0) + v
                changed += res.rewrites
            total.rewrites += changed
            if not changed:
                break
        total.modified = total.rewrites > 0
        return total


def default_passes(max_rounds: int = 10) -> FixedPointPasses:
    """The three IR patterns of the prototype to a fixed point.

    :param max_rounds: the maximum number of rounds
    :return: the pass

    .. code-block:: python

        from experimental_experiment.xoptim.ir import default_passes

        passes = default_passes()
    """
    return FixedPointPasses([PatternPass(p()) for p in IR_PATTERNS], max_rounds)
