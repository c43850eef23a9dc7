"""Custom operators with no converter: the Python implementation is traced instead
(non-mutating and mutating ops), the typed error stays when it cannot be traced; checked
in onnxruntime against eager on two sizes."""

import logging

import numpy as np
import pytest
import torch

from experimental_experiment.runtime import run_onnx
from experimental_experiment.torch_interpreter import (
    Dispatcher,
    ExportOptions,
    UnsupportedOpError,
    to_onnx,
)


@torch.library.custom_op("h16test::gelu_like", mutates_args=())
def gelu_like(x: torch.Tensor, alpha: float) -> torch.Tensor:
    return x * torch.sigmoid(alpha * x)


@gelu_like.register_fake
def _(x, alpha):
    return torch.empty_like(x)


@torch.library.custom_op("h16test::add_scaled_", mutates_args=("x",))
def add_scaled_(x: torch.Tensor, y: torch.Tensor, alpha: float) -> None:
    x.add_(y * alpha)


@torch.library.custom_op("h16test::numpy_tanh", mutates_args=())
def numpy_tanh(x: torch.Tensor) -> torch.Tensor:
    return torch.from_numpy(np.tanh(x.detach().numpy()))


@numpy_tanh.register_fake
def _(x):
    return torch.empty_like(x)


class Gelu(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = torch.nn.Linear(4, 4)

    def forward(self, x):
        return gelu_like(self.lin(x), 1.702) + torch.ops.h16test.gelu_like(x, 0.5)


class Mutating(torch.nn.Module):
    def forward(self, x, y):
        x = x.clone()
        add_scaled_(x, y, 0.5)
        return gelu_like(x, 1.0) * 2


class MutatingView(torch.nn.Module):
    def forward(self, x, y):
        x = x.clone()
        add_scaled_(x[:, 1:3], y, -2.0)
        return x


class MutatingInput(torch.nn.Module):
    """The op mutates a user input: its new value is an extra output."""

    def forward(self, x, y):
        add_scaled_(x, y, 3.0)
        return y + 1


CASES = {
    "gelu": (Gelu, lambda n: (torch.randn(n, 4),), ({0: "batch"},)),
    "mutating": (
        Mutating,
        lambda n: (torch.randn(n, 4), torch.randn(n, 4)),
        ({0: "batch"}, {0: "batch"}),
    ),
    "mutating_view": (
        MutatingView,
        lambda n: (torch.randn(n, 4), torch.randn(n, 2)),
        ({0: "batch"}, {0: "batch"}),
    ),
    "mutating_input": (
        MutatingInput,
        lambda n: (torch.randn(n, 4), torch.randn(n, 4)),
        ({0: "batch"}, {0: "batch"}),
    ),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_traced_implementation(name, caplog):
    cls, make, ds = CASES[name]
    model = cls().eval()
    with caplog.at_level(logging.WARNING):
        onx = to_onnx(model, make(3), dynamic_shapes=ds)
    assert "its Python implementation was traced" in caplog.text
    assert "Dispatcher({torch.ops.h16test." in caplog.text
    assert not any(n.domain for n in onx.graph.node)  # only standard ONNX operators
    for n in (3, 5):
        inputs = make(n)
        feeds = [t.clone() for t in inputs]
        with torch.no_grad():
            expected = model(*inputs)  # may mutate inputs[0]
        expected = list(expected if isinstance(expected, tuple) else (expected,))
        if name == "mutating_input":
            expected.append(inputs[0])  # x_updated
        got = run_onnx(onx, feeds)
        assert len(got) == len(expected)
        for e, g in zip(expected, got):
            torch.testing.assert_close(torch.from_numpy(g), e, atol=1e-5, rtol=1e-5)


def test_user_converter_wins():
    def convert(g, x, alpha):
        return g.op.Mul(x, g.op.Sigmoid(g.op.Mul(x, np.array(alpha, dtype=np.float32))))

    class M(torch.nn.Module):
        def forward(self, x):
            return gelu_like(x, 1.5)

    x = torch.randn(3, 4)
    onx = to_onnx(M(), (x,), dispatcher=Dispatcher({gelu_like: convert}))
    torch.testing.assert_close(torch.from_numpy(run_onnx(onx, [x])[0]), M()(x))


def test_not_traceable_keeps_error():
    class M(torch.nn.Module):
        def forward(self, x):
            return numpy_tanh(x) + 1

    with pytest.raises(UnsupportedOpError, match="h16test.numpy_tanh"):
        to_onnx(M(), (torch.randn(3, 4),))


def test_no_fallback_keeps_error():
    with pytest.raises(UnsupportedOpError, match="h16test.gelu_like"):
        to_onnx(
            Gelu(), (torch.randn(3, 4),), export_options=ExportOptions(decomposition_fallback=False)
        )


def test_export_report_names_inlined_op():
    from experimental_experiment.report import ExportReport

    report = ExportReport()
    to_onnx(Gelu(), (torch.randn(3, 4),), report=report)
    inlined = [d for d in report.decompositions if "h16test.gelu_like" in d.op]
    assert inlined and "Python implementation was traced" in inlined[0].reason
