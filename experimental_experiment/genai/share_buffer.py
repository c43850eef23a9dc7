"""Lets onnxruntime-genai share one buffer between the past and present caches
(``past_present_share_buffer: true`` in genai_config.json).

With a shared buffer, genai gives every ``past_key_values.<i>.key|value`` input the
shape ``(batch, heads, max_length, head_size)`` whatever the number of valid positions,
and GroupQueryAttention writes the new keys and values in place. The exported graph
reads the cache length from the shape of a past input (``Shape`` then ``Gather`` of
axis 2), which is then ``max_length`` instead of the number of cached tokens. genai's
``attention_mask`` always has the shape ``(batch, total_length)``, so the rewrite reads
the cache length as ``attention_mask.shape[1] - input_ids.shape[1]``: exact with or
without a shared buffer, the same graph runs in ``onnxruntime.InferenceSession`` with a
cache of the valid length.

The rewrite applies only when the graph allows it: every present output comes out of a
GroupQueryAttention node reading the past of the same layer (the kernel writes in
place when both are one buffer, ``seqlens_k`` and ``total_sequence_length`` being
computed from the mask), and the past inputs are read nowhere else than by those nodes
and by ``Shape`` nodes of which only the cache length (axis 2) or the axes which do not
change (batch, heads, head size) are used. Otherwise the graph is left as it is and
the package keeps ``past_present_share_buffer: false``.
"""

from __future__ import annotations

import logging

import onnx
from onnx import helper, numpy_helper

from .io_names import PAST_KEY, PAST_VALUE, PRESENT_KEY, PRESENT_VALUE

logger = logging.getLogger("experimental_experiment.genai")

#: symbolic name of the cache axis of the present outputs once the buffer is shared
PRESENT_LENGTH = "present_sequence_length"
_CACHE_AXIS = 2


def _constant_ints(graph: onnx.GraphProto, name: str) -> list[int] | None:
    """The integers of an initializer or of a Constant node named ``name``."""
    for init in graph.initializer:
        if init.name == name:
            return [int(v) for v in numpy_helper.to_array(init).reshape(-1)]
    for node in graph.node:
        if node.op_type == "Constant" and node.output[0] == name:
            for att in node.attribute:
                if att.name == "value":
                    return [int(v) for v in numpy_helper.to_array(att.t).reshape(-1)]
                if att.name in ("value_int", "value_ints"):
                    value = helper.get_attribute_value(att)
                    return [int(v) for v in (value if isinstance(value, list) else [value])]
    return None


def _shape_range(node: onnx.NodeProto, rank: int = 4) -> tuple[int, int]:
    """The axes ``[start, end)`` a Shape node returns."""
    start, end = 0, rank
    for att in node.attribute:
        if att.name == "start":
            start = att.i
        elif att.name == "end":
            end = att.i
    start, end = start % rank if start < 0 else start, end % rank if end < 0 else end
    return max(0, start), min(rank, end)


def _refusal(graph: onnx.GraphProto, n_layers: int) -> tuple[str | None, list, list]:
    """(reason or None, nodes returning the cache length as a scalar, nodes returning
    it as a 1-D tensor of one element)."""
    inputs = {i.name for i in graph.input}
    if "attention_mask" not in inputs or "input_ids" not in inputs:
        return "the model has no attention_mask or no input_ids", [], []
    past = {}
    for i in range(n_layers):
        past[PAST_KEY % i] = (3, PRESENT_KEY % i)
        past[PAST_VALUE % i] = (4, PRESENT_VALUE % i)
    consumers: dict[str, list[onnx.NodeProto]] = {}
    for node in graph.node:
        for name in node.input:
            consumers.setdefault(name, []).append(node)
    producers = {o: n for n in graph.node for o in n.output}
    for i in range(n_layers):
        for present, index in ((PRESENT_KEY % i, 1), (PRESENT_VALUE % i, 2)):
            node = producers.get(present)
            if (
                node is None
                or node.op_type != "GroupQueryAttention"
                or node.output[index] != present
            ):
                return f"{present} is not a present output of GroupQueryAttention", [], []
    gathers, shapes = [], []
    for name, (position, present) in past.items():
        if name in {o.name for o in graph.output}:
            return f"{name} is also an output", [], []
        for node in consumers.get(name, []):
            if node.op_type == "GroupQueryAttention":
                if list(node.input).index(name) != position or node.output[position - 2] != present:
                    return f"{name} is read by the attention of another layer", [], []
                continue
            if node.op_type != "Shape":
                return f"{name} is read by {node.op_type} {node.name!r}", [], []
            start, end = _shape_range(node)
            if not start <= _CACHE_AXIS < end:
                continue  # batch, heads or head size: the same in both layouts
            if (start, end) == (_CACHE_AXIS, _CACHE_AXIS + 1):
                shapes.append(node)
                continue
            for use in consumers.get(node.output[0], []):
                index = _constant_ints(graph, use.input[1]) if len(use.input) > 1 else None
                gather_axis = [a.i for a in use.attribute if a.name == "axis"] or [0]
                if (
                    use.op_type != "Gather"
                    or index is None
                    or len(index) != 1
                    or gather_axis != [0]
                ):
                    return f"the shape of {name} is read by {use.op_type}", [], []
                axis = index[0] + (end - start if index[0] < 0 else 0)
                if axis + start == _CACHE_AXIS:
                    # a scalar index returns a scalar, a 1-D index a 1-D tensor
                    scalar = _index_dims(graph, use.input[1]) == ()
                    (gathers if scalar else shapes).append(use)
    return None, gathers, shapes


def _index_dims(graph: onnx.GraphProto, name: str) -> tuple[int, ...]:
    """The shape of the constant index ``name`` (empty for a scalar)."""
    for init in graph.initializer:
        if init.name == name:
            return tuple(init.dims)
    for node in graph.node:
        if node.op_type == "Constant" and node.output[0] == name:
            for att in node.attribute:
                if att.name == "value":
                    return tuple(att.t.dims)
                if att.name == "value_ints":
                    return (len(att.ints),)
    return ()


def share_past_buffer(model: onnx.ModelProto, n_layers: int) -> bool:
    """Rewrites (in place) the graph of a renamed decoder (``rename_to_genai``) so
    that it reads the cache length from ``attention_mask`` and not from the past
    inputs; returns True when genai may then share the past and present buffers,
    False (graph untouched) when the graph does not allow it (the reason is logged).

    :param model: the decoder, inputs and outputs named as genai_config.json maps them
    :param n_layers: the number of layers of its cache
    :return: whether ``past_present_share_buffer`` can be true

    .. code-block:: python

        shared = share_past_buffer(onx, n_layers=2)
    """
    graph = model.graph
    reason, gathers, shapes = _refusal(graph, n_layers)
    if reason is not None:
        logger.info("past_present_share_buffer stays false: %s", reason)
        return False
    total, seq = "genai_total_length", "genai_query_length"
    past_1d, past = "genai_past_length_1d", "genai_past_length"
    new = [
        helper.make_node("Shape", ["attention_mask"], [total], start=1, end=2),
        helper.make_node("Shape", ["input_ids"], [seq], start=1, end=2),
        helper.make_node("Sub", [total, seq], [past_1d]),
        helper.make_node("Squeeze", [past_1d], [past]),
    ]
    renamed = {}
    for node in gathers:
        renamed[node.output[0]] = past
    for node in shapes:
        renamed[node.output[0]] = past_1d
    removed = {id(n) for n in gathers + shapes}
    kept = [n for n in graph.node if id(n) not in removed]
    for node in kept:
        for i, name in enumerate(node.input):
            if name in renamed:
                node.input[i] = renamed[name]
    for out in graph.output:
        if out.name in renamed:  # an output is the cache length itself: keep a copy
            kept.append(helper.make_node("Identity", [renamed[out.name]], [out.name]))
    del graph.node[:]
    graph.node.extend(new + kept)
    # the unused Shape nodes of the past inputs (batch or heads read elsewhere) stay
    graph_outputs = {o.name: o for o in graph.output}
    for i in range(n_layers):
        for name in (PRESENT_KEY % i, PRESENT_VALUE % i):
            dims = graph_outputs[name].type.tensor_type.shape.dim
            if len(dims) > _CACHE_AXIS:  # max_length with a shared buffer
                dims[_CACHE_AXIS].Clear()
                dims[_CACHE_AXIS].dim_param = PRESENT_LENGTH
    _drop_unused(graph)
    logger.info(
        "past_present_share_buffer: cache length read from attention_mask (%d scalar, %d 1-D uses)",
        len(gathers),
        len(shapes),
    )
    return True


def _drop_unused(graph: onnx.GraphProto) -> None:
    """Removes the nodes whose outputs nothing reads (the replaced Shape nodes)."""
    while True:
        used = {o.name for o in graph.output}
        for node in graph.node:
            used.update(node.input)
        dead = [
            n for n in graph.node if n.op_type in ("Shape", "Gather") and n.output[0] not in used
        ]
        if not dead:
            return
        ids = {id(n) for n in dead}
        kept = [n for n in graph.node if id(n) not in ids]
        del graph.node[:]
        graph.node.extend(kept)


__all__ = ["PRESENT_LENGTH", "share_past_buffer"]
