"""Graph passes run by the optimizer: remove identity, remove unused nodes, constant
folding, common subexpression elimination, duplicated initializers.

Every pass is a small class whose call returns a :class:`PassResult` (what it
changed); a :class:`PassManager` runs them until nothing changes (a bounded number of
rounds) and names the pass which failed.

.. code-block:: python

    from experimental_experiment.xoptim.passes import PassManager, RemoveIdentity, RemoveUnused

    results = PassManager([RemoveIdentity(), RemoveUnused()])(g)
    print([(r.name, r.changes) for r in results])
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass

import numpy as np
from onnx import NodeProto

from ..errors import ExportError
from ..xbuilder import GraphBuilder
from ..xbuilder.dtypes import i64, onnx_to_np_dtype
from ..xbuilder.graph_utils import (
    remove_unused,
    rename_inputs,
    subgraph_users,
    subgraphs,
    used_names,
)
from ..xbuilder.optimization_options import OptimizationOptions
from .fold_numpy import evaluate_numpy
from .report import OptimizationReport

logger = logging.getLogger(__name__)

_NOT_FOLDABLE = frozenset(
    "RandomNormal RandomUniform RandomNormalLike RandomUniformLike Multinomial Bernoulli "
    "If Loop Scan Dropout".split()
    # quantization stays explicit: a DequantizeLinear of an int8 weight folded into a
    # float initializer loses the QDQ form onnxruntime fuses (QLinearConv, QLinearMatMul)
    + "QuantizeLinear DequantizeLinear DynamicQuantizeLinear".split()
)


def remove_identity(g: GraphBuilder) -> int:
    """Removes Identity nodes.

    ``y = Identity(x)``: uses of ``y`` become uses of ``x``; when ``y`` is a graph
    output, the node producing ``x`` writes ``y`` directly (if ``x`` is neither an
    input, an initializer nor another output).
    """
    outputs = set(g.outputs)
    producer = {o: node for node in g.nodes for o in node.output}
    mapping: dict[str, str] = {}
    kept = []
    for node in g.nodes:
        if mapping:
            rename_inputs(node, mapping)
        if node.op_type != "Identity" or node.domain != "":
            kept.append(node)
            continue
        x, y = node.input[0], node.output[0]
        if y not in outputs:
            mapping[y] = x
            continue
        if (
            x in producer
            and x not in outputs
            and not any(x in used_names(n) for n in subgraph_users(g))
        ):
            src = producer.pop(x)
            src.output[list(src.output).index(x)] = y
            producer[y] = src
            for n in kept:
                rename_inputs(n, {x: y})
            # names already mapped to x (removed identities) now map to y
            for k, v in mapping.items():
                if v == x:
                    mapping[k] = y
            mapping[x] = y
            continue
        kept.append(node)
    removed = len(g.nodes) - len(kept)
    g.nodes[:] = kept
    return removed


def _fold_shape(g: GraphBuilder, node: NodeProto) -> np.ndarray | None:
    shape = g.get_shape(node.input[0])
    if shape is None or not g.is_static_shape(node.input[0]):
        return None
    if node.op_type == "Shape":
        start = _int_attr(node, "start", 0)
        end = _int_attr(node, "end", len(shape))
        return i64(shape[start:end])
    if node.op_type == "Size":
        return i64(int(np.prod(shape)))
    return None


def _int_attr(node, name, default):
    for a in node.attribute:
        if a.name == name:
            return a.i
    return default


def _evaluate(node: NodeProto, feeds: dict[str, np.ndarray], opset: int):
    values = evaluate_numpy(node, feeds, opset)
    if values is not None:
        return values
    from onnx import helper
    from onnx.reference import ReferenceEvaluator

    inputs = [helper.make_tensor_value_info(i, 0, None) for i in feeds]
    outputs = [helper.make_tensor_value_info(o, 0, None) for o in node.output]
    graph = helper.make_graph([node], "fold", inputs, outputs)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    return ReferenceEvaluator(model).run(None, feeds)


def constant_folding(g: GraphBuilder, size_cap: int) -> int:
    """Replaces nodes whose inputs are all constant by initializers."""
    outputs = set(g.outputs)
    kept, folded = [], 0
    for node in g.nodes:
        if (
            node.domain != ""
            or node.op_type in _NOT_FOLDABLE
            or (any(o in outputs for o in node.output))
        ):
            kept.append(node)
            continue
        values = None
        shape_value = _fold_shape(g, node)
        if shape_value is not None:
            values = [shape_value]
        elif (
            node.input
            and all(i and g.is_constant(i) for i in node.input)
            and not any(True for _ in subgraphs(node))
        ):
            feeds = {i: g.get_constant(i) for i in node.input}
            if sum(v.size for v in feeds.values()) <= size_cap:
                try:
                    values = _evaluate(node, feeds, g.main_opset)
                except Exception as e:  # the runtime decides, keep the node
                    logger.debug("cannot fold %s: %s", node.op_type, e)
        if values is None or any(np.asarray(v).size > size_cap for v in values):
            kept.append(node)
            continue
        for name, value in zip(node.output, values):
            value = np.asarray(value)
            expected = g.get_type(name)
            if expected and value.dtype != onnx_to_np_dtype(expected):
                value = value.astype(onnx_to_np_dtype(expected))
            g.set_constant_value(name, value)
        folded += 1
    g.nodes[:] = kept
    return folded


_NOT_CSE = _NOT_FOLDABLE | frozenset({"Constant"})


def common_subexpression_elimination(g: GraphBuilder) -> int:
    """Replaces a node by an earlier identical one (same op, inputs, attributes).

    Random operators and nodes with subgraphs are kept; a node whose output is a graph
    output is kept too (its name must stay).
    """
    outputs = set(g.outputs)
    seen: dict[tuple, NodeProto] = {}
    mapping: dict[str, str] = {}
    kept = []
    for node in g.nodes:
        if mapping:
            rename_inputs(node, mapping)
        if (
            node.op_type in _NOT_CSE
            or any(True for _ in subgraphs(node))
            or any(o in outputs for o in node.output)
        ):
            kept.append(node)
            continue
        key = (
            node.domain,
            node.op_type,
            tuple(node.input),
            len(node.output),
            tuple(a.SerializeToString(deterministic=True) for a in node.attribute),
        )
        first = seen.get(key)
        if first is None:
            seen[key] = node
            kept.append(node)
            continue
        for a, b in zip(node.output, first.output):
            if a:
                mapping[a] = b
    removed = len(g.nodes) - len(kept)
    g.nodes[:] = kept
    return removed


def merge_duplicated_initializers(g: GraphBuilder, size_cap: int = 1 << 16) -> int:
    """Makes identical small initializers (dtype, shape, bytes) share one name."""
    protected = set(g.inputs) | set(g.outputs)
    seen: dict[tuple, str] = {}
    mapping: dict[str, str] = {}
    for name, value in g.initializers.items():
        if name in protected or int(np.prod(value.shape)) > size_cap or not g.is_constant(name):
            continue
        arr = g.get_constant(name)
        key = (arr.dtype.str, arr.shape, arr.tobytes())
        if key in seen:
            mapping[name] = seen[key]
        else:
            seen[key] = name
    if not mapping:
        return 0
    for node in g.nodes:
        rename_inputs(node, mapping)
    for name, kept in mapping.items():
        g.remove_initializer(name, replaced_by=kept)
    return len(mapping)


@dataclass(frozen=True)
class PassResult:
    """What one pass changed in one run: ``changes`` nodes or initializers.

    :param name: name of the pass
    :param changes: nodes or initializers the pass changed (0: nothing changed)
    :param time_s: time the run took, in seconds

    .. code-block:: python

        from experimental_experiment.xoptim.passes import (
            PassManager, RemoveIdentity, RemoveUnused)

        # g: a GraphBuilder
        results = PassManager([RemoveIdentity(), RemoveUnused()])(g)
        changed = [r.name for r in results if r.modified]
        total = sum(r.changes for r in results)
    """

    name: str
    changes: int
    time_s: float = 0.0

    @property
    def modified(self) -> bool:
        return self.changes > 0


class PassError(ExportError):
    """A pass raised an exception; the message names the pass.

    Cause: an optimization pass (constant folding, CSE, removal of unused nodes...)
    failed on the graph, a bug in the pass or a graph it did not expect.

    Fix: export with ``optimize=False`` to get the model, then report the message;
    ``OptimizationOptions`` removes a pass or a pattern set
    (:ref:`l-plot-optimize-101`)."""


class GraphPass:
    """Base class of the passes: :meth:`run` modifies the builder and returns the
    number of changes, calling the pass returns a :class:`PassResult`."""

    name = "pass"

    def run(self, g: GraphBuilder) -> int:  # pragma: no cover - overridden
        raise NotImplementedError

    def __call__(self, g: GraphBuilder) -> PassResult:
        begin = time.perf_counter()
        n = self.run(g)
        return PassResult(self.name, n, time.perf_counter() - begin)


class RemoveIdentity(GraphPass):
    """Removes Identity nodes (:func:`remove_identity`)."""

    name = "remove_identity"

    def run(self, g: GraphBuilder) -> int:
        return remove_identity(g)


class RemoveUnused(GraphPass):
    """Removes nodes and initializers no output depends on; ``keep_initializers`` for
    a subgraph, whose builder shares the initializers of the main graph."""

    name = "remove_unused"

    def __init__(self, keep_initializers: bool = False):
        self.keep_initializers = keep_initializers

    def run(self, g: GraphBuilder) -> int:
        return remove_unused(g, keep_initializers=self.keep_initializers)


class ConstantFolding(GraphPass):
    """Evaluates nodes whose inputs are constant (results up to ``size_cap`` elements)."""

    name = "constant_folding"

    def __init__(self, size_cap: int = 1 << 20):
        self.size_cap = size_cap

    def run(self, g: GraphBuilder) -> int:
        return constant_folding(g, self.size_cap)


class CommonSubexpressionElimination(GraphPass):
    """Replaces a node by an earlier identical one."""

    name = "cse"

    def run(self, g: GraphBuilder) -> int:
        return common_subexpression_elimination(g)


class MergeInitializers(GraphPass):
    """Identical small initializers share one name."""

    name = "merge_initializers"

    def run(self, g: GraphBuilder) -> int:
        return merge_duplicated_initializers(g)


class PassManager:
    """Runs passes in order, again while one of them changes something (at most
    ``max_rounds`` rounds); a pass raising an exception raises :class:`PassError`
    naming it.

    :param passes: the passes (``GraphPass``), in the order they run
    :param max_rounds: the maximum number of rounds

    .. code-block:: python

        from experimental_experiment.xoptim.passes import (
            PassManager, RemoveIdentity, RemoveUnused)

        # g: a GraphBuilder
        results = PassManager([RemoveIdentity(), RemoveUnused()], max_rounds=2)(g)
        print([(r.name, r.changes) for r in results])  # one PassResult per pass and round
    """

    def __init__(self, passes: list[GraphPass], max_rounds: int = 5):
        self.passes = list(passes)
        self.max_rounds = max_rounds

    def run_once(self, g: GraphBuilder) -> list[PassResult]:
        results = []
        for p in self.passes:
            try:
                results.append(p(g))
            except ExportError:
                raise
            except Exception as e:
                raise PassError(f"pass {p.name!r} failed: {type(e).__name__}: {e}") from e
        return results

    def __call__(self, g: GraphBuilder) -> list[PassResult]:
        results: list[PassResult] = []
        for _ in range(self.max_rounds):
            round_results = self.run_once(g)
            results.extend(round_results)
            if not any(r.modified for r in round_results):
                break
        return results


def passes_of(options: OptimizationOptions, *, subgraph: bool = False) -> list[GraphPass]:
    """The passes ``options`` selects, in the order they run.

    ``subgraph=True`` for an If branch or a Loop/Scan body: its builder shares the
    initializers of the main graph, no pass removes nor renames them there (the main
    graph's passes do it for the whole model).
    """
    passes: list[GraphPass] = []
    if options.remove_identity:
        passes.append(RemoveIdentity())
    if options.constant_folding:
        passes.append(ConstantFolding(options.constant_size_cap))
    if options.remove_unused:
        passes.append(RemoveUnused(keep_initializers=subgraph))
    if options.cse:
        passes.append(CommonSubexpressionElimination())
    if options.merge_initializers and not subgraph:
        passes.append(MergeInitializers())
    return passes


def run_passes(
    g: GraphBuilder,
    options: OptimizationOptions,
    report: OptimizationReport | None = None,
    *,
    subgraph: bool = False,
) -> OptimizationReport:
    """Runs the passes ``options`` selects until nothing changes; adds what each
    pass changed to ``report`` (a new one if None) and returns it (``subgraph``:
    see :func:`passes_of`)."""
    report = OptimizationReport() if report is None else report
    passes = passes_of(options, subgraph=subgraph)
    for p in passes:
        report.entry(p.name, "pass")
    for r in PassManager(passes)(g):
        e = report.entry(r.name, "pass")
        e.time_s += r.time_s
        e.matched += r.changes
        e.applied += r.changes
    if options.verbose:
        logger.info("[xoptim.passes] %s", {e.name: e.applied for e in report if e.kind == "pass"})
    return report
