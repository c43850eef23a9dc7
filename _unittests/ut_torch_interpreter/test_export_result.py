"""export_program returns one value (ExportResult); to_onnx keeps its return flags;
verbose does not change the user's logging configuration for good."""

import logging

import numpy as np
import onnx
import pytest
import torch

from experimental_experiment.ext_test_case import run_onnx
from experimental_experiment.torch_interpreter import (
    ExportResult,
    export_program,
    to_onnx,
)
from experimental_experiment.xoptim import OptimizationReport


class Model(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = torch.nn.Linear(4, 3)

    def forward(self, x):
        return torch.relu(self.lin(x)) * 2


def test_export_program_returns_a_result():
    model, x = Model(), torch.randn(5, 4)
    res = export_program(model, (x,), dynamic_shapes=({0: "batch"},))
    assert isinstance(res, ExportResult)
    assert isinstance(res.model, onnx.ModelProto)
    assert len(res.builder.nodes) == len(res.model.graph.node)
    assert isinstance(res.optimization, OptimizationReport)
    assert all(hasattr(e, "applied") for e in res.optimization)
    assert res.report is not None and res.report.status == "success"
    for batch in (5, 2):
        xb = torch.randn(batch, 4)
        (got,) = run_onnx(res.model, [xb])
        np.testing.assert_allclose(got, model(xb).detach().numpy(), atol=1e-5)


def test_to_onnx_flags_kept():
    model, x = Model(), (torch.randn(2, 4),)
    onx = to_onnx(model, x)
    assert isinstance(onx, onnx.ModelProto)
    onx2, builder = to_onnx(model, x, return_builder=True)
    assert isinstance(onx2, onnx.ModelProto) and builder.nodes
    with pytest.raises(TypeError, match="return_builder"):  # not a parameter
        export_program(model, x, return_builder=True)


def test_return_optimize_report_is_deprecated():
    model, x = Model(), (torch.randn(2, 4),)
    expected = export_program(model, x)
    message = (
        r"to_onnx\(\.\.\., return_optimize_report=True\) is deprecated and will be "
        r"removed in 0\.3; use export_program\(\.\.\.\)\.optimization instead"
    )
    with pytest.warns(DeprecationWarning, match=message) as record:
        onx, report = to_onnx(model, x, return_optimize_report=True)
    assert record[0].filename == __file__  # points at the caller's line
    assert isinstance(report, OptimizationReport)
    assert onx.SerializeToString() == expected.model.SerializeToString()
    assert [(e.name, e.kind, e.applied) for e in report] == [
        (e.name, e.kind, e.applied) for e in expected.optimization
    ]
    with pytest.warns(DeprecationWarning, match=message):
        onx, builder, report = to_onnx(model, x, return_builder=True, return_optimize_report=True)
    assert builder.nodes and isinstance(report, OptimizationReport)


def test_verbose_restores_the_logging_level():
    logger = logging.getLogger("experimental_experiment")
    old_level, old_handlers = logger.level, list(logger.handlers)
    to_onnx(Model(), (torch.randn(2, 4),), verbose=2)
    assert logger.level == old_level
    assert logger.handlers == old_handlers


def test_to_onnx_is_export_program(tmp_path):
    # to_onnx returns what export_program computed
    model, x = Model(), (torch.randn(2, 4),)
    onx, builder = to_onnx(model, x, return_builder=True)
    res = export_program(model, x)
    assert onx.SerializeToString() == res.model.SerializeToString()
    assert [n.op_type for n in builder.nodes] == [n.op_type for n in res.builder.nodes]
    # a report written to a path is also in the result
    path = tmp_path / "report.json"
    res = export_program(model, x, report=str(path))
    assert path.exists() and res.report is not None and res.report.status == "success"
