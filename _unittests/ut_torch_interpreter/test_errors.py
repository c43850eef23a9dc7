"""Typed errors: one base class, a reason for a missing converter, UnsupportedOpError
raised by converters with the op, the argument and the user's line."""

import pytest
import torch

from experimental_experiment.errors import ExportError
from experimental_experiment.torch_interpreter import to_onnx
from experimental_experiment.torch_interpreter.convert.registry import lookup_converter
from experimental_experiment.torch_interpreter.errors import (
    CaptureError,
    ConversionError,
    InvalidArgumentError,
    UnsupportedOpError,
)
from experimental_experiment.xbuilder import GraphBuilderError
from experimental_experiment.xoptim.passes import PassError

aten = torch.ops.aten


@pytest.mark.parametrize(
    "cls",
    [
        CaptureError,
        ConversionError,
        InvalidArgumentError,
        UnsupportedOpError,
        GraphBuilderError,
        PassError,
    ],
)
def test_every_error_derives_from_export_error(cls):
    assert issubclass(cls, ExportError)


def test_export_error_is_the_same_class_everywhere():
    from experimental_experiment.torch_interpreter import ExportError as E2
    from experimental_experiment.torch_interpreter.errors import ExportError as E3

    assert E2 is ExportError and E3 is ExportError


def test_lookup_converter_says_why():
    found = lookup_converter(aten.relu.default, 18)
    assert found and found.converter is not None and found.reason == ""
    missing = lookup_converter(aten._cudnn_rnn.default, 18)
    assert not missing and missing.converter is None
    assert "no converter is registered for aten._cudnn_rnn.default" in missing.reason


def test_lookup_converter_other_overload():
    ops = [
        op
        for op in (aten.add.Tensor, aten.add.Scalar, aten.add.out)
        if lookup_converter(op, 18).converter is None
    ]
    if not ops:
        pytest.skip("every overload of aten.add has a converter")
    assert "only for aten.add." in lookup_converter(ops[0], 18).reason


class Pad(torch.nn.Module):
    def forward(self, x):
        return torch.nn.functional.pad(x, (1, 1), mode="reflect")


def test_converter_refusal_is_unsupported_op_error_with_argument():
    """A converter refusing an argument value: UnsupportedOpError naming the op, the
    argument and the user's line (not a ConversionError)."""

    def bad_pad(g, x, pad, mode="constant", value=None):
        raise UnsupportedOpError(f"pad mode={mode!r}", argument="mode")

    from experimental_experiment.torch_interpreter import Dispatcher

    dispatcher = Dispatcher({aten.pad.default: bad_pad, aten.reflection_pad1d.default: bad_pad})
    with pytest.raises(UnsupportedOpError) as e:
        to_onnx(Pad(), (torch.randn(2, 3, 4),), dispatcher=dispatcher)
    err = e.value
    assert err.argument == "mode" and err.op is not None
    text = str(err)
    assert "argument 'mode'" in text and "test_errors.py" in text and "Dispatcher" in text
    assert isinstance(err, NotImplementedError)  # code catching the old error still works
