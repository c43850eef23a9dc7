"""The user's inputs are read once (UserInputs) and the stages pass typed values
(PreparedProgram, OutputSpec, SerializationPlan, ToOnnxSettings)."""

import pytest
import torch

from experimental_experiment.torch_interpreter import InvalidArgumentError, to_onnx
from experimental_experiment.torch_interpreter.capture import signature
from experimental_experiment.torch_interpreter.capture.user_inputs import read_user_inputs
from experimental_experiment.torch_interpreter.result.large_model import pin_weights
from experimental_experiment.torch_interpreter.stages import SerializationPlan
from experimental_experiment.xbuilder import GraphBuilder


class Kw(torch.nn.Module):
    def forward(self, x, y, **kw):
        return x + y + kw["z"]


class Counter(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.register_buffer("count", torch.zeros(1))

    def forward(self, x):
        self.count.add_(1)
        return x + self.count


def test_one_export_reads_the_signature_once(monkeypatch):
    built = []
    init = signature.ArgumentLayout.__init__

    def counting(self, *args, **kwargs):
        built.append(1)
        init(self, *args, **kwargs)

    monkeypatch.setattr(signature.ArgumentLayout, "__init__", counting)
    x = torch.randn(3, 4)
    onx = to_onnx(
        Kw(),
        (x, x),
        {"z": x},
        dynamic_shapes={"x": {0: "batch"}, "y": {0: "batch"}, "kw": {"z": {0: "batch"}}},
    )
    assert [i.type.tensor_type.shape.dim[0].dim_param for i in onx.graph.input] == ["batch"] * 3
    assert len(built) == 1


def test_user_inputs_hold_names_spec_and_small_axes():
    x = torch.randn(1, 4)
    inputs = read_user_inputs(
        Kw(), (x, x), {"z": x}, {"x": {0: "batch"}, "kw": {"z": {1: "width"}}}
    )
    assert inputs.arg_names == ["x", "y", "z"]
    assert inputs.leaf_names == ["x", "y", "z"]
    assert inputs.dim_names == {(("x",), 0): "batch", (("z",), 1): "width"}
    assert [w for *_, w in inputs.small] == ["x.shape[0]=1 (batch)"]
    text = inputs.describe("L['x'].size()[0] and L['kwargs']['z'].size()[1]")
    assert "'batch'" in text and "'width'" in text and "L[" not in text


def test_user_inputs_refuse_a_spec_of_the_wrong_type():
    x = torch.randn(3, 4)
    with pytest.raises(InvalidArgumentError, match="must be a dict, tuple or list"):
        read_user_inputs(Kw(), (x, x), {"z": x}, "batch")


def test_mutated_buffer_comes_last():
    onx = to_onnx(Counter(), (torch.randn(2, 1),))
    assert [o.name for o in onx.graph.output] == ["output_0", "count_updated"]


def test_serialization_plan_decides_external_once():
    builder = GraphBuilder(18)
    plan = SerializationPlan(container=False, filename=None)
    assert not plan.may_be_weight_free and not pin_weights(builder, plan)
    plan = SerializationPlan(container=True)
    assert plan.may_be_weight_free and pin_weights(builder, plan) and plan.external


def test_unknown_keyword_names_the_closest_option():
    with pytest.raises(InvalidArgumentError, match="did you mean 'optimize'"):
        to_onnx(torch.nn.Linear(4, 2), (torch.randn(3, 4),), optimise=False)
    onx, builder = to_onnx(
        torch.nn.Linear(4, 2), (torch.randn(3, 4),), return_builder=True, optimize=False
    )
    assert len(builder.nodes) >= 1 and len(onx.graph.node) >= 1
