"""Gives every cache input and output of a renamed decoder the same geometry
(key/value heads, head size), as genai_config.json describes one geometry for all of
them and onnxruntime-genai allocates keys and values of that shape.

Some decoders keep caches of several shapes: multi-head latent attention (DeepSeek V2/V3,
MiniCPM3, ...) stores a compressed latent as its "keys" and the rotary part of the keys
as its "values", two tensors of one head and different sizes; other models mix layers of
different numbers of heads or head sizes. The rewrite declares every past input and
present output with the largest number of heads and the largest head size of all of
them, then, for a tensor smaller than that:

* the past input goes through a ``Slice`` (first heads, first columns) before the graph
  reads it, the graph sees the cache it was exported with;
* the present output is the graph's own present padded with zeros by a ``Pad`` node.

The padding is zeros the graph never reads, every step slices it away: the model
computes what it computed before, at the cost of a larger cache. A padded cache is no
longer written in place by GroupQueryAttention, ``past_present_share_buffer`` stays
false for such a package (``experimental_experiment.genai.share_buffer`` refuses it).
"""

from __future__ import annotations

import logging

import onnx
from onnx import TensorProto, helper

from .io_names import PAST_KEY, PAST_VALUE, PRESENT_KEY, PRESENT_VALUE

logger = logging.getLogger("experimental_experiment.genai")

#: (heads, head size) of a cache tensor
Geometry = tuple[int, int]
_HEADS, _SIZE = 1, 3


def common_geometry(shapes: list[tuple[Geometry, Geometry]]) -> Geometry:
    """The largest number of heads and the largest head size over the keys and values
    of every layer (``shapes``: ``((key heads, key size), (value heads, value size))``
    per layer, as ``probe_cache`` returns them)."""
    every = [g for layer in shapes for g in layer]
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
    shapes: list[tuple[Geometry, Geometry]],
    geometry: Geometry | None = None,
) -> int:
    """Rewrites (in place) a renamed decoder (``rename_to_genai``) so that every
    ``past_key_values.<i>.key|value`` input and ``present.<i>.key|value`` output has the
    geometry ``geometry`` (default :func:`common_geometry`); returns the number of
    padded layer tensors (0: the graph is untouched).

    :param model: the decoder, inputs and outputs named as genai_config.json maps them
    :param shapes: ``((key heads, key size), (value heads, value size))`` of every layer,
        the cache the model was exported with
    :param geometry: ``(heads, head size)`` of every cache tensor once rewritten
    :return: how many key or value tensors were padded

    .. code-block:: python

        # a latent attention: keys of size 32, values of size 16, one head
        pad_cache_geometry(onx, [((1, 32), (1, 16))] * 2)  # returns 2
    """
    graph = model.graph
    heads, size = geometry or common_geometry(shapes)
    inputs = {i.name: i for i in graph.input}
    outputs = {o.name: o for o in graph.output}
    new_nodes, padded = [], 0
    for i, layer in enumerate(shapes):
        for (past, present), (h, s) in zip(
            ((PAST_KEY % i, PRESENT_KEY % i), (PAST_VALUE % i, PRESENT_VALUE % i)), layer
        ):
            if (h, s) == (heads, size):
                continue
            if h > heads or s > size:
                raise ValueError(f"{past} has geometry {(h, s)} larger than {(heads, size)}")
            padded += 1
            sliced, unpadded = f"{past}__sliced", f"{present}__unpadded"
            _rename_uses(graph, past, sliced)
            # the node computing the present output and every reader of it
            for node in graph.node:
                for k, name in enumerate(node.output):
                    if name == present:
                        node.output[k] = unpadded
            _rename_uses(graph, present, unpadded)
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


__all__ = ["Geometry", "common_geometry", "pad_cache_geometry"]
