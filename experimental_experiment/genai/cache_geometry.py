"""Gives every cache input and output of a renamed decoder the same geometry
(key/value heads, head size), as genai_config.json describes one geometry for all of
them and onnxruntime-genai allocates keys and values of that shape.

Some decoders keep caches of several shapes: multi-head latent attention (DeepSeek V2/V3,
MiniCPM3, ...) stores a compressed latent as its "keys" and the rotary part of the keys
as its "values", two tensors of one head and different sizes; a sparse attention
(DeepSeek V3.2, GLM-MoE-DSA, ...) also caches the keys of its token indexer, a third
tensor genai has no slot for; other models mix layers of different numbers of heads or
head sizes. Two rewrites make one geometry of them:

* ``pack_indexer_keys`` (before the inputs are renamed): the indexer keys of a
  layer travel appended to the last axis of its values (one head);
* ``pad_cache_geometry`` (after): every past input and present output is declared
  with the largest number of heads and the largest head size of all of them, then, for
  a tensor smaller than that:

  * the past input goes through a ``Slice`` (first heads, first columns) before the
    graph reads it, the graph sees the cache it was exported with;
  * the present output is the graph's own present padded with zeros by a ``Pad`` node.

The padding is zeros the graph never reads, every step slices it away: the model
computes what it computed before, at the cost of a larger cache. A padded cache is no
longer written in place by GroupQueryAttention, ``past_present_share_buffer`` stays
false for such a package (``experimental_experiment.genai.share_buffer`` refuses it).
"""

from __future__ import annotations

import logging
import re
from typing import NamedTuple

import onnx
from onnx import TensorProto, helper

from .errors import NotADecoderError
from .io_names import PAST_KEY, PAST_VALUE, PRESENT_KEY, PRESENT_VALUE

logger = logging.getLogger("experimental_experiment.genai")

#: (heads, head size) of a cache tensor
Geometry = tuple[int, int]
_HEADS, _SIZE = 1, 3


class LayerCache(NamedTuple):
    """What one layer caches: keys and values ``(heads, head size)``, and the size of
    the keys of a token indexer (sparse attention, ``DynamicIndexedLayer``), 0 when
    there is none."""

    key: Geometry
    value: Geometry
    indexer: int = 0

    def slots(self) -> tuple[Geometry, Geometry]:
        """The geometries genai sees: the keys, the values with the indexer keys
        appended to their last axis (``pack_indexer_keys``)."""
        return self.key, (self.value[0], self.value[1] + self.indexer)


def common_geometry(shapes: list[LayerCache]) -> Geometry:
    """The largest number of heads and the largest head size over the keys and values
    of every layer (``shapes``: what ``probe_cache`` returns, the indexer keys packed
    with the values)."""
    every = [g for layer in shapes for g in LayerCache(*layer).slots()]
    return max(h for h, _ in every), max(s for _, s in every)


def _rename_uses(graph: onnx.GraphProto, old: str, new: str) -> None:
    """Replaces the input ``old`` by ``new`` in every node, subgraphs included."""
    for node in graph.node:
        for i, name in enumerate(node.input):
            if name == old:
                node.input[i] = new
        for att in node.attribute:
            if att.type == onnx.AttributeProto.GRAPH:
                _rename_uses(att.g, old, new)
            elif att.type == onnx.AttributeProto.GRAPHS:
                for g in att.graphs:
                    _rename_uses(g, old, new)


def _rename_output(graph: onnx.GraphProto, old: str, new: str) -> None:
    """The node computing ``old`` computes ``new``, and every reader reads ``new``."""
    for node in graph.node:
        for k, name in enumerate(node.output):
            if name == old:
                node.output[k] = new
    _rename_uses(graph, old, new)


def pack_indexer_keys(model: onnx.ModelProto, shapes: list[LayerCache]) -> int:
    """Rewrites (in place) an exported decoder (the exporter's names, before
    ``rename_to_genai``) whose layers also cache the keys of a token indexer (sparse
    attention, inputs ``*_indexer_key_<i>`` of shape ``(batch, past, size)``, returned
    after the keys and the values): the indexer keys of a layer travel appended to the
    last axis of its values (one head), genai feeds two tensors per layer. The value
    input is sliced in two (the values, the indexer keys without their head axis), the
    value output is the concatenation of both. Returns the number of packed layers.

    :param model: the exported decoder
    :param shapes: what every layer caches (``probe_cache``)
    :return: the number of layers whose indexer keys were packed
    """
    shapes = [LayerCache(*s) for s in shapes]
    indexed = [i for i, s in enumerate(shapes) if s.indexer]
    if not indexed:
        return 0
    graph, n = model.graph, len(shapes)

    def by_layer(pattern: str) -> dict[int, onnx.ValueInfoProto]:
        found = {}
        for value in graph.input:
            m = re.search(rf"(?:^|_){pattern}_(\d+)$", value.name)
            if m:
                found[int(m.group(1))] = value
        return found

    indexers = by_layer("indexer_key")
    values = by_layer("value")
    outputs = list(graph.output)
    if sorted(indexers) != indexed or len(outputs) != 1 + 2 * n + len(indexed):
        raise NotADecoderError(
            f"the exported model has no recognizable indexer cache for layers {indexed}: "
            f"inputs {[i.name for i in graph.input]}, {len(outputs)} outputs (expected "
            f"1 + 2 x {n} + {len(indexed)})"
        )
    front, back = [], []
    for j, i in enumerate(indexed):
        value, indexer = values[i].name, indexers[i].name
        size, extra = shapes[i].value[1], shapes[i].indexer
        part, packed4, part_x = f"{value}__values", f"{indexer}__4d", f"{indexer}__keys"
        _rename_uses(graph, value, part)
        _rename_uses(graph, indexer, part_x)
        axis = _int64(graph, f"{value}__axis", [_SIZE])
        front.extend(
            [
                helper.make_node(
                    "Slice",
                    [
                        value,
                        _int64(graph, f"{value}__0", [0]),
                        _int64(graph, f"{value}__v", [size]),
                        axis,
                    ],
                    [part],
                ),
                helper.make_node(
                    "Slice",
                    [
                        value,
                        _int64(graph, f"{value}__x0", [size]),
                        _int64(graph, f"{value}__x1", [size + extra]),
                        axis,
                    ],
                    [packed4],
                ),
                helper.make_node(
                    "Squeeze", [packed4, _int64(graph, f"{indexer}__head", [_HEADS])], [part_x]
                ),
            ]
        )
        dims = values[i].type.tensor_type.shape.dim
        dims[_SIZE].Clear()
        dims[_SIZE].dim_value = size + extra
        out_value, out_indexer = outputs[1 + n + i], outputs[1 + 2 * n + j]
        unpacked, unsqueezed = f"{out_value.name}__unpacked", f"{out_indexer.name}__4d"
        _rename_output(graph, out_value.name, unpacked)
        back.extend(
            [
                helper.make_node(
                    "Unsqueeze",
                    [out_indexer.name, _int64(graph, f"{out_indexer.name}__head", [_HEADS])],
                    [unsqueezed],
                ),
                helper.make_node("Concat", [unpacked, unsqueezed], [out_value.name], axis=-1),
            ]
        )
        dims = out_value.type.tensor_type.shape.dim
        dims[_SIZE].Clear()
        dims[_SIZE].dim_value = size + extra
    removed_inputs = {indexers[i].name for i in indexed}
    removed_outputs = {o.name for o in outputs[1 + 2 * n :]}
    kept_inputs = [v for v in graph.input if v.name not in removed_inputs]
    kept_outputs = [v for v in graph.output if v.name not in removed_outputs]
    del graph.input[:]
    graph.input.extend(kept_inputs)
    del graph.output[:]
    graph.output.extend(kept_outputs)
    nodes = front + list(graph.node) + back
    del graph.node[:]
    graph.node.extend(nodes)
    logger.info("indexer keys of %d layers packed with their values", len(indexed))
    return len(indexed)


def _set_dims(value: onnx.ValueInfoProto, geometry: Geometry) -> None:
    dims = value.type.tensor_type.shape.dim
    if len(dims) == 4:
        for axis, dim in ((_HEADS, geometry[0]), (_SIZE, geometry[1])):
            dims[axis].Clear()
            dims[axis].dim_value = dim


def _int64(graph: onnx.GraphProto, name: str, values: list[int]) -> str:
    graph.initializer.append(helper.make_tensor(name, TensorProto.INT64, [len(values)], values))
    return name


def pad_cache_geometry(
    model: onnx.ModelProto,
    shapes: list[LayerCache],
    geometry: Geometry | None = None,
) -> int:
    """Rewrites (in place) a renamed decoder (``rename_to_genai``) so that every
    ``past_key_values.<i>.key|value`` input and ``present.<i>.key|value`` output has the
    geometry ``geometry`` (default ``common_geometry``); returns the number of
    padded layer tensors (0: the graph is untouched).

    :param model: the decoder, inputs and outputs named as genai_config.json maps them
    :param shapes: what every layer caches (``probe_cache``), the indexer keys already
        packed with the values (``pack_indexer_keys``)
    :param geometry: ``(heads, head size)`` of every cache tensor once rewritten
    :return: how many key or value tensors were padded

    .. code-block:: python

        # a latent attention: keys of size 32, values of size 16, one head
        pad_cache_geometry(onx, [LayerCache((1, 32), (1, 16))] * 2)  # returns 2
    """
    graph = model.graph
    heads, size = geometry or common_geometry(shapes)
    inputs = {i.name: i for i in graph.input}
    outputs = {o.name: o for o in graph.output}
    new_nodes, padded = [], 0
    for i, layer in enumerate(shapes):
        for (past, present), (h, s) in zip(
            ((PAST_KEY % i, PRESENT_KEY % i), (PAST_VALUE % i, PRESENT_VALUE % i)),
            LayerCache(*layer).slots(),
        ):
            if (h, s) == (heads, size):
                continue
            if h > heads or s > size:
                raise ValueError(f"{past} has geometry {(h, s)} larger than {(heads, size)}")
            padded += 1
            sliced, unpadded = f"{past}__sliced", f"{present}__unpadded"
            _rename_uses(graph, past, sliced)
            # the node computing the present output and every reader of it
            _rename_output(graph, present, unpadded)
            new_nodes.append(
                helper.make_node(
                    "Slice",
                    [
                        past,
                        _int64(graph, f"{past}__starts", [0, 0]),
                        _int64(graph, f"{past}__ends", [h, s]),
                        _int64(graph, f"{past}__axes", [_HEADS, _SIZE]),
                    ],
                    [sliced],
                    name=f"{past}__slice",
                )
            )
            pads = [0, 0, 0, 0, 0, heads - h, 0, size - s]
            new_nodes.append(
                helper.make_node(
                    "Pad",
                    [unpadded, _int64(graph, f"{present}__pads", pads)],
                    [present],
                    name=f"{present}__pad",
                    mode="constant",
                )
            )
            _set_dims(inputs[past], (heads, size))
            _set_dims(outputs[present], (heads, size))
    if not padded:
        return 0
    # the Slice nodes first (they read graph inputs), the Pad nodes last
    slices = [n for n in new_nodes if n.op_type == "Slice"]
    pads_ = [n for n in new_nodes if n.op_type == "Pad"]
    nodes = slices + list(graph.node) + pads_
    del graph.node[:]
    graph.node.extend(nodes)
    # shapes inferred for the renamed tensors still hold, those of the inputs changed
    keep = [v for v in graph.value_info if v.name not in inputs and v.name not in outputs]
    del graph.value_info[:]
    graph.value_info.extend(keep)
    logger.info(
        "cache geometry: %d key/value tensors padded to %d heads of size %d",
        padded,
        heads,
        size,
    )
    return padded


__all__ = ["Geometry", "LayerCache", "common_geometry", "pack_indexer_keys", "pad_cache_geometry"]
