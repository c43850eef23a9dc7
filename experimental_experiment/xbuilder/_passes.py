"""Builder-level passes: remove identity, remove unused nodes, constant folding."""

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


def remove_unused(g) -> int:
    """Removes nodes and initializers no graph output depends on."""
    needed = set(g.outputs)
    kept = []
    for node in reversed(g.nodes):
        if any(o in needed for o in node.output if o):
            kept.append(node)
            needed |= used_names(node)
    kept.reverse()
    removed = len(g.nodes) - len(kept)
    g.nodes[:] = kept
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


def run_passes(g, options: OptimizationOptions) -> dict[str, int]:
    """Runs the passes until nothing changes; returns what each pass removed."""
    report = {"remove_identity": 0, "constant_folding": 0, "remove_unused": 0}
    for _ in range(5):
        changed = 0
        if options.remove_identity:
            n = remove_identity(g)
            report["remove_identity"] += n
            changed += n
        if options.constant_folding:
            n = constant_folding(g, options.constant_size_cap)
            report["constant_folding"] += n
            changed += n
        if options.remove_unused:
            n = remove_unused(g)
            report["remove_unused"] += n
            changed += n
        if not changed:
            break
    if options.verbose:
        logger.info("[GraphBuilder.optimize] %s", report)
    return report
