"""The optimizer inside the bodies of local functions.

Expected bodies come from what the patterns and the folding must do; every model is
run with onnxruntime (against eager torch for exported models, against numpy for the
hand-written ones) on two sizes.
"""

import numpy as np
import onnx
import pytest
import torch
from onnx import TensorProto, helper, numpy_helper

from experimental_experiment.ext_test_case import assert_close, run_onnx
from experimental_experiment.torch_interpreter import to_onnx
from experimental_experiment.xbuilder import OptimizationOptions
from experimental_experiment.xoptim import optimize, optimize_model


class Block(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.linear = torch.nn.Linear(4, 4)

    def forward(self, x):
        y = self.linear(x) * 1.0
        return y.transpose(0, 1).transpose(0, 1) + torch.arange(4, dtype=torch.float32) * 2


class TwoBlocks(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.a = Block()
        self.b = Block()

    def forward(self, x):
        return self.b(self.a(x))


def _ops(f) -> list[str]:
    return [n.op_type for n in f.node]


def _export(model, options=None):
    onx = to_onnx(
        model,
        (torch.randn(3, 4),),
        dynamic_shapes=({0: "n"},),
        export_modules_as_functions={Block},
        options=options,
    )
    onnx.checker.check_model(onx, full_check=True)
    for n in (3, 7):
        x = torch.randn(n, 4)
        with torch.no_grad():
            expected = model(x)
        assert_close(expected, run_onnx(onx, [x])[0], 1e-5, 1e-4)
    return onx


def test_exported_function_body_is_optimized():
    model = TwoBlocks().eval()
    before = _export(model, OptimizationOptions(functions=False))
    after = _export(model)
    assert [f.name for f in before.functions] == ["Block"] == [f.name for f in after.functions]
    # small constants are Constant nodes of the body (1.0, 0, 4, 1 of arange, 2)
    assert _ops(before.functions[0]) == ["Constant"] * 5 + [
        "Gemm",
        "Mul",
        "Transpose",
        "Transpose",
        "Range",
        "Cast",
        "Mul",
        "Add",
    ]
    body = after.functions[0]
    # * 1.0 and both transposes vanish, arange(4) * 2 becomes one constant
    assert _ops(body) == ["Constant", "Gemm", "Add"]
    value = numpy_helper.to_array(body.node[0].attribute[0].t)
    np.testing.assert_array_equal(value, np.arange(4, dtype=np.float32) * 2)
    assert list(body.input) == list(before.functions[0].input)
    assert list(body.output) == list(before.functions[0].output)
    # the calls did not change
    assert [list(n.input) for n in after.graph.node] == [list(n.input) for n in before.graph.node]
    again = _export(model)
    assert again.SerializeToString() == after.SerializeToString()


def _function_model(input_types, f_nodes, f_inputs=("x",), attributes=()):
    """A model calling the function ``F`` once per element type of ``input_types``."""
    fct = helper.make_function(
        "local",
        "F",
        list(f_inputs),
        ["y"],
        f_nodes,
        [helper.make_opsetid("", 18)],
        attributes=list(attributes),
    )
    inputs, nodes, outputs = [], [], []
    for k, t in enumerate(input_types):
        inputs.append(helper.make_tensor_value_info(f"x{k}", t, ["n"]))
        nodes.append(helper.make_node("F", [f"x{k}"], [f"y{k}"], domain="local"))
        outputs.append(helper.make_tensor_value_info(f"y{k}", TensorProto.FLOAT, ["n"]))
    graph = helper.make_graph(nodes, "g", inputs, outputs)
    return helper.make_model(
        graph,
        functions=[fct],
        opset_imports=[helper.make_opsetid("", 18), helper.make_opsetid("local", 1)],
    )


def _cast_body():
    return [
        helper.make_node("Constant", [], ["one"], value_float=1.0),
        helper.make_node("Constant", [], ["two"], value_floats=[2.0]),
        helper.make_node("Add", ["two", "two"], ["four"]),
        helper.make_node("Cast", ["x"], ["xf"], to=TensorProto.FLOAT),
        helper.make_node("Mul", ["xf", "one"], ["x1"]),
        helper.make_node("Add", ["x1", "four"], ["y"]),
    ]


def _run(model, feeds):
    import onnxruntime

    sess = onnxruntime.InferenceSession(
        model.SerializeToString(), providers=["CPUExecutionProvider"]
    )
    return sess.run(None, feeds)


@pytest.mark.parametrize("n", [3, 6])
def test_types_from_calls(n):
    """Called with float only: the Cast to float is removed (the input type is known
    from the calls), the product by one too, 2 + 2 folds."""
    model = _function_model([TensorProto.FLOAT, TensorProto.FLOAT], _cast_body())
    res = optimize(model)
    opt = res.model
    onnx.checker.check_model(opt, full_check=True)
    assert _ops(opt.functions[0]) == ["Constant", "Add"], _ops(opt.functions[0])
    assert res.report.applied("optimize_functions") == 4
    x = np.arange(n, dtype=np.float32)
    for got in _run(opt, {"x0": x, "x1": -x}):
        assert got.shape == (n,)
    np.testing.assert_allclose(_run(opt, {"x0": x, "x1": -x}), [x + 4, -x + 4])


def test_types_disagree_between_calls():
    """Called with float and double: the input type is unknown, the Cast stays."""
    model = _function_model([TensorProto.FLOAT, TensorProto.DOUBLE], _cast_body())
    opt = optimize_model(model)
    onnx.checker.check_model(opt, full_check=True)
    assert _ops(opt.functions[0]) == ["Constant", "Cast", "Add"], _ops(opt.functions[0])
    for n in (2, 5):
        x = np.arange(n, dtype=np.float32)
        got = _run(opt, {"x0": x, "x1": x.astype(np.float64)})
        np.testing.assert_allclose(got, [x + 4, x + 4])


def test_function_reading_attributes_is_left():
    body = [
        helper.make_node("Constant", [], ["one"], value_float=1.0),
        helper.make_node("Mul", ["x", "one"], ["x1"]),
        helper.make_node("LeakyRelu", ["x1"], ["y"]),
    ]
    body[2].attribute.append(
        onnx.AttributeProto(name="alpha", ref_attr_name="alpha", type=onnx.AttributeProto.FLOAT)
    )
    model = _function_model([TensorProto.FLOAT], body, attributes=["alpha"])
    opt = optimize_model(model)
    assert _ops(opt.functions[0]) == ["Constant", "Mul", "LeakyRelu"]


def test_subgraph_inside_a_function():
    """An If inside a function body: its branch reads the function's Constant (an
    outer-scope name of the branch) and a product by one vanishes there."""

    def branch(name, op):
        n = helper.make_node(op, ["x", "one"], [f"{name}_t"])
        m = helper.make_node("Mul", [f"{name}_t", "one"], [f"{name}_out"])
        return helper.make_graph(
            [n, m],
            name,
            [],
            [helper.make_tensor_value_info(f"{name}_out", TensorProto.FLOAT, None)],
        )

    body = [
        helper.make_node("Constant", [], ["one"], value_float=1.0),
        helper.make_node("Constant", [], ["zero"], value_float=0.0),
        helper.make_node("ReduceSum", ["x"], ["s"], keepdims=0),
        helper.make_node("Greater", ["s", "zero"], ["b"]),
        helper.make_node(
            "If", ["b"], ["y"], then_branch=branch("then", "Add"), else_branch=branch("else", "Sub")
        ),
    ]
    model = _function_model([TensorProto.FLOAT], body)
    opt = optimize_model(model)
    onnx.checker.check_model(opt, full_check=True)
    fct = opt.functions[0]
    if_node = next(n for n in fct.node if n.op_type == "If")
    branches = {a.name: _ops(a.g) for a in if_node.attribute}
    assert branches == {"then_branch": ["Add"], "else_branch": ["Sub"]}, branches
    for n in (2, 4):
        x = np.arange(n, dtype=np.float32) + 1
        np.testing.assert_allclose(_run(opt, {"x0": x})[0], x + 1)
        np.testing.assert_allclose(_run(opt, {"x0": -x})[0], -x - 1)
