"""Loads an onnx.ModelProto into a GraphBuilder (types and shapes recovered)."""

from __future__ import annotations

import numpy as np
import onnx
from onnx import AttributeProto, ModelProto, TensorProto, ValueInfoProto, numpy_helper

from ..xbuilder import GraphBuilder


class TensorProtoRef:
    """An initializer kept as its TensorProto until serialization (no copy)."""

    __slots__ = ("proto", "elem_type", "shape", "_array")

    def __init__(self, proto: TensorProto):
        self.proto = proto
        self.elem_type = proto.data_type
        self.shape = tuple(proto.dims)
        self._array: np.ndarray | None = None

    def to_numpy(self) -> np.ndarray:
        if self._array is None:
            self._array = numpy_helper.to_array(self.proto)
        return self._array

    def to_tensor_proto(self, name: str) -> TensorProto:
        if name == self.proto.name:
            return self.proto
        proto = TensorProto()
        proto.CopyFrom(self.proto)
        proto.name = name
        return proto


def _shape_of(type_proto) -> tuple | None:
    tt = type_proto.tensor_type
    if not tt.HasField("shape"):
        return None
    return tuple(
        d.dim_value if d.HasField("dim_value") else (d.dim_param or None) for d in tt.shape.dim
    )


def _all_names(graph, names: set[str]) -> None:
    """Every result and node name of a graph and its subgraphs."""
    for vi in list(graph.input) + list(graph.output):
        names.add(vi.name)
    for init in graph.initializer:
        names.add(init.name)
    for node in graph.node:
        names.update(n for n in node.output if n)
        if node.name:
            names.add(node.name)
        for att in node.attribute:
            if att.type == AttributeProto.GRAPH:
                _all_names(att.g, names)
            elif att.type == AttributeProto.GRAPHS:
                for sub in att.graphs:
                    _all_names(sub, names)


def _subgraph_infos(graph, g: GraphBuilder) -> None:
    """Types and shapes declared or inferred inside the subgraphs (what the builder
    already knows wins: the main graph first, then the outer scopes)."""
    for node in graph.node:
        for att in node.attribute:
            subs = [att.g] if att.type == AttributeProto.GRAPH else list(att.graphs)
            for sub in subs:
                for vi in [*sub.input, *sub.output, *sub.value_info]:
                    record_value_info(g, vi)
                _subgraph_infos(sub, g)


def record_value_info(g: GraphBuilder, vi: ValueInfoProto) -> None:
    """Adds what a value info declares to the builder's table (what is known wins)."""
    if not vi.type.HasField("tensor_type"):
        return
    if vi.type.tensor_type.elem_type and not g.get_type(vi.name):
        g.set_type(vi.name, vi.type.tensor_type.elem_type)
    shape = _shape_of(vi.type)
    if shape is not None and g.get_shape(vi.name) is None:
        g.set_shape(vi.name, shape)


def model_to_builder(model: ModelProto, *, verbose: int = 0) -> GraphBuilder:
    """Creates a GraphBuilder holding the main graph of ``model``.

    Types and shapes come from :func:`onnx.shape_inference.infer_shapes` and the
    model's value_info; local functions and opsets are kept.
    """
    opsets = {o.domain: o.version for o in model.opset_import}
    g = GraphBuilder(opsets, verbose=verbose)
    try:
        inferred = onnx.shape_inference.infer_shapes(model, data_prop=True)
    except Exception:  # a model the inference cannot handle: keep what it declares
        inferred = model
    graph = model.graph
    _all_names(graph, g._names)
    infos = {}
    for vi in list(inferred.graph.value_info) + list(graph.value_info):
        infos[vi.name] = vi
    for vi in [*graph.input, *graph.output, *inferred.graph.input, *inferred.graph.output]:
        if vi.name not in infos or vi.type.tensor_type.HasField("shape"):
            infos[vi.name] = vi
    init_names = {i.name for i in graph.initializer}
    for vi in graph.input:
        g.inputs.append(vi.name)
    for init in graph.initializer:
        g.initializers[init.name] = TensorProtoRef(init)
        g.set_type(init.name, init.data_type)
        g.set_shape(init.name, tuple(init.dims))
    for name, vi in infos.items():
        if name in init_names or not vi.type.HasField("tensor_type"):
            continue
        if vi.type.tensor_type.elem_type:
            g.set_type(name, vi.type.tensor_type.elem_type)
        shape = _shape_of(vi.type)
        if shape is not None:
            g.set_shape(name, shape)
    _subgraph_infos(inferred.graph, g)
    g.nodes.extend(graph.node)
    g.outputs.extend(o.name for o in graph.output)
    for f in model.functions:
        g.functions[(f.domain, f.name)] = f
    return g
