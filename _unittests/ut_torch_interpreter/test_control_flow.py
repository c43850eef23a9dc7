"""Control flow: torch.cond -> If, scan -> Scan, while_loop -> Loop, map -> Scan.

Every model is exported with dynamic shapes and checked with onnxruntime against eager
torch on several input sets (other sizes, both branches of each test).
"""

import numpy as np
import onnx
import pytest
import torch
from onnx import TensorProto
from torch._higher_order_ops.scan import scan
from torch._higher_order_ops.while_loop import while_loop

from experimental_experiment.ext_test_case import check_export, run_onnx
from experimental_experiment.torch_interpreter import Dispatcher, ExportError, to_onnx
from experimental_experiment.xbuilder import GraphBuilder
from experimental_experiment.xoptim import optimize_builder

DS = ({0: "batch"},)


def _ops(onx: onnx.ModelProto) -> list[str]:
    return [n.op_type for n in onx.graph.node]


def _sign_inputs():
    """Inputs taking both branches of a test on x.sum() > 0, on two sizes."""
    return [(torch.rand(5, 3) + 0.1,), (-torch.rand(7, 3) - 0.1,), (torch.rand(2, 3),)]


# torch.cond -> If
class CondOneOutput(torch.nn.Module):
    def forward(self, x):
        return torch.cond(x.sum() > 0, lambda x: x * 2, lambda x: -x, (x,))


class CondTwoOutputs(torch.nn.Module):
    def forward(self, x):
        def true_fn(x):
            return x * 2, x.sum(dim=1)

        def false_fn(x):
            return x - 1, x.amax(dim=1)

        return torch.cond(x.sum() > 0, true_fn, false_fn, (x,))


class CondNested(torch.nn.Module):
    def forward(self, x):
        def inner_true(x):
            return x + 1

        def inner_false(x):
            return x - 1

        def true_fn(x):
            return torch.cond(x.mean() > 0.5, inner_true, inner_false, (x,)) * 3

        def false_fn(x):
            return x.abs()

        return torch.cond(x.sum() > 0, true_fn, false_fn, (x,))


class CondClosure(torch.nn.Module):
    def forward(self, x, bias):
        scale = x.shape[0] * bias.exp()  # a tensor computed outside the branches

        def true_fn(x):
            return x * scale

        def false_fn(x):
            return x + scale

        return torch.cond(x.sum() > 0, true_fn, false_fn, (x,))


class Sub(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = torch.nn.Linear(3, 4)

    def forward(self, x):
        return self.lin(x).relu()


class CondSubmodule(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.sub = Sub()
        self.w = torch.nn.Parameter(torch.randn(4))
        self.register_buffer("b", torch.arange(4, dtype=torch.float32))

    def forward(self, x):
        def true_fn(x):
            return self.sub(x) * self.w

        def false_fn(x):
            return self.sub(-x) + self.b

        return torch.cond(x.sum() > 0, true_fn, false_fn, (x,))


class CondShape(torch.nn.Module):
    def forward(self, x):
        return torch.cond(x.shape[0] > 4, lambda x: x.cos(), lambda x: x.sin() + 1, (x,))


@pytest.mark.parametrize(
    "model",
    [CondOneOutput, CondTwoOutputs, CondNested, CondSubmodule],
    ids=["one_output", "two_outputs", "nested", "submodule"],
)
def test_cond(model):
    onx = check_export(model().eval(), _sign_inputs(), dynamic_shapes=DS)
    assert "If" in _ops(onx)


def test_cond_closure():
    inputs = [(x, torch.randn(3)) for (x,) in _sign_inputs()]
    onx = check_export(CondClosure(), inputs, dynamic_shapes=({0: "batch"}, None))
    assert "If" in _ops(onx)


def test_cond_shape_predicate():
    inputs = [(torch.randn(6, 3),), (torch.randn(3, 3),), (torch.randn(9, 3),)]
    onx = check_export(CondShape(), inputs, dynamic_shapes=DS)
    assert "If" in _ops(onx)


def test_cond_data_dependent_symbool():
    class Model(torch.nn.Module):
        def forward(self, x, n):
            return torch.cond(n.item() > 2, lambda x: x * 2, lambda x: x / 2, (x,))

    inputs = [(torch.randn(3, 2), torch.tensor(4)), (torch.randn(5, 2), torch.tensor(1))]
    onx = check_export(Model(), inputs, dynamic_shapes=({0: "batch"}, None))
    assert "If" in _ops(onx)


def test_cond_int64():
    class Model(torch.nn.Module):
        def forward(self, x):
            return torch.cond(x.sum() > 0, lambda x: x * 2, lambda x: x - 7, (x,))

    inputs = [(torch.randint(0, 5, (4, 2)),), (torch.randint(-5, 0, (6, 2)),)]
    check_export(Model(), inputs, dynamic_shapes=DS)


# scan -> Scan
class ScanCumSum(torch.nn.Module):
    def forward(self, x):
        def body(carry, xi):
            carry = carry + xi
            return carry, carry.clone()

        return scan(body, torch.zeros_like(x[0]), x)


class ScanTwoInputs(torch.nn.Module):
    def forward(self, x, y, a):
        def body(carry, xs):
            xi, yi = xs
            new = carry * 0.5 + xi * yi + a
            return new, (new.sum(), xi - yi)

        return scan(body, torch.zeros_like(x[0]), (x, y))


class ScanReverse(torch.nn.Module):
    def forward(self, x):
        def body(carry, xi):
            carry = carry * 2 + xi
            return carry, carry.clone()

        return scan(body, torch.zeros_like(x[:, 0]), x, dim=1, reverse=True)


class ScanPdist(torch.nn.Module):
    def forward(self, x):
        def dist(y, xi):
            sub = y - xi.reshape((1, -1))
            return y.clone(), torch.sqrt((sub * sub).sum(dim=1))

        return scan(dist, x, x)[1]


def test_scan_cumsum():
    inputs = [(torch.randn(5, 3),), (torch.randn(8, 3),)]
    onx = check_export(ScanCumSum(), inputs, dynamic_shapes=DS)
    assert "Scan" in _ops(onx)


def test_scan_two_inputs_additional():
    inputs = [
        (torch.randn(5, 3), torch.randn(5, 3), torch.randn(3)),
        (torch.randn(2, 4), torch.randn(2, 4), torch.randn(4)),
    ]
    dyn = ({0: "n", 1: "d"}, {0: "n", 1: "d"}, {0: "d"})
    onx = check_export(ScanTwoInputs(), inputs, dynamic_shapes=dyn)
    scan_node = next(n for n in onx.graph.node if n.op_type == "Scan")
    # the additional input is read from the outer scope, not passed as an input
    assert len(scan_node.input) == 3


def test_scan_reverse_dim1():
    inputs = [(torch.randn(5, 3),), (torch.randn(4, 6),)]
    onx = check_export(ScanReverse(), inputs, dynamic_shapes=({0: "n", 1: "m"},))
    assert "Scan" in _ops(onx)


def test_cond_inside_scan():
    class Model(torch.nn.Module):
        def forward(self, x):
            def body(c, xi):
                y = torch.cond(xi.sum() > 0, lambda a, b: a + b, lambda a, b: a - b, (c, xi))
                return y, y.clone()

            return scan(body, torch.zeros_like(x[0]), x)

    inputs = [(torch.randn(4, 3),), (torch.randn(9, 3),)]
    check_export(Model(), inputs, dynamic_shapes=DS)


def test_scan_pdist():
    inputs = [(torch.randn(5, 4),), (torch.randn(9, 4),)]
    onx = check_export(ScanPdist(), inputs, dynamic_shapes=DS)
    x = torch.randn(6, 4)
    got = run_onnx(onx, [x])[0]
    np.testing.assert_allclose(got, torch.cdist(x, x).numpy(), atol=1e-4)


# while_loop -> Loop, map -> Scan
class WhileCounter(torch.nn.Module):
    def forward(self, x):
        def cond_fn(i, acc):
            return i < x.shape[0]

        def body_fn(i, acc):
            return i + 1, acc * 0.5 + x.index_select(0, i.reshape(1)).squeeze(0)

        return while_loop(cond_fn, body_fn, (torch.tensor(0), torch.zeros_like(x[0])))


class WhileNoIteration(torch.nn.Module):
    """The condition is false before the first iteration for small inputs."""

    def forward(self, x):
        def cond_fn(s):
            return s.sum() < 10

        def body_fn(s):
            return (s + 1,)

        return while_loop(cond_fn, body_fn, (x,))


def test_while_loop_counter():
    inputs = [(torch.randn(5, 3),), (torch.randn(2, 3),)]
    onx = check_export(WhileCounter(), inputs, dynamic_shapes=DS)
    assert "Loop" in _ops(onx)


def test_while_loop_condition_before_first_iteration():
    inputs = [(torch.zeros(2, 2),), (torch.full((3, 2), 5.0),), (torch.ones(1, 2),)]
    check_export(WhileNoIteration(), inputs, dynamic_shapes=DS)


def test_map():
    class Model(torch.nn.Module):
        def forward(self, x, y):
            return torch._higher_order_ops.map(lambda xi, y: xi * y + xi.sum(), x, y)

    inputs = [(torch.randn(5, 3), torch.randn(3)), (torch.randn(8, 3), torch.randn(3))]
    onx = check_export(Model(), inputs, dynamic_shapes=({0: "n"}, None))
    assert "Scan" in _ops(onx)


# a loop and a test in one model
class LoopAndCond(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = torch.nn.Linear(4, 4)

    def forward(self, x):
        h = self.lin(x)

        def body(carry, hi):
            carry = carry + hi
            return carry, carry.clone()

        last, cum = scan(body, torch.zeros_like(h[0]), h)
        return torch.cond(last.sum() > 0, lambda c: c * 2, lambda c: c.abs(), (cum,))


def test_loop_and_cond():
    model = LoopAndCond().eval()
    inputs = [(torch.randn(5, 4),), (torch.randn(3, 4) * 10,), (-torch.randn(7, 4) * 10,)]
    onx = check_export(model, inputs, dynamic_shapes=DS)
    assert "Scan" in _ops(onx) and "If" in _ops(onx)


# errors
@torch.library.custom_op("test_control_flow::no_converter", mutates_args=())
def no_converter(x: torch.Tensor) -> torch.Tensor:
    return x.clone()


no_converter.register_fake(lambda x: torch.empty_like(x))


def test_error_names_body_and_user_line():
    class Model(torch.nn.Module):
        def forward(self, x):
            return torch.cond(x.sum() > 0, no_converter, lambda x: x + 1, (x,))

    def failing(g, x):
        raise ValueError("this converter fails")

    dispatcher = Dispatcher({torch.ops.test_control_flow.no_converter: failing})
    with pytest.raises(ExportError) as e:
        to_onnx(Model(), (torch.randn(3, 2),), dynamic_shapes=DS, dispatcher=dispatcher)
    text = str(e.value)
    assert "this converter fails" in text, text
    assert "true_graph_0" in text, text
    assert "test_control_flow.py" in text and "torch.cond(x.sum() > 0" in text, text
    assert "eval_with_key" not in text.split("from the user's code:")[1].splitlines()[0]


# builder passes keep what subgraphs use from the outer scope
def test_passes_keep_outer_names_used_in_subgraphs():
    g = GraphBuilder(18)
    x = g.make_tensor_input("x", TensorProto.FLOAT, ("n",))
    c = g.op.Add(g.make_constant(np.array([1.0], dtype=np.float32)), 2.0)  # folded
    y = g.op.Identity(g.op.Mul(x, 3.0))  # an Identity removed by the passes
    branches = {}
    for key, op in [("then_branch", "Add"), ("else_branch", "Sub")]:
        child = g.make_subgraph_builder()
        child.outputs = [child.make_node(op, [y, c], 1)]
        child.set_type(child.outputs[0], TensorProto.FLOAT)
        branches[key] = child.to_graph_proto(key)
    cond = g.op.Greater(g.op.ReduceSum(x, keepdims=0), 0.0)
    g.make_tensor_output(g.op.If(cond, **branches), elem_type=TensorProto.FLOAT, shape=("n",))
    optimize_builder(g)
    onx = g.to_onnx()
    onnx.checker.check_model(onx, full_check=True)
    xv = np.array([1.0, 2.0], dtype=np.float32)
    import onnxruntime

    sess = onnxruntime.InferenceSession(onx.SerializeToString(), providers=["CPUExecutionProvider"])
    np.testing.assert_allclose(sess.run(None, {"x": xv})[0], xv * 3 + 3)
    np.testing.assert_allclose(sess.run(None, {"x": -xv})[0], -xv * 3 - 3)
    # the constant was folded, the Identity removed: both renamed inside the branches
    assert sorted(_ops(onx)) == ["Greater", "If", "Mul", "ReduceSum"], _ops(onx)
