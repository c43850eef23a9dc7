"""verify_dynamic_shapes: reruns an exported model on other sizes; 0/1 specialization."""

import numpy as np
import pytest
import torch

from experimental_experiment.ext_test_case import assert_close, run_onnx
from experimental_experiment.torch_interpreter import CaptureError, ExportOptions, to_onnx
from experimental_experiment.torch_interpreter.result.verify import (
    _eval_dim,
    verify_dynamic_shapes,
)


class MLP(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.l1 = torch.nn.Linear(4, 8)
        self.l2 = torch.nn.Linear(8, 3)

    def forward(self, x, y):
        return self.l2(torch.relu(self.l1(x))) + y.sum(dim=-1, keepdim=True)


def _inputs(batch=3, seq=5):
    return torch.randn(batch, 4), torch.randn(batch, seq)


def test_verify_ok():
    model, args = MLP().eval(), _inputs()
    ds = ({0: "batch"}, {0: "batch", 1: "seq"})
    onx = to_onnx(model, args, dynamic_shapes=ds)
    report = verify_dynamic_shapes(model, onx, args, dynamic_shapes=ds)
    text = str(report)
    assert report.ok, text
    assert [t.name for t in report.trials] == ["+1", "+3", "x2"]
    assert report.trials[2].dims == {"batch": 6, "seq": 10}
    assert report.trials[0].shapes == [(4, 4), (4, 6)]
    assert "OK" in text and "max_abs_err" in text and not report.baked_in


def test_verify_dict_kwargs():
    class Model(torch.nn.Module):
        def forward(self, x, extra=None):
            return x * 2 + extra["bias"]

    model = Model()
    args, kwargs = (torch.randn(3, 4),), {"extra": {"bias": torch.randn(3, 4)}}
    ds = {"x": {0: "batch"}, "extra": {"bias": {0: "batch"}}}
    onx = to_onnx(model, args, kwargs, dynamic_shapes=ds)
    report = verify_dynamic_shapes(
        model, onx, args, kwargs, dynamic_shapes=ds, sizes=[{"batch": 7}, {"batch": 2}]
    )
    assert report.ok, str(report)
    assert [t.shapes for t in report.trials] == [[(7, 4), (7, 4)], [(2, 4), (2, 4)]]


def test_verify_detects_static_export():
    # the model was exported without dynamic shapes while the user declares them
    model, args = MLP().eval(), _inputs()
    ds = ({0: "batch"}, {0: "batch", 1: "seq"})
    onx = to_onnx(model, args)
    report = verify_dynamic_shapes(model, onx, args, dynamic_shapes=ds)
    text = str(report)
    assert not report.ok
    assert "static in ONNX but declared dynamic" in text
    assert "input 'x' axis 0" in text
    assert all(not t.passed for t in report.trials)
    assert report.baked_in == ["batch", "seq"], text
    assert "onnxruntime failed" in text


def test_verify_detects_wrong_values():
    # a model which is right only for the example: the check must see the values
    class Model(torch.nn.Module):
        def forward(self, x):
            return x.cumsum(0)

    model = Model()
    args = (torch.randn(3, 4),)
    onx = to_onnx(torch.nn.Identity(), args, dynamic_shapes=({0: "batch"},))
    report = verify_dynamic_shapes(model, onx, args, dynamic_shapes=({0: "batch"},))
    assert not report.ok
    assert "values differ" in str(report)


@pytest.mark.parametrize("size", [0, 1])
@pytest.mark.parametrize("dim", ["batch", torch.export.Dim("batch"), torch.export.Dim.DYNAMIC])
def test_zero_one_example_stays_dynamic(size, dim):
    # an example of size 0 or 1 is captured size-obliviously: the dimension stays dynamic
    model, args = MLP().eval(), _inputs(batch=size)
    ds = ({0: dim}, {0: dim})
    onx = to_onnx(model, args, dynamic_shapes=ds)
    assert onx.graph.input[0].type.tensor_type.shape.dim[0].dim_param
    # batch 0 is left out: onnxruntime 1.31 fails to broadcast (0, 3) + (0, 1)
    for batch in (1, 2, 4):
        check_onnx_vs_eager(model, onx, _inputs(batch=batch))


def check_onnx_vs_eager(model, onx, inputs):
    with torch.no_grad():
        expected = model(*inputs)
    assert_close(expected, run_onnx(onx, inputs)[0], atol=1e-5, rtol=1e-4)


def test_zero_one_example_specialized_by_the_model():
    # broadcasting against a static size: the dimension cannot stay dynamic, the error
    # says the capture was size-oblivious and what to do
    class Add(torch.nn.Module):
        def forward(self, x, y):
            return x + y

    with pytest.raises(CaptureError, match="backed_size_oblivious"):
        to_onnx(Add(), (torch.randn(1, 4), torch.randn(3, 4)), dynamic_shapes=({0: "batch"}, None))


def test_zero_one_auto_is_accepted():
    # Dim.AUTO lets torch decide: without the size-oblivious capture it specializes the
    # example size 1, no error, the dimension is static
    auto = ({0: torch.export.Dim.AUTO}, {0: torch.export.Dim.AUTO})
    onx = to_onnx(
        MLP(),
        _inputs(batch=1),
        dynamic_shapes=auto,
        export_options=ExportOptions(size_oblivious=False),
    )
    assert onx.graph.input[0].type.tensor_type.shape.dim[0].dim_value == 1


def test_zero_one_auto_stays_dynamic_when_size_oblivious():
    # the default capture is size-oblivious: size 1 is one size among others, the
    # dimension stays dynamic and the model runs on other batch sizes
    model = MLP().eval()
    auto = ({0: torch.export.Dim.AUTO}, {0: torch.export.Dim.AUTO})
    onx = to_onnx(model, _inputs(batch=1), dynamic_shapes=auto)
    dim = onx.graph.input[0].type.tensor_type.shape.dim[0]
    assert dim.dim_param and not dim.dim_value
    for batch in (1, 4):
        args = _inputs(batch=batch)
        with torch.no_grad():
            expected = model(*args)
        got = run_onnx(onx, list(args))[0]
        np.testing.assert_allclose(got, expected.numpy(), atol=1e-5, rtol=1e-4)


def test_zero_one_size_two_fix():
    # the fix suggested by the error: export with size 2, the model runs on size 1
    model, args = MLP().eval(), _inputs(batch=2)
    ds = ({0: "batch"}, {0: "batch"})
    onx = to_onnx(model, args, dynamic_shapes=ds)
    report = verify_dynamic_shapes(
        model, onx, args, dynamic_shapes=ds, sizes=[{"batch": 1}, {"batch": 5}]
    )
    assert report.ok, str(report)


def test_eval_dim():
    assert _eval_dim("batch", {"batch": 3}) == 3
    assert _eval_dim("2*batch", {"batch": 3}) == 6
    assert _eval_dim("seq+past", {"seq": 3, "past": 4}) == 7
    assert _eval_dim("unknown+1", {"batch": 3}) is None
    assert _eval_dim("__import__('os')", {}) is None
