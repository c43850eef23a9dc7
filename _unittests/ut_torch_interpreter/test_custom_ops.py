"""Custom operators (torch.library.custom_op) converted through a Dispatcher:
python converters, ONNX functions in a custom domain, onnxscript functions
(OxsDispatcher), operators mutating their inputs (auto_functionalized)."""

import numpy as np
import onnx
import pytest
import torch
from onnx import helper

from experimental_experiment.ext_test_case import assert_close, check_export, run_onnx
from experimental_experiment.torch_interpreter import (
    Dispatcher,
    UnsupportedOpError,
    to_onnx,
)
from experimental_experiment.torch_interpreter.oxs_dispatcher import OxsDispatcher


@torch.library.custom_op("h4test::scaled_tanh", mutates_args=())
def scaled_tanh(x: torch.Tensor, scale: float) -> torch.Tensor:
    return torch.from_numpy(np.tanh(x.detach().numpy()) * scale)


@scaled_tanh.register_fake
def _(x, scale):
    return torch.empty_like(x)


@torch.library.custom_op("h4test::add_scaled_", mutates_args=("x",))
def add_scaled_(x: torch.Tensor, y: torch.Tensor, alpha: float) -> None:
    x.add_(y * alpha)


@torch.library.custom_op("h4test::norm_and_count_", mutates_args=("count",))
def norm_and_count_(x: torch.Tensor, count: torch.Tensor) -> torch.Tensor:
    count.add_(1)
    return x / x.abs().max()


@norm_and_count_.register_fake
def _(x, count):
    return torch.empty_like(x)


class TanhModel(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.linear = torch.nn.Linear(4, 4)

    def forward(self, x):
        return scaled_tanh(self.linear(x), 2.0)


def convert_scaled_tanh(g, x, scale):
    return g.op.Mul(g.op.Tanh(x), scale)


TWO_SIZES = [(torch.randn(3, 4),), (torch.randn(7, 4),)]


@pytest.mark.parametrize("key", ["overload", "packet", "custom_op_def", "name", "name_overload"])
def test_dispatcher_keys(key):
    op = {
        "overload": torch.ops.h4test.scaled_tanh.default,
        "packet": torch.ops.h4test.scaled_tanh,
        "custom_op_def": scaled_tanh,
        "name": "h4test::scaled_tanh",
        "name_overload": "h4test::scaled_tanh.default",
    }[key]
    dispatcher = Dispatcher({op: convert_scaled_tanh})
    assert torch.ops.h4test.scaled_tanh.default in dispatcher
    check_export(
        TanhModel().eval(), TWO_SIZES, dynamic_shapes=({0: "batch"},), dispatcher=dispatcher
    )


def test_dispatcher_bad_keys():
    with pytest.raises(TypeError, match="qualified operator name"):
        Dispatcher({"scaled_tanh": convert_scaled_tanh})
    with pytest.raises(TypeError, match="torch operators"):
        Dispatcher({3: convert_scaled_tanh})


def test_missing_converter():
    with pytest.raises(UnsupportedOpError, match="h4test.scaled_tanh"):
        to_onnx(TanhModel(), TWO_SIZES[0])


def test_onnx_function_in_custom_domain():
    fct = helper.make_function(
        "h4.custom",
        "ScaledTanh",
        ["x"],
        ["y"],
        [
            helper.make_node("Tanh", ["x"], ["t"]),
            helper.make_node("Constant", [], ["s"], value_float=2.0),
            helper.make_node("Mul", ["t", "s"], ["y"]),
        ],
        [helper.make_opsetid("", 18)],
    )

    def convert(g, x, scale):
        assert scale == 2.0
        g.add_function(fct)
        return g.make_node("ScaledTanh", [x], domain="h4.custom")

    onx = check_export(
        TanhModel().eval(),
        TWO_SIZES,
        dynamic_shapes=({0: "batch"},),
        dispatcher=Dispatcher({scaled_tanh: convert}),
    )
    assert [(f.domain, f.name) for f in onx.functions] == [("h4.custom", "ScaledTanh")]
    assert "ScaledTanh" in [n.op_type for n in onx.graph.node]


def test_oxs_dispatcher_onnxscript_function():
    onnxscript = pytest.importorskip("onnxscript")
    from onnxscript import opset18 as op

    @onnxscript.script(onnxscript.values.Opset("h4.oxs", 1), default_opset=op)
    def oxs_scaled_tanh(x, scale: float):
        return op.Mul(op.Tanh(x), op.CastLike(op.Constant(value_float=scale), x))

    onx = check_export(
        TanhModel().eval(),
        TWO_SIZES,
        dynamic_shapes=({0: "batch"},),
        dispatcher=OxsDispatcher({scaled_tanh: oxs_scaled_tanh}),
    )
    assert any(f.domain == "h4.oxs" for f in onx.functions)
    # python converters are kept as they are
    check_export(
        TanhModel().eval(),
        TWO_SIZES,
        dynamic_shapes=({0: "batch"},),
        dispatcher=OxsDispatcher({scaled_tanh: convert_scaled_tanh}),
    )


def convert_add_scaled_(g, x, y, alpha):
    # returns the new value of the mutated input x
    return g.op.Add(x, g.op.Mul(y, alpha))


class InplaceModel(torch.nn.Module):
    def forward(self, x, y):
        x = x.clone()
        add_scaled_(x, y, 0.5)
        return x + 1


class InplaceSliceModel(torch.nn.Module):
    def forward(self, x, y):
        x = x.clone()
        add_scaled_(x[1:3], y, 0.5)
        return x * 2


@pytest.mark.parametrize("cls", [InplaceModel, InplaceSliceModel])
def test_custom_op_mutating_input(cls):
    n = 3 if cls is InplaceModel else 2
    sets = [(torch.randn(3, 4), torch.randn(n, 4)), (torch.randn(3, 6), torch.randn(n, 6))]
    onx = check_export(
        cls(),
        sets,
        dynamic_shapes=({1: "n"}, {1: "n"}),
        dispatcher=Dispatcher({add_scaled_: convert_add_scaled_}),
    )
    assert "Add" in {node.op_type for node in onx.graph.node}


def test_custom_op_output_and_mutation():
    class Model(torch.nn.Module):
        def forward(self, x, count):
            count = count.clone()
            y = norm_and_count_(x, count)
            return y, count * 10

    def convert(g, x, count):
        y = g.op.Div(x, g.op.ReduceMax(g.op.Abs(x), keepdims=0))
        return y, g.op.Add(count, 1.0)  # output, new value of count

    sets = [(torch.randn(3, 4), torch.tensor([2.0])), (torch.randn(5, 4), torch.tensor([7.0]))]
    check_export(
        Model(),
        sets,
        dynamic_shapes=({0: "batch"}, None),
        dispatcher=Dispatcher({"h4test::norm_and_count_": convert}),
    )


def test_custom_op_mutating_wrong_count():
    def convert(g, x, count):
        return g.op.Identity(x)

    with pytest.raises(Exception, match="expected 1 output"):
        to_onnx(
            type(
                "M",
                (torch.nn.Module,),
                {"forward": lambda self, x, c: norm_and_count_(x, c.clone())},
            )(),
            (torch.randn(3, 4), torch.tensor([1.0])),
            dispatcher=Dispatcher({norm_and_count_: convert}),
        )


def test_auto_functionalized_v1_graph_module():
    """Graphs of older torch versions (or inductor settings) use auto_functionalized."""
    ep = torch.export.export(InplaceModel(), (torch.randn(3, 4), torch.randn(3, 4)))
    gm = ep.run_decompositions({}).graph_module
    graph = gm.graph
    v2 = next(n for n in graph.nodes if n.target is torch.ops.higher_order.auto_functionalized_v2)
    with graph.inserting_before(v2):
        v1 = graph.call_function(
            torch.ops.higher_order.auto_functionalized,
            (torch.ops.h4test.add_scaled_.default,),
            {"x": v2.kwargs["_all_bases"][0], "y": v2.kwargs["y"], "alpha": 0.5},
        )
    v1.meta["val"] = v2.meta["val"]
    v2.replace_all_uses_with(v1)
    graph.erase_node(v2)
    gm.recompile()
    x, y = torch.randn(3, 4), torch.randn(3, 4)
    onx = to_onnx(gm, (x, y), dispatcher=Dispatcher({add_scaled_: convert_add_scaled_}))
    assert_close(InplaceModel()(x, y), run_onnx(onx, [x, y])[0], 1e-5, 1e-5)


def test_seed_000_oxs_dispatcher_backend():
    """The block seed 000 inserts into torch's onnxruntime backend, unchanged."""
    from torch._dynamo.backends.common import aot_autograd

    from experimental_experiment.torch_interpreter import to_onnx
    from experimental_experiment.torch_interpreter._torch_models import create_input_names
    from experimental_experiment.torch_interpreter.oxs_dispatcher import OxsDispatcher
    from experimental_experiment.xbuilder import OptimizationOptions

    exported = []

    def compiler(graph_module, args):
        input_names = input_names = create_input_names(graph_module, args)
        dispatcher = OxsDispatcher()
        target_opset = 18
        options = OptimizationOptions(
            remove_unused=True,
            constant_folding=False,
            patterns="default",
            verbose=1,
        )
        onnx_model, builder = to_onnx(
            graph_module,
            tuple(args),
            input_names=input_names,
            options=options,
            verbose=1,
            target_opset=target_opset,
            return_builder=True,
            dispatcher=dispatcher,
        )
        exported.append(onnx_model)

        def run(*inputs):
            return tuple(torch.from_numpy(r) for r in run_onnx(onnx_model, list(inputs)))

        return run

    model = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.ReLU(), torch.nn.Linear(8, 2))
    compiled = torch.compile(model, backend=aot_autograd(fw_compiler=compiler), fullgraph=True)
    x = torch.randn(5, 4)
    with torch.no_grad():
        got, expected = compiled(x), model(x)
    assert len(exported) == 1
    onnx.checker.check_model(exported[0])
    assert_close(expected, got.numpy(), 1e-5, 1e-4)


def test_dispatcher_converter_with_node_context():
    # a user converter declaring ``ctx`` sees the node, its output dtype and shape
    seen = {}

    def convert(g, x, scale, *, ctx):
        seen.update(target=ctx.node.target, dtype=ctx.dtype(), shape=ctx.shape())
        return g.op.Mul(g.op.Tanh(x), scale)

    dispatcher = Dispatcher({scaled_tanh: convert})
    check_export(
        TanhModel().eval(), TWO_SIZES, dynamic_shapes=({0: "batch"},), dispatcher=dispatcher
    )
    assert seen == {
        "target": torch.ops.h4test.scaled_tanh.default,
        "dtype": onnx.TensorProto.FLOAT,
        "shape": ("batch", 4),
    }
