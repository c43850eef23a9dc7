"""Renames the inputs and outputs of an exported decoder to the names a genai_config.json
maps: ``input_ids``, ``attention_mask``, ``position_ids``,
``past_key_values.<i>.key|value``, ``logits``, ``present.<i>.key|value``."""

from __future__ import annotations

import re

import onnx

from .errors import NotADecoderError

#: names written in genai_config.json (``%d`` is the layer)
PAST_KEY, PAST_VALUE = "past_key_values.%d.key", "past_key_values.%d.value"
PRESENT_KEY, PRESENT_VALUE = "present.%d.key", "present.%d.value"
TOKEN_INPUTS = ("input_ids", "attention_mask", "position_ids")


def _layer(name: str, kind: str) -> int | None:
    m = re.search(rf"(?:^|_){kind}_(\d+)$", name)
    return int(m.group(1)) if m else None


def genai_names(model: onnx.ModelProto, n_layers: int) -> dict[str, str]:
    """Maps the exported names to genai's names. The exporter names the cache inputs
    ``*_key_<i>`` and ``*_value_<i>`` and returns the logits then the keys of every
    layer then the values, in the order of the cache it was given."""
    inputs = [i.name for i in model.graph.input]
    outputs = [o.name for o in model.graph.output]
    mapping = {n: n for n in inputs if n in TOKEN_INPUTS}
    keys = {_layer(n, "key"): n for n in inputs if _layer(n, "key") is not None}
    values = {_layer(n, "value"): n for n in inputs if _layer(n, "value") is not None}
    expected = set(range(n_layers))
    unknown = [
        n
        for n in inputs
        if n not in mapping and n not in keys.values() and n not in values.values()
    ]
    if (
        set(keys) != expected
        or set(values) != expected
        or unknown
        or "input_ids" not in mapping
        or len(outputs) != 1 + 2 * n_layers
    ):
        raise NotADecoderError(
            f"the exported model has no recognizable cache of {n_layers} layers: inputs "
            f"{inputs}, {len(outputs)} outputs (expected input_ids, attention_mask, "
            f"*_key_<i>, *_value_<i> and 1 + 2 x {n_layers} outputs); export a "
            "*ForCausalLM model with a DynamicCache"
        )
    for i in range(n_layers):
        mapping[keys[i]] = PAST_KEY % i
        mapping[values[i]] = PAST_VALUE % i
    mapping[outputs[0]] = "logits"
    for i in range(n_layers):
        mapping[outputs[1 + i]] = PRESENT_KEY % i
        mapping[outputs[1 + n_layers + i]] = PRESENT_VALUE % i
    return mapping


def _rename_graph(graph: onnx.GraphProto, mapping: dict[str, str]) -> None:
    for node in graph.node:
        for i, name in enumerate(node.input):
            if name in mapping:
                node.input[i] = mapping[name]
        for i, name in enumerate(node.output):
            if name in mapping:
                node.output[i] = mapping[name]
        for att in node.attribute:  # subgraphs read names of the outer scope
            if att.type == onnx.AttributeProto.GRAPH:
                _rename_graph(att.g, mapping)
            elif att.type == onnx.AttributeProto.GRAPHS:
                for g in att.graphs:
                    _rename_graph(g, mapping)
    for seq in (graph.input, graph.output, graph.value_info):
        for v in seq:
            if v.name in mapping:
                v.name = mapping[v.name]


def _detach_passthrough(graph: onnx.GraphProto) -> None:
    """An output which is also an input (an unused cache layer) gets an Identity node:
    inputs and outputs take different names in genai."""
    inputs = {i.name for i in graph.input}
    for out in graph.output:
        if out.name in inputs:
            copy = f"{out.name}__out"
            graph.node.append(onnx.helper.make_node("Identity", [out.name], [copy]))
            out.name = copy


def rename_to_genai(model: onnx.ModelProto, n_layers: int) -> dict[str, str]:
    """Renames (in place) the inputs and outputs of ``model`` and every reference to
    them to genai's names (:func:`genai_names`); returns the mapping."""
    _detach_passthrough(model.graph)
    mapping = genai_names(model, n_layers)
    _rename_graph(model.graph, mapping)
    return mapping


__all__ = [
    "PAST_KEY",
    "PAST_VALUE",
    "PRESENT_KEY",
    "PRESENT_VALUE",
    "genai_names",
    "rename_to_genai",
]
