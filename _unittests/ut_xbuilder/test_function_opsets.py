"""Local functions written for another opset of the main domain than the model's."""

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper

from experimental_experiment.xbuilder import GraphBuilder, GraphBuilderError
from experimental_experiment.xbuilder.function_opsets import (
    align_function_opset,
    changed_operators,
)


def _function(nodes, opset):
    return helper.make_function(
        "h4.custom", "F", ["x"], ["y"], nodes, [helper.make_opsetid("", opset)]
    )


def _model_with(function, opset):
    g = GraphBuilder(opset)
    x = g.make_tensor_input("x", TensorProto.FLOAT, ("batch", 3))
    g.add_function(function)
    y = g.make_node("F", [x], domain="h4.custom")
    g.make_tensor_output(y, elem_type=TensorProto.FLOAT, shape=("batch", 3), output_name="y")
    return g.to_onnx()


def test_same_definitions_move_to_the_model_opset():
    f = _function(
        [helper.make_node("Tanh", ["x"], ["t"]), helper.make_node("Mul", ["t", "t"], ["y"])], 18
    )
    model = _model_with(f, 20)
    onnx.checker.check_model(model, full_check=True)
    (fct,) = model.functions
    assert {o.domain: o.version for o in fct.opset_import}[""] == 20
    sess = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    for batch in (2, 5):
        x = np.random.randn(batch, 3).astype(np.float32)
        np.testing.assert_allclose(sess.run(None, {"x": x})[0], np.tanh(x) ** 2, rtol=1e-5)


def test_changed_definition_is_a_typed_error():
    # DFT takes its axis as an input from opset 20: the opset-18 body means something else
    f = _function([helper.make_node("DFT", ["x"], ["y"], axis=1)], 18)
    assert changed_operators(f, 18, 20) == ["DFT"]
    with pytest.raises(GraphBuilderError, match="DFT.*target_opset=18"):
        _model_with(f, 20)


def test_same_version_is_unchanged():
    f = _function([helper.make_node("Tanh", ["x"], ["y"])], 20)
    assert align_function_opset(f, 20) is f


def test_subgraph_operators_are_checked():
    branch = helper.make_graph(
        [helper.make_node("DFT", ["x"], ["z"], axis=1)],
        "b",
        [],
        [helper.make_tensor_value_info("z", TensorProto.FLOAT, None)],
    )
    f = _function(
        [
            helper.make_node("Constant", [], ["c"], value_int=1),
            helper.make_node("Cast", ["c"], ["b"], to=TensorProto.BOOL),
            helper.make_node("If", ["b"], ["y"], then_branch=branch, else_branch=branch),
        ],
        18,
    )
    # Cast, Constant and If only took new types at opset 19; DFT changed its inputs
    assert changed_operators(f, 18, 20) == ["DFT"]


def test_renamed_attribute_values_are_not_compatible():
    # GridSample renamed its modes at opset 20 (bilinear -> linear): the default changed
    f = _function([helper.make_node("GridSample", ["x", "x"], ["y"])], 16)
    assert changed_operators(f, 16, 20) == ["GridSample"]
