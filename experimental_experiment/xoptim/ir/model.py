"""Loading a ModelProto into an ``ir.Model`` (with inferred shapes) and back."""

from __future__ import annotations

import onnx
import onnx_ir as ir


def load(model: onnx.ModelProto | str, *, infer_shapes: bool = True) -> ir.Model:
    """Loads ``model`` into an ``ir.Model``; the weights stored outside are not read.

    :param model: a ModelProto or a filename
    :param infer_shapes: runs onnx's shape inference first (the patterns check ranks and
        shapes, a model saved by the builder has no ``value_info``)
    :return: the IR model

    .. code-block:: python

        from experimental_experiment.xoptim.ir import load

        m = load("model.onnx")
        print(m.graph.num_nodes())
    """
    if isinstance(model, str):
        model = onnx.load(model, load_external_data=False)
    if infer_shapes:
        model = onnx.shape_inference.infer_shapes(model)
    return ir.serde.deserialize_model(model)


def save(model: ir.Model) -> onnx.ModelProto:
    """Converts the IR model back to a ModelProto.

    :param model: the IR model
    :return: a ModelProto

    .. code-block:: python

        from experimental_experiment.xoptim.ir import load, save

        proto = save(load("model.onnx"))
    """
    return ir.serde.serialize_model(model)
