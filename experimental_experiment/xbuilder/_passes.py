"""Builder-level passes: remove identity, remove unused nodes, constant folding,
common subexpression elimination, duplicated initializers."""

from __future__ import annotations

import logging

import numpy as np
from onnx import AttributeProto, NodeProto

from .optimization_options import OptimizationOptions

logger = logging.getLogger(__name__)

_NOT_FOLDABLE = frozenset(
    "RandomNormal RandomUniform RandomNormalLike RandomUniformLike Multinomial Bernoulli "
    "If Loop Scan Dropout".split()
)


def _subgraphs(node: NodeProto):
    for att in node.attribute:
        if att.type == AttributeProto.GRAPH:
            yield att.g
        elif att.type == AttributeProto.GRAPHS:
            yield from att.graphs


def used_names(node: NodeProto) -> set[str]:
    """Inputs of a node, including names its subgraphs take from the outer scope."""
    names = {i for i in node.input if i}
    for sub in _subgraphs(node):
        for n in sub.node:
            names |= used_names(n)
        names |= {o.name for o in sub.output}
    return names


def rename_inputs(node: NodeProto, mapping: dict[str, str]) -> None:
    """Renames inputs of a node and of its subgraphs' nodes (recursively)."""
    for i, name in enumerate(node.input):
        if name in mapping:
            node.input[i] = mapping[name]
    for sub in _subgraphs(node):
        for n in sub.node:
            rename_inputs(n, mapping)
        for o in sub.output:
            if o.name in mapping:
                # an outer result returned directly by a branch
                o.name = mapping[o.name]


def remove_identity(g) -> int:
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
        if x in producer and x not in outputs and not any(
            x in used_names(n) for n in _subgraph_users(g)
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


def _subgraph_users(g):
    return [n for n in g.nodes if any(True for _ in _subgraphs(n))]


def remove_unused(g, *, keep_initializers: bool = False) -> int:
    """Removes nodes and initializers no graph output depends on (the names a node's
    subgraphs take from the outer scope count as used); ``keep_initializers`` for a
    subgraph builder, which shares the initializers of the main graph."""
    needed = set(g.outputs)
    kept = []
    for node in reversed(g.nodes):
        if any(o in needed for o in node.output if o):
            kept.append(node)
            needed |= used_names(node)
    kept.reverse()
    removed = len(g.nodes) - len(kept)
    g.nodes[:] = kept
    if keep_initializers:
        return removed
    for name in [n for n in g.initializers if n not in needed]:
        del g.initializers[name]
        g._constant_arrays.pop(name, None)
    return removed


def _fold_shape(g, node: NodeProto) -> np.ndarray | None:
    if node.op_type == "Shape" and g.is_static_shape(node.input[0]):
        shape = g.get_shape(node.input[0])
        start = _int_attr(node, "start", 0)
        end = _int_attr(node, "end", len(shape))
        return np.array(shape[start:end], dtype=np.int64)
    if node.op_type == "Size" and g.is_static_shape(node.input[0]):
        return np.array(int(np.prod(g.get_shape(node.input[0]))), dtype=np.int64)
    return None


def _int_attr(node, name, default):
    for a in node.attribute:
        if a.name == name:
            return a.i
    return default


def _evaluate(node: NodeProto, feeds: dict[str, np.ndarray], opset: int):
    from onnx import helper
    from onnx.reference import ReferenceEvaluator

    inputs = [helper.make_tensor_value_info(i, 0, None) for i in feeds]
    outputs = [helper.make_tensor_value_info(o, 0, None) for o in node.output]
    graph = helper.make_graph([node], "fold", inputs, outputs)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    return ReferenceEvaluator(model).run(None, feeds)


def constant_folding(g, size_cap: int) -> int:
    """Replaces nodes whose inputs are all constant by initializers."""
    outputs = set(g.outputs)
    kept, folded = [], 0
    for node in g.nodes:
        if node.domain != "" or node.op_type in _NOT_FOLDABLE or (
            any(o in outputs for o in node.output)
        ):
            kept.append(node)
            continue
        values = None
        shape_value = _fold_shape(g, node)
        if shape_value is not None:
            values = [shape_value]
        elif node.input and all(i and g.is_constant(i) for i in node.input) and not any(
            True for _ in _subgraphs(node)
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
            g.initializers[name] = value
            g._constant_arrays[name] = value
            g.set_shape(name, value.shape)
            if expected:
                from ._dtypes import onnx_to_np_dtype

                if value.dtype != onnx_to_np_dtype(expected):
                    value = value.astype(onnx_to_np_dtype(expected))
                    g.initializers[name] = value
                    g._constant_arrays[name] = value
        folded += 1
    g.nodes[:] = kept
    return folded


_NOT_CSE = _NOT_FOLDABLE | frozenset({"Constant"})


def common_subexpression_elimination(g) -> int:
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
        if node.op_type in _NOT_CSE or any(True for _ in _subgraphs(node)) or any(
            o in outputs for o in node.output
        ):
            kept.append(node)
            continue
        key = (node.domain, node.op_type, tuple(node.input), len(node.output),
               tuple(a.SerializeToString(deterministic=True) for a in node.attribute))
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


def merge_duplicated_initializers(g, size_cap: int = 1 << 16) -> int:
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
    for name in mapping:
        del g.initializers[name]
        g._constant_arrays.pop(name, None)
    for key, name in list(g._constant_cache.items()):
        if name in mapping:
            g._constant_cache[key] = mapping[name]
    return len(mapping)


class OptimizationReport(list):
    """A list of dicts, one per pass or pattern: ``name``, ``kind``, ``matched``,
    ``applied``, ``refused``, ``time_s`` (and ``refusals``, a few reasons).

    ``report["remove_unused"]`` is the number of changes made by that pass or pattern.
    """

    def __getitem__(self, key):
        if isinstance(key, str):
            return sum(e["applied"] for e in self if e["name"] == key)
        return list.__getitem__(self, key)

    def entry(self, name: str, kind: str) -> dict:
        """The entry of ``name``, created when missing."""
        for e in self:
            if e["name"] == name:
                return e
        e = {"name": name, "kind": kind, "matched": 0, "applied": 0, "refused": 0,
             "time_s": 0.0, "refusals": []}
        self.append(e)
        return e


def _selected_passes(options: OptimizationOptions):
    passes = []
    if options.remove_identity:
        passes.append(("remove_identity", remove_identity))
    if options.constant_folding:
        passes.append(("constant_folding",
                       lambda g: constant_folding(g, options.constant_size_cap)))
    if options.remove_unused:
        passes.append(("remove_unused", remove_unused))
    if getattr(options, "cse", True):
        passes.append(("cse", common_subexpression_elimination))
    if getattr(options, "merge_initializers", True):
        passes.append(("merge_initializers", merge_duplicated_initializers))
    return passes


def run_passes(g, options: OptimizationOptions,
               report: OptimizationReport | None = None) -> OptimizationReport:
    """Runs the passes until nothing changes; returns what each pass changed."""
    import time

    report = OptimizationReport() if report is None else report
    passes = _selected_passes(options)
    for name, _ in passes:
        report.entry(name, "pass")
    for _ in range(5):
        changed = 0
        for name, fct in passes:
            begin = time.perf_counter()
            n = fct(g)
            e = report.entry(name, "pass")
            e["time_s"] += time.perf_counter() - begin
            e["matched"] += n
            e["applied"] += n
            changed += n
        if not changed:
            break
    if options.verbose:
        logger.info("[GraphBuilder.optimize] %s",
                    {e["name"]: e["applied"] for e in report if e["kind"] == "pass"})
    return report
