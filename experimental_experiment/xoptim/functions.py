"""The optimizer inside the bodies of local functions.

Each function body is optimized in a builder of its own (a function has its own
namespace and sees nothing of the main graph):

* its inputs get the element type (and the shape) every call gives them when all the
  calls agree, nothing otherwise; the calls are searched in the main graph and its
  subgraphs (a function called from another function gets no types),
* its Constant nodes become the builder's constants (so they fold and patterns read
  them) and are written back as Constant nodes, in the order they were created,
* inputs, outputs, name, domain, attributes and opsets stay; a function whose nodes
  read attributes of the function (``ref_attr_name``) is left as it is, patterns
  could not see the values.
"""

from __future__ import annotations

import logging
from types import MappingProxyType
from typing import Callable

import numpy as np
from onnx import AttributeProto, FunctionProto, NodeProto, TensorProto, helper, numpy_helper

from ..xbuilder import GraphBuilder
from ..xbuilder.graph_utils import subgraphs, used_names
from ..xbuilder.shape_inference import infer_node
from .subgraphs import count_nodes

logger = logging.getLogger(__name__)

_SCALAR_ATTRIBUTES = MappingProxyType(
    {
        "value_float": np.float32,
        "value_int": np.int64,
        "value_floats": np.float32,
        "value_ints": np.int64,
    }
)


def _reads_attributes(nodes) -> bool:
    for node in nodes:
        for att in node.attribute:
            if att.ref_attr_name:
                return True
        if any(_reads_attributes(sub.node) for sub in subgraphs(node)):
            return True
    return False


def _all_names(nodes, names: set[str]) -> None:
    for node in nodes:
        names.update(o for o in node.output if o)
        names.update(i for i in node.input if i)
        if node.name:
            names.add(node.name)
        for sub in subgraphs(node):
            names.update(vi.name for vi in [*sub.input, *sub.output])
            _all_names(sub.node, names)


def _walk(nodes):
    for node in nodes:
        yield node
        for sub in subgraphs(node):
            yield from _walk(sub.node)


def _call_types(g: GraphBuilder, f: FunctionProto) -> list[tuple[int, tuple | None]]:
    """(element type, shape) of every input of ``f`` all its calls agree on."""
    unknown = [(0, None)] * len(f.input)
    for other in g.functions.values():
        if any(n.domain == f.domain and n.op_type == f.name for n in _walk(other.node)):
            return unknown
    calls = [n for n in _walk(g.nodes) if n.domain == f.domain and n.op_type == f.name]
    if not calls:
        return unknown
    result = []
    for k in range(len(f.input)):
        names = [c.input[k] if k < len(c.input) else "" for c in calls]
        if not all(names):
            result.append((0, None))
            continue
        types = {g.get_type(n) for n in names}
        shapes = {g.get_shape(n) for n in names}
        result.append(
            (types.pop() if len(types) == 1 else 0, shapes.pop() if len(shapes) == 1 else None)
        )
    return result


def _constant_value(node: NodeProto) -> np.ndarray | None:
    """The value of a Constant node, None for what the builder cannot hold."""
    if (
        node.op_type != "Constant"
        or node.domain not in ("", "ai.onnx")
        or (len(node.attribute) != 1)
    ):
        return None
    att = node.attribute[0]
    if (
        att.name == "value"
        and att.type == AttributeProto.TENSOR
        and (att.t.data_type != TensorProto.STRING and not att.t.HasField("data_location"))
    ):
        return numpy_helper.to_array(att.t)
    if att.name in _SCALAR_ATTRIBUTES:
        return np.asarray(helper.get_attribute_value(att), dtype=_SCALAR_ATTRIBUTES[att.name])
    return None


def function_builder(g: GraphBuilder, f: FunctionProto) -> GraphBuilder | None:
    """A builder holding the body of ``f`` (see the module's docstring), None when the
    function is left as it is."""
    if len(f.attribute) or len(f.attribute_proto) or _reads_attributes(f.node):
        return None
    opsets = {o.domain: o.version for o in f.opset_import}
    fb = GraphBuilder(opsets if "" in opsets else {**opsets, "": g.main_opset})
    fb.functions = g.functions
    _all_names(f.node, fb._names)
    fb._names.update([*f.input, *f.output])
    for name, (elem_type, shape) in zip(f.input, _call_types(g, f)):
        fb.inputs.append(name)
        if elem_type:
            fb.set_type(name, elem_type)
        if shape is not None:
            fb.set_shape(name, shape)
    outputs = set(f.output)
    for node in f.node:
        value = None if node.output[0] in outputs else _constant_value(node)
        if value is not None:
            fb.set_constant_value(node.output[0], value)
            continue
        copy = NodeProto()
        copy.CopyFrom(node)
        fb.nodes.append(copy)
        infer_node(fb, copy)
    fb.outputs = list(f.output)
    return fb


def builder_to_function(fb: GraphBuilder, f: FunctionProto) -> FunctionProto:
    """``f`` with the nodes of ``fb``: the constants still used become Constant nodes
    first; domains new in the body are added to the opset imports."""
    needed = set(fb.outputs)
    for node in fb.nodes:
        needed |= used_names(node)
    constants = [
        helper.make_node(
            "Constant", [], [name], value=numpy_helper.from_array(fb.get_constant(name))
        )
        for name in fb.initializers
        if name in needed
    ]
    new = FunctionProto()
    new.CopyFrom(f)
    del new.node[:]
    new.node.extend([*constants, *fb.nodes])
    del new.value_info[:]
    imported = {o.domain for o in new.opset_import}
    domains = sorted({n.domain for n in _walk(fb.nodes)} - imported)
    for d in domains:
        if d in fb.opsets:
            new.opset_import.append(helper.make_opsetid(d, fb.opsets[d]))
    return new


def optimize_functions(g: GraphBuilder, optimize_body: Callable) -> int | None:
    """Optimizes the body of every local function of builder ``g`` with
    ``optimize_body(function_builder)``; returns the number of nodes removed, None when
    no function was optimized."""
    removed = None
    for key, f in list(g.functions.items()):
        fb = function_builder(g, f)
        if fb is None:
            logger.info(
                "[xoptim] function %s.%s is not optimized: it reads attributes", f.domain, f.name
            )
            continue
        before = count_nodes(f)
        optimize_body(fb)
        g.functions[key] = builder_to_function(fb, f)
        removed = (removed or 0) + before - count_nodes(g.functions[key])
    return removed
