"""Capture errors in words: long symbolic expressions summarized, the failing line named."""

import pytest
import torch

from experimental_experiment.torch_interpreter import to_onnx
from experimental_experiment.torch_interpreter.capture.symbolic_text import (
    failing_line,
    shorten_symbolic,
)
from experimental_experiment.torch_interpreter.errors import CaptureError
from experimental_experiment.torch_interpreter.export_options import ExportOptions


def test_long_expression_becomes_its_dimensions():
    expr = "s100"
    for _ in range(10):
        expr = f"((({expr})//2) + 1)"
    expr = f"{expr} * s53"
    text = f"The size of tensor a ({expr}) must match the size of tensor b (7)"
    short = shorten_symbolic(
        text,
        {
            "s100": "dimension 2 ('height') of input 'x'",
            "s53": "dimension 3 ('width') of input 'x'",
        },
    )
    assert "s100//4" not in short
    assert "dimension 2 ('height') of input 'x'" in short and "('width')" in short
    assert short.endswith("must match the size of tensor b (7)")
    # short groups and groups without symbols are kept
    assert shorten_symbolic("size (s0 + 1) vs (" + "1 + " * 30 + "1)", {}) == (
        "size (s0 + 1) vs (" + "1 + " * 30 + "1)"
    )


def test_failing_line_is_the_innermost_frame_outside_the_libraries():
    def model_code():
        raise ValueError("boom")  # the line to find

    try:
        model_code()
    except ValueError as e:
        line = failing_line(e)
    assert line is not None and "test_symbolic_text.py" in line and "boom" in line


class DataDependent(torch.nn.Module):
    def forward(self, x):
        if x.sum() > 0:  # data-dependent: torch.export cannot capture it
            return x * 2
        return x


def test_capture_error_names_the_model_line():
    with pytest.raises(CaptureError) as info:
        to_onnx(DataDependent(), (torch.randn(2, 3),), export_options=ExportOptions(strict=False))
    assert "if x.sum() > 0:" in str(info.value), str(info.value)
