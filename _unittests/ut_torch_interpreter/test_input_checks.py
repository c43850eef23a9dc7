"""Bad inputs get a typed error naming the input before any work."""

import onnx
import pytest
import torch

from experimental_experiment.torch_interpreter import to_onnx
from experimental_experiment.torch_interpreter.capture.input_checks import (
    MIN_OPSET,
    describe_dimension_sources,
    onnx_max_opset,
    onnxruntime_max_opset,
)
from experimental_experiment.torch_interpreter.errors import CaptureError, InvalidArgumentError


class Add(torch.nn.Module):
    def forward(self, x, y):
        return x + y


def _inputs():
    return torch.randn(3, 4), torch.randn(3, 4)


def test_axis_beyond_rank_names_the_input():
    with pytest.raises(InvalidArgumentError, match=r"input 'x' names axis 5 .* 2 dimension"):
        to_onnx(Add(), _inputs(), dynamic_shapes={"x": {5: "b"}, "y": None})


def test_axis_beyond_rank_tuple_spec():
    with pytest.raises(InvalidArgumentError, match=r"input 'y' names axis 2"):
        to_onnx(Add(), _inputs(), dynamic_shapes=({0: "b"}, {2: "b"}))


def test_list_spec_of_wrong_length():
    with pytest.raises(InvalidArgumentError, match=r"input 'x' has 3 entries .* 2 dimension"):
        to_onnx(Add(), _inputs(), dynamic_shapes={"x": ["b", None, None], "y": None})


def test_nested_input_axis_named_with_its_path():
    class Nested(torch.nn.Module):
        def forward(self, d):
            return d["a"] * 2

    with pytest.raises(InvalidArgumentError, match=r"input \"d\['a'\]\" names axis 3"):
        to_onnx(Nested(), ({"a": torch.randn(2, 3)},), dynamic_shapes={"d": {"a": {3: "b"}}})


def test_negative_axis_refused_with_the_positive_one():
    """torch.export ignores a negative axis: the dimension would silently stay static."""
    with pytest.raises(InvalidArgumentError, match=r"axis -2 .*write 0 for -2"):
        to_onnx(Add(), _inputs(), dynamic_shapes={"x": {-2: "b"}, "y": {0: "b"}})


def test_valid_axes_still_export():
    onx = to_onnx(Add(), _inputs(), dynamic_shapes={"x": {0: "b"}, "y": ["b", None]})
    assert onx.graph.input[0].type.tensor_type.shape.dim[0].dim_param == "b"


@pytest.mark.parametrize("opset", [99, 7, MIN_OPSET - 1])
def test_target_opset_out_of_range(opset):
    with pytest.raises(InvalidArgumentError, match=rf"target_opset={opset} is not supported"):
        to_onnx(Add(), _inputs(), target_opset=opset)


def test_target_opset_message_gives_the_range():
    with pytest.raises(InvalidArgumentError) as e:
        to_onnx(Add(), _inputs(), target_opset={"": 99})
    text = str(e.value)
    assert f"knows opsets up to {onnx.defs.onnx_opset_version()}" in text
    assert f"between {MIN_OPSET} and" in text


def test_onnxruntime_max_opset_is_loadable():
    """The probe's answer is consistent: onnxruntime loads a model at that opset, and
    the answer never exceeds what onnx knows."""
    ort = onnxruntime_max_opset()
    assert ort is not None and MIN_OPSET <= ort <= onnx_max_opset()
    onx = to_onnx(Add(), _inputs(), target_opset=ort)
    import onnxruntime

    onnxruntime.InferenceSession(onx.SerializeToString(), providers=["CPUExecutionProvider"])


def test_describe_dimension_sources():
    names = {(("x",), 0): "batch", (("cache", 1), 2): "past"}
    text = "You marked L['x'].size()[0] as dynamic, L['kwargs']['cache'][1].size()[2] too"
    got = describe_dimension_sources(text, names)
    assert "dimension 0 ('batch') of input 'x'" in got
    assert "dimension 2 ('past') of input 'cache[1]'" in got
    assert "L[" not in got
    # positional arguments are given by index in torch's names
    got = describe_dimension_sources("L['args'][0].size()[1]", {(("x",), 1): "seq"}, ["x"])
    assert got == "dimension 1 ('seq') of input 'x'"


def test_specialized_dimension_error_names_the_users_dimension():
    class Specialize(torch.nn.Module):
        def forward(self, x):
            return x + torch.ones(4, 3)

    with pytest.raises(CaptureError) as e:
        to_onnx(Specialize(), (torch.randn(4, 3),), dynamic_shapes={"x": {0: "batch"}})
    text = str(e.value)
    assert "dimension 0 ('batch') of input 'x'" in text, text
    assert "L['x']" not in text
