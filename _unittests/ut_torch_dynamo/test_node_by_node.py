"""onnxruntime node by node: every intermediate result kept, the first node which
differs from the expected values (reference evaluator, eager torch) found."""

import functools

import numpy as np
import onnx
import pytest
import torch
from onnx import TensorProto, helper, numpy_helper
from torch._dynamo.backends.common import aot_autograd

from experimental_experiment.ext_test_case import run_onnx
from experimental_experiment.torch_dynamo import onnx_debug_backend
from experimental_experiment.torch_dynamo.node_by_node import NodeByNodeRunner, outer_names
from experimental_experiment.torch_interpreter import to_onnx


class Model(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = torch.nn.Linear(4, 3)

    def forward(self, x):
        y = self.lin(x).relu()
        return torch.cond(y.sum() > 0, lambda y: y * 2 + x.shape[0], lambda y: y - 1, (y,))


SIZES = (3, 6)


@pytest.mark.parametrize("n", SIZES)
def test_runner_agrees_with_the_whole_model(n):
    model = Model().eval()
    onx = to_onnx(model, (torch.randn(2, 4),), dynamic_shapes=({0: "n"},))
    x = torch.randn(n, 4)
    report = NodeByNodeRunner(onx).run({"x": x.numpy()}, expected="reference")
    assert report.first is None, str(report)
    assert len(report.nodes) == len(onx.graph.node)
    # every node output was compared with the reference evaluator's value
    assert all(r.max_diff is not None for r in report.nodes), str(report)
    got = report.results[onx.graph.output[0].name]
    np.testing.assert_allclose(got, run_onnx(onx, [x])[0], atol=1e-6)
    with torch.no_grad():
        np.testing.assert_allclose(got, model(x).numpy(), atol=1e-5)


def _chain(op_b: str) -> onnx.ModelProto:
    """x -> Mul(x, 2) -> <op_b>(., 3) -> Neg -> y, then Abs."""
    nodes = [
        helper.make_node("Mul", ["x", "two"], ["a"], name="A"),
        helper.make_node(op_b, ["a", "three"], ["b"], name="B"),
        helper.make_node("Neg", ["b"], ["c"], name="C"),
        helper.make_node("Abs", ["c"], ["y"], name="D"),
    ]
    graph = helper.make_graph(
        nodes,
        "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["n"])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["n"])],
        [
            numpy_helper.from_array(np.array(2, np.float32), "two"),
            numpy_helper.from_array(np.array(3, np.float32), "three"),
        ],
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)])


@pytest.mark.parametrize("n", SIZES)
def test_first_differing_node(n):
    x = np.arange(n, dtype=np.float32) + 1
    good = NodeByNodeRunner(_chain("Add")).run({"x": x}, expected="reference")
    assert good.first is None
    # node B computes a Sub instead of an Add: B and every node after it differ,
    # B is the first one
    bad = NodeByNodeRunner(_chain("Sub")).run({"x": x}, expected=good.results)
    assert bad.first is not None and bad.first.name == "B" and bad.first.index == 1
    assert bad.first.max_diff == pytest.approx(6.0)
    assert [r.ok for r in bad.nodes] == [True, False, False, False]
    np.testing.assert_allclose(bad.results["y"], np.abs(-(x * 2 - 3)))


def test_node_onnxruntime_cannot_run():
    model = _chain("Add")
    model.graph.node[2].op_type = "NotAnOperator"
    report = NodeByNodeRunner(model).run({"x": np.ones(3, np.float32)})
    assert report.first is not None and report.first.name == "C"
    assert "NotAnOperator" in report.first.error
    assert len(report.nodes) == 3  # stops at the node which cannot run


def test_outer_names_of_a_subgraph():
    onx = to_onnx(Model(), (torch.randn(2, 4),), dynamic_shapes=({0: "n"},))
    node = next(n for n in onx.graph.node if n.op_type == "If")
    names = outer_names(node)
    # the branches read the relu result and a size computed outside
    assert names and all(
        any(nm in n.output for n in onx.graph.node) or nm in {i.name for i in onx.graph.initializer}
        for nm in names
    ), names


@pytest.mark.parametrize("compare", ["eager", "reference"])
def test_debug_backend_node_by_node(compare):
    model = Model().eval()
    reports: list = []
    compiler = functools.partial(
        onnx_debug_backend, node_by_node=True, compare=compare, reports=reports
    )
    compiled = torch.compile(
        model, backend=aot_autograd(fw_compiler=compiler), fullgraph=True, dynamic=True
    )
    for n in SIZES:
        x = torch.randn(n, 4)
        with torch.no_grad():
            expected = model(x)
            got = compiled(x)
        torch.testing.assert_close(got, expected, atol=1e-5, rtol=1e-4)
    assert len(reports) == len(SIZES)
    for report in reports:
        assert report.first is None, str(report)
        # the names the exporter kept from the FX graph were compared
        assert sum(r.max_diff is not None for r in report.nodes) >= 2, str(report)


def test_debug_backend_rejects_unknown_comparison():
    compiler = functools.partial(onnx_debug_backend, node_by_node=True, compare="torch")
    compiled = torch.compile(Model(), backend=aot_autograd(fw_compiler=compiler))
    with pytest.raises(Exception, match="compare must be"):
        with torch.no_grad():
            compiled(torch.randn(3, 4))
