"""ExportOptions(fallback=True): non-strict, then strict, then decompositions; what was
tried and why it failed is logged or listed in the CaptureError."""

import logging

import pytest
import torch

from experimental_experiment.ext_test_case import check_export
from experimental_experiment.torch_interpreter import CaptureError, ExportOptions, to_onnx

SETS = [(torch.randn(3, 4),), (torch.randn(6, 4),)]
DS = ({0: "batch"},)


class OnlyStrict(torch.nn.Module):
    """Traceable by dynamo (strict) only."""

    def forward(self, x):
        if not torch.compiler.is_dynamo_compiling():
            raise RuntimeError("this model only runs under dynamo")
        return x * 2


@torch._dynamo.disable
def _opaque(x):
    return x + 1


class OnlyNonStrict(torch.nn.Module):
    """Calls a function dynamo refuses to trace: strict capture fails."""

    def forward(self, x):
        return _opaque(x) * 3


class NeverExports(torch.nn.Module):
    def forward(self, x):
        raise ValueError("broken model")


def test_non_strict_then_strict(caplog):
    with pytest.raises(CaptureError, match="strict=False"):
        to_onnx(OnlyStrict(), SETS[0], dynamic_shapes=DS)
    with caplog.at_level(logging.INFO, logger="experimental_experiment"):
        onx = to_onnx(
            OnlyStrict(), SETS[0], dynamic_shapes=DS, export_options=ExportOptions(fallback=True)
        )
    assert "capture succeeded with strict=True after strict=False: RuntimeError" in caplog.text
    assert [n.op_type for n in onx.graph.node] == ["Mul"]


def test_strict_then_non_strict():
    OnlyNonStrict()(SETS[0][0])  # eager works
    with pytest.raises(CaptureError, match="strict=True"):
        to_onnx(OnlyNonStrict(), SETS[0], export_options=ExportOptions(strict=True))
    check_export(
        OnlyNonStrict(),
        SETS,
        dynamic_shapes=DS,
        export_options=ExportOptions(strict=True, fallback=True),
    )


def test_every_attempt_fails():
    with pytest.raises(CaptureError) as info:
        to_onnx(NeverExports(), SETS[0], export_options=ExportOptions(fallback=True))
    text = str(info.value)
    assert "- strict=False: ValueError: broken model" in text
    assert "- strict=True:" in text
    # decompositions are not tried when the capture itself fails
    assert [w for w, _ in info.value.attempts] == ["strict=False", "strict=True"]


def test_decomposition_fallback_after_failed_decomposition():
    def bad_table():
        raise RuntimeError("bad table")

    class BadTable(dict):
        """A decomposition table whose use fails."""

        def items(self):
            bad_table()

        def __iter__(self):
            bad_table()

        def keys(self):
            bad_table()

    model = torch.nn.Sequential(torch.nn.Linear(4, 4), torch.nn.ReLU())
    opts = ExportOptions(decomposition_table=BadTable(), fallback=True)
    onx = check_export(model, SETS, dynamic_shapes=DS, export_options=opts)
    assert "Relu" in {n.op_type for n in onx.graph.node}
    with pytest.raises(CaptureError, match="decomposition_table=custom"):
        to_onnx(model, SETS[0], export_options=ExportOptions(decomposition_table=BadTable()))
