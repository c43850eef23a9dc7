"""Writes a GraphBuilder as an onnx.ModelProto."""

from __future__ import annotations

import numpy as np
from onnx import ModelProto, TensorProto, TypeProto, ValueInfoProto, helper, numpy_helper

from .. import __version__
from ..progress import sub_bar
from ._arrays import contiguous

MAX_IR_VERSION = 13


def make_value_info(name: str, elem_type: int, shape) -> ValueInfoProto:
    """A tensor value info; string dims become ``dim_param``, None stays unknown."""
    vi = ValueInfoProto()
    vi.name = name
    tt = vi.type.tensor_type
    tt.elem_type = elem_type or TensorProto.UNDEFINED
    if shape is not None:
        tt.shape.SetInParent()
        for d in shape:
            dim = tt.shape.dim.add()
            if isinstance(d, int):
                dim.dim_value = d
            elif isinstance(d, str):
                dim.dim_param = d
    return vi


def tensor_proto(name: str, value) -> TensorProto:
    """Serializes an initializer value (numpy array or reference object)."""
    if isinstance(value, np.ndarray):
        return numpy_helper.from_array(value, name=name)
    return value.to_tensor_proto(name)


#: element types numpy_helper.from_array packs (sub-byte) or writes as strings
_PACKED = frozenset(
    {
        TensorProto.STRING,
        TensorProto.INT4,
        TensorProto.UINT4,
        TensorProto.FLOAT4E2M1,
        TensorProto.INT2,
        TensorProto.UINT2,
        TensorProto.FLOAT6E2M3,
        TensorProto.FLOAT6E3M2,
    }
)


def _raw_type(value) -> int | None:
    """The element type of an array :func:`numpy_helper.from_array` writes as raw bytes,
    None for the ones it packs or writes as strings (or another object)."""
    if (
        not isinstance(value, np.ndarray)
        or value.dtype == object
        or np.issubdtype(value.dtype, np.str_)
    ):
        return None
    elem_type = helper.np_dtype_to_tensor_dtype(value.dtype)
    return None if elem_type in _PACKED else elem_type


def _fill_array(proto: TensorProto, name: str, value: np.ndarray, elem_type: int) -> None:
    """Writes ``value`` into ``proto`` (an element just added to the graph) as
    :func:`numpy_helper.from_array` does, without the copy appending its result makes."""
    proto.dims.extend(value.shape)
    if name:
        proto.name = name
    proto.data_type = elem_type
    proto.raw_data = numpy_helper.tobytes_little_endian(contiguous(value))


def ir_version_for(opsets: dict[str, int]) -> int:
    """Smallest IR version for the default opset, capped at what onnxruntime runs."""
    ir = helper.find_min_ir_version_for([helper.make_opsetid("", opsets[""])])
    return min(max(ir, 8), MAX_IR_VERSION)


def _shape_or_rank(g, name: str):
    """The shape, or unknown dims when only the rank is known (the checker wants a shape)."""
    shape = g.get_shape(name)
    if shape is None and g.get_rank(name) is not None:
        return (None,) * g.get_rank(name)
    return shape


def _size(value) -> int:
    "Bytes of an initializer for the progress bar (0 when the value does not say)."
    return int(getattr(value, "nbytes", 0))


def builder_to_model(g, make_initializer=tensor_proto, progress=None) -> ModelProto:
    """Builds the ModelProto from the builder's state (no copy of numpy buffers);
    ``make_initializer(name, value)`` makes every initializer's TensorProto;
    ``progress`` (a ``Progress`` or None) counts the bytes of the initializers."""
    inputs = [make_value_info(n, g.get_type(n), _shape_or_rank(g, n)) for n in g.inputs]
    outputs = [make_value_info(n, g.get_type(n), _shape_or_rank(g, n)) for n in g.outputs]
    # filled in place: make_graph then make_model would copy every initializer twice
    model = ModelProto()
    model.ir_version = ir_version_for(g.opsets)
    model.opset_import.extend(helper.make_opsetid(d, v) for d, v in sorted(g.opsets.items()))
    model.graph.name = "experiment"
    model.graph.node.extend(g.nodes)
    model.graph.input.extend(inputs)
    model.graph.output.extend(outputs)
    total = sum(_size(v) for v in g.initializers.values()) if progress else None
    with sub_bar(progress, total, "serialize", unit="B") as bar:
        for name, value in g.initializers.items():
            # written where it stays: appending a proto would copy its bytes once more
            # (append costs 3 to 4 times the copy of the bytes)
            default = make_initializer is tensor_proto
            if default and hasattr(value, "fill_tensor_proto"):
                value.fill_tensor_proto(model.graph.initializer.add(), name)
            elif default and (elem_type := _raw_type(value)) is not None:
                _fill_array(model.graph.initializer.add(), name, value, elem_type)
            else:
                model.graph.initializer.append(make_initializer(name, value))
            bar.update(_size(value))
    model.functions.extend(g.functions.values())
    for key, value in sorted(getattr(g, "metadata_props", {}).items()):
        model.metadata_props.add(key=key, value=value)
    model.producer_name = "experimental_experiment"
    model.producer_version = __version__
    return model


def type_proto(elem_type: int, shape) -> TypeProto:
    """TypeProto of a tensor (used for subgraph inputs)."""
    return make_value_info("", elem_type, shape).type
