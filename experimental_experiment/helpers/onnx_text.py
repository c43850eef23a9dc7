"""A readable text dump of an ONNX model (never imports torch).

One line per input, output, initializer and node; subgraphs (``If``, ``Loop``,
``Scan``) and local functions are indented under their owner::

    opset: ''=18
    input: x FLOAT[batch,4]
    init: w FLOAT[8,4] (32 values)
    Gemm(x, w, transB=1) -> y
    output: y FLOAT[batch,8]
"""

from __future__ import annotations

import numpy as np
import onnx
from onnx import numpy_helper

_INDENT = "    "


def _dim(d: onnx.TensorShapeProto.Dimension) -> str:
    if d.HasField("dim_value"):
        return str(d.dim_value)
    return d.dim_param or "?"


def type_text(tp: onnx.TypeProto) -> str:
    """``FLOAT[batch,4]`` for a tensor type, ``seq(...)``/``opt(...)`` around it."""
    kind = tp.WhichOneof("value")
    if kind == "tensor_type" or kind == "sparse_tensor_type":
        tt = getattr(tp, kind)
        name = onnx.TensorProto.DataType.Name(tt.elem_type) if tt.elem_type else "?"
        if not tt.HasField("shape"):
            return name
        return f"{name}[{','.join(_dim(d) for d in tt.shape.dim)}]"
    if kind == "sequence_type":
        return f"seq({type_text(tp.sequence_type.elem_type)})"
    if kind == "optional_type":
        return f"opt({type_text(tp.optional_type.elem_type)})"
    return kind or "?"


def _values_text(arr: np.ndarray, max_values: int = 4) -> str:
    flat = arr.ravel()
    shown = ",".join(str(v) for v in flat[:max_values].tolist())
    return shown + (",..." if flat.size > max_values else "")


def tensor_text(t: onnx.TensorProto, max_values: int = 4) -> str:
    """Name, type, shape and the first values of an initializer."""
    name = onnx.TensorProto.DataType.Name(t.data_type)
    shape = ",".join(str(d) for d in t.dims)
    size = int(np.prod(t.dims)) if t.dims else 1
    if t.data_location == onnx.TensorProto.EXTERNAL:
        return f"{t.name} {name}[{shape}] (external data)"
    try:
        arr = numpy_helper.to_array(t)
    except Exception:  # types numpy cannot hold
        return f"{t.name} {name}[{shape}] ({size} values)"
    if size <= max_values:
        return f"{t.name} {name}[{shape}] = [{_values_text(arr, max_values)}]"
    return f"{t.name} {name}[{shape}] ({size} values: {_values_text(arr, max_values)})"


def _attr_text(att: onnx.AttributeProto) -> str:
    if att.ref_attr_name:
        return f"{att.name}=@{att.ref_attr_name}"
    if att.type == onnx.AttributeProto.GRAPH:
        return f"{att.name}=<graph>"
    if att.type == onnx.AttributeProto.GRAPHS:
        return f"{att.name}=<{len(att.graphs)} graphs>"
    if att.type == onnx.AttributeProto.TENSOR:
        t = att.t
        arr = numpy_helper.to_array(t)
        return (
            f"{att.name}={onnx.TensorProto.DataType.Name(t.data_type)}"
            f"[{','.join(map(str, t.dims))}]:[{_values_text(arr)}]"
        )
    value = onnx.helper.get_attribute_value(att)
    if isinstance(value, bytes):
        value = value.decode("utf-8", errors="replace")
    elif isinstance(value, list):
        value = [v.decode("utf-8", errors="replace") if isinstance(v, bytes) else v for v in value]
    if isinstance(value, float):
        value = f"{value:g}"
    return f"{att.name}={value!r}" if isinstance(value, str) else f"{att.name}={value}"


def node_text(node: onnx.NodeProto) -> str:
    """``Op(inputs, attributes) -> outputs``, the domain as a prefix when not ''."""
    op = f"{node.domain}.{node.op_type}" if node.domain else node.op_type
    args = [i if i else "''" for i in node.input]
    args += [_attr_text(a) for a in node.attribute]
    return f"{op}({', '.join(args)}) -> {', '.join(node.output)}"


def _graph_lines(graph: onnx.GraphProto, indent: str, max_values: int) -> list[str]:
    lines = [f"{indent}input: {i.name} {type_text(i.type)}" for i in graph.input]
    lines += [f"{indent}init: {tensor_text(t, max_values)}" for t in graph.initializer]
    lines += [f"{indent}sparse init: {t.values.name}" for t in graph.sparse_initializer]
    for node in graph.node:
        lines.append(indent + node_text(node))
        for att in node.attribute:
            subs = [att.g] if att.type == onnx.AttributeProto.GRAPH else list(att.graphs)
            for sub in subs:
                lines.append(f"{indent}{_INDENT}-- {att.name}: {sub.name}")
                lines.extend(_graph_lines(sub, indent + _INDENT * 2, max_values))
    lines += [f"{indent}output: {o.name} {type_text(o.type)}" for o in graph.output]
    return lines


def _function_lines(f: onnx.FunctionProto, max_values: int) -> list[str]:
    head = f"function {f.domain}.{f.name}({', '.join(f.input)})"
    if f.attribute or f.attribute_proto:
        names = list(f.attribute) + [a.name for a in f.attribute_proto]
        head += f" attributes={names}"
    lines = [head]
    for node in f.node:
        lines.append(_INDENT + node_text(node))
    lines.append(f"{_INDENT}return {', '.join(f.output)}")
    return lines


def pretty_onnx(
    model: onnx.ModelProto | onnx.GraphProto | onnx.FunctionProto, max_values: int = 4
) -> str:
    """Returns a readable text dump of a model, a graph or a function.

    .. code-block:: python

        import onnx
        from experimental_experiment.helpers import pretty_onnx

        print(pretty_onnx(onnx.load("model.onnx"), max_values=2))

    Args:
        model: what to print
        max_values: number of values shown for every initializer

    Returns:
        the text, one line per input, initializer, node and output
    """
    if isinstance(model, onnx.FunctionProto):
        return "\n".join(_function_lines(model, max_values))
    if isinstance(model, onnx.GraphProto):
        return "\n".join(_graph_lines(model, "", max_values))
    opsets = ", ".join(f"{o.domain!r}={o.version}" for o in model.opset_import)
    lines = [f"opset: {opsets}", f"ir_version: {model.ir_version}"]
    if model.producer_name:
        lines.append(f"producer: {model.producer_name} {model.producer_version}".rstrip())
    lines.extend(_graph_lines(model.graph, "", max_values))
    for f in model.functions:
        lines.append("")
        lines.extend(_function_lines(f, max_values))
    return "\n".join(lines)
