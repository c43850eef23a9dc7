"""Bad inputs to to_onnx: a typed error raised before the capture, naming the input,
the dimension and what to do; training mode and warnings made visible."""

import logging
import warnings

import pytest
import torch
from torch.export import Dim

from experimental_experiment.report import ExportReport
from experimental_experiment.torch_interpreter import to_onnx
from experimental_experiment.torch_interpreter.capture import prepare as prepare_module
from experimental_experiment.torch_interpreter.errors import (
    DynamicShapesError,
    InvalidArgumentError,
    SignatureError,
    TrainingModeWarning,
    UnsupportedOutputError,
)


class Add(torch.nn.Module):
    def forward(self, x, y):
        return x + y


class Cat(torch.nn.Module):
    def forward(self, x, y):
        return torch.cat([x, y])


@pytest.fixture
def no_capture(monkeypatch):
    """The error must come before torch.export runs."""

    def capture(*args, **kwargs):
        raise AssertionError("the capture was reached")

    monkeypatch.setattr(prepare_module, "capture", capture)


def _xy(n=2, m=2):
    return torch.randn(n, 3), torch.randn(m, 3)


def test_args_none_names_the_missing_parameters(no_capture):
    with pytest.raises(SignatureError, match=r"requires \['x', 'y'\].*args=None") as e:
        to_onnx(Add(), None)
    assert isinstance(e.value, InvalidArgumentError)
    assert "kwargs={name: value}" in str(e.value)


def test_missing_one_argument(no_capture):
    x, _ = _xy()
    with pytest.raises(SignatureError, match=r"requires \['y'\]"):
        to_onnx(Add(), (x,))


def test_unknown_keyword_names_it_and_the_parameters(no_capture):
    x, y = _xy()
    with pytest.raises(SignatureError, match=r"keyword 'yy'.*did you mean 'y'.*\['x', 'y'\]"):
        to_onnx(Add(), (x,), {"yy": y})


def test_args_not_a_tuple():
    x, _ = _xy()
    with pytest.raises(InvalidArgumentError, match="args must be a tuple"):
        to_onnx(Add(), x)


def test_string_instead_of_a_tensor_spec(no_capture):
    x, y = _xy()
    with pytest.raises(
        DynamicShapesError,
        match=r"input 'x' is the string 'batch'.*"
        r"\{0: 'batch'\}",
    ) as e:
        to_onnx(Add(), (x, y), dynamic_shapes={"x": "batch", "y": None})
    assert e.value.input_name == "x"


def test_string_instead_of_a_tuple_spec(no_capture):
    class Pair(torch.nn.Module):
        def forward(self, pair):
            return pair[0] + pair[1]

    x, y = _xy()
    with pytest.raises(DynamicShapesError, match=r"input 'pair' is the string 'b'.*tuple"):
        to_onnx(Pair(), ((x, y),), dynamic_shapes={"pair": "b"})


def test_dim_min_above_the_example_size(no_capture):
    x, y = _xy()
    ds = {"x": {0: Dim("b", min=5)}, "y": {0: Dim("b", min=5)}}
    with pytest.raises(
        DynamicShapesError,
        match=r"dimension 0 \('b'\) of input 'x' has the "
        r"example size 2, outside the range \[5, inf\]",
    ) as e:
        to_onnx(Add(), (x, y), dynamic_shapes=ds)
    assert (e.value.input_name, e.value.axis) == ("x", 0)


def test_dim_max_below_the_example_size(no_capture):
    x, y = torch.randn(2, 8), torch.randn(2, 8)
    ds = ({1: Dim("n", max=4)}, {1: Dim("n", max=4)})
    with pytest.raises(DynamicShapesError, match=r"dimension 1 \('n'\) of input 'x'.*\[0, 4\]"):
        to_onnx(Add(), (x, y), dynamic_shapes=ds)


def test_same_name_on_different_sizes(no_capture):
    x, y = _xy(2, 3)
    with pytest.raises(
        DynamicShapesError,
        match=r"'b' is given to dimension 0 of input 'x' "
        r"\(example size 2\) and to dimension 0 of "
        r"input 'y' \(example size 3\)",
    ):
        to_onnx(Cat(), (x, y), dynamic_shapes={"x": {0: "b"}, "y": {0: "b"}})


@pytest.mark.filterwarnings("ignore::UserWarning")  # the Dim's range, reported
def test_same_name_same_size_and_valid_dims_still_export():
    x, y = _xy(2, 2)
    onx = to_onnx(
        Add(),
        (x, y),
        dynamic_shapes={"x": {0: Dim("b", min=1, max=64)}, "y": {0: Dim("b", min=1, max=64)}},
    )
    assert onx.graph.input[0].type.tensor_type.shape.dim[0].dim_param
    onx = to_onnx(Cat(), _xy(2, 3), dynamic_shapes={"x": {0: "a"}, "y": {0: "b"}})
    assert len(onx.graph.output) == 1


def test_string_output_named_by_position():
    class Text(torch.nn.Module):
        def forward(self, x):
            return x * 2, "hello"

    with pytest.raises(UnsupportedOutputError, match=r"output 1 .*'hello'.*tensors") as e:
        to_onnx(Text(), (torch.randn(2, 3),))
    assert e.value.position == 1


class WithDropout(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.linear = torch.nn.Linear(3, 3)
        self.drop = torch.nn.Dropout(0.5)
        self.norm = torch.nn.BatchNorm1d(3)

    def forward(self, x):
        return self.norm(self.drop(self.linear(x)))


def test_training_mode_warns_naming_the_modules():
    model = WithDropout().train()
    with pytest.warns(
        TrainingModeWarning,
        match=r"'drop' \(Dropout\), 'norm' \(BatchNorm1d\)"
        r".*model.eval\(\)",
    ):
        to_onnx(model, (torch.randn(4, 3),))


def test_eval_mode_does_not_warn():
    with warnings.catch_warnings():
        warnings.simplefilter("error", TrainingModeWarning)
        to_onnx(WithDropout().eval(), (torch.randn(4, 3),))


class Warns(torch.nn.Module):
    def forward(self, x):
        warnings.warn("raised in forward", UserWarning, stacklevel=1)
        return x * 2


def test_warning_reaches_the_user_and_the_report():
    report = ExportReport()
    with pytest.warns(UserWarning, match="raised in forward"):
        to_onnx(Warns(), (torch.randn(2),), report=report)
    assert any("raised in forward" in d.message for d in report.diagnostics)


def test_warning_goes_through_the_users_filters(capsys):
    """Emitted again with warnings.warn_explicit: 'error' raises it, 'ignore' hides it
    (warnings.showwarning would bypass both); the report records it either way."""
    report = ExportReport()
    with warnings.catch_warnings():
        warnings.simplefilter("error", UserWarning)
        with pytest.raises(UserWarning, match="raised in forward"):
            to_onnx(Warns(), (torch.randn(2),), report=report)
    assert any("raised in forward" in d.message for d in report.diagnostics)
    capsys.readouterr()
    report = ExportReport()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        to_onnx(Warns(), (torch.randn(2),), report=report)
    assert "raised in forward" not in capsys.readouterr().err
    assert any("raised in forward" in d.message for d in report.diagnostics)


def test_warning_filter_error_does_not_hide_an_export_error():
    class Both(torch.nn.Module):
        def forward(self, x):
            warnings.warn("raised in forward", UserWarning, stacklevel=1)
            return x * 2, "text"

    with warnings.catch_warnings():
        warnings.simplefilter("error", UserWarning)
        with pytest.raises(UnsupportedOutputError):
            to_onnx(Both(), (torch.randn(2),))


def test_logged_warning_not_swallowed_by_the_report(monkeypatch):
    """Without any logging handler, a warning logged by the package during to_onnx
    still reaches stderr (logging's last resort), and the report."""
    import io

    stream = io.StringIO()
    last = logging.StreamHandler(stream)
    last.setLevel(logging.WARNING)
    monkeypatch.setattr(logging, "lastResort", last)
    monkeypatch.setattr(logging.getLogger(), "handlers", [])
    package = logging.getLogger("experimental_experiment")
    monkeypatch.setattr(package, "handlers", [])

    class Logs(torch.nn.Module):
        def forward(self, x):
            logging.getLogger("experimental_experiment.user").warning("logged in forward")
            return x * 2

    report = ExportReport()
    to_onnx(Logs(), (torch.randn(2),), report=report)
    assert "logged in forward" in stream.getvalue()
    assert any("logged in forward" in d.message for d in report.diagnostics)
