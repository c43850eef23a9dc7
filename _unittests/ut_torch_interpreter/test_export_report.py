"""to_onnx(report=...): the export report filled by a real export."""

import inspect
import json
import os

import numpy as np
import onnxruntime
import pytest
import torch

from experimental_experiment.report import ExportReport
from experimental_experiment.torch_interpreter import Dispatcher, ExportOptions, to_onnx
from experimental_experiment.torch_interpreter.errors import ExportError, InvalidArgumentError

SCHEMA = os.path.join(
    os.path.dirname(__file__), "..", "ut_report", "data", "sarif-schema-2.1.0.json"
)


class Specializes(torch.nn.Module):
    def forward(self, x, y):
        z = x * torch.ones(4, 1)  # broadcasting fixes x.shape[0] to 4
        if y.shape[1] > 3:  # y.shape[1] >= 4
            return z.sum() + y.sum()
        return z.sum()


def _line(text: str) -> int:
    """Line number of ``text`` in the source of Specializes.forward."""
    lines, start = inspect.getsourcelines(Specializes.forward)
    return start + next(i for i, line in enumerate(lines) if text in line)


def _inputs():
    return torch.randn(4, 3), torch.randn(2, 5)


@pytest.mark.parametrize("strict", [False, True])
def test_specialized_dimension_source_line(strict):
    report = ExportReport()
    ds = ({0: torch.export.Dim.AUTO}, {1: torch.export.Dim.AUTO})
    onx = to_onnx(
        Specializes(),
        _inputs(),
        dynamic_shapes=ds,
        report=report,
        export_options=ExportOptions(strict=strict),
    )
    assert report.status == "success"
    dims = {d.dimension: d for d in report.dimensions}
    spec, cons = dims["x.shape[0]"], dims["y.shape[1]"]
    assert (spec.kind, spec.value) == ("specialized", 4)
    assert spec.location.file == os.path.abspath(__file__)
    assert spec.location.line == _line("x * torch.ones(4, 1)")
    assert (cons.kind, cons.min, cons.max) == ("constrained", 4, None)
    assert cons.location.line == _line("y.shape[1] > 3")
    # the model is right on another size of y's dynamic dimension
    sess = onnxruntime.InferenceSession(onx.SerializeToString(), providers=["CPUExecutionProvider"])
    x, y = torch.randn(4, 3), torch.randn(2, 7)
    names = [i.name for i in onx.graph.input]
    got = sess.run(None, dict(zip(names, [x.numpy(), y.numpy()])))[0]
    np.testing.assert_allclose(got, Specializes()(x, y).numpy(), rtol=1e-5, atol=1e-5)


def test_failed_export_carries_report(tmp_path):
    path = tmp_path / "report.sarif"
    with pytest.raises(ExportError) as info:
        to_onnx(Specializes(), _inputs(), dynamic_shapes=({0: "batch"}, {1: "n"}), report=str(path))
    report = info.value.report
    assert report.status == "failed" and report.error_type == "CaptureError"
    assert report.capture_attempts and not report.capture_attempts[0].success
    assert report.error_location.line == _line("x * torch.ones(4, 1)")
    # the exception itself says which line made the dimension a constant
    (note,) = info.value.__notes__
    assert f"x.shape[0] became 4 at {os.path.abspath(__file__)}:" in note, note
    assert f":{_line('x * torch.ones(4, 1)')} in forward:" in note, note
    sarif = json.loads(path.read_text())
    result = next(r for r in sarif["runs"][0]["results"] if r["ruleId"] == "export-error")
    region = result["locations"][0]["physicalLocation"]["region"]
    assert region["startLine"] == _line("x * torch.ones(4, 1)")
    jsonschema = pytest.importorskip("jsonschema", reason="validates the SARIF output")
    with open(SCHEMA, encoding="utf-8") as f:
        jsonschema.validate(sarif, json.load(f), cls=jsonschema.Draft4Validator)


def test_success_counts_converters_and_nodes(tmp_path):
    model = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.ReLU(), torch.nn.Linear(8, 2))
    report = ExportReport()
    path = tmp_path / "r.json"
    to_onnx(model, (torch.randn(3, 4),), report=report, filename=str(tmp_path / "m.onnx"))
    to_onnx(model, (torch.randn(3, 4),), report=str(path))
    assert ExportReport.load(str(path)).converters == report.converters
    ops = {c.op: c.count for c in report.converters}
    assert ops["aten.relu.default"] == 1
    assert sum(ops.values()) >= 3
    assert {"capture", "interpret", "optimize", "serialize", "save"} <= set(report.timings)
    assert report.nodes_after_optimization <= report.nodes_before_optimization
    if report.nodes_after_optimization < report.nodes_before_optimization:
        assert report.rewrites and all(r.applied > 0 for r in report.rewrites)
    assert report.capture_attempts[0].success


def test_user_converter_is_reported():
    def my_relu(g, x):
        return g.op.Relu(x)

    report = ExportReport()
    to_onnx(
        torch.nn.ReLU(),
        (torch.randn(3, 4),),
        report=report,
        dispatcher=Dispatcher({torch.ops.aten.relu.default: my_relu}),
    )
    assert [c.converter for c in report.converters] == [
        f"{__name__}.test_user_converter_is_reported.<locals>.my_relu"
    ]


def test_fallback_attempts_recorded():
    class NeedsStrictOff(torch.nn.Module):
        def forward(self, x):
            return torch.nn.functional.relu(x) + 1

    report = ExportReport()
    to_onnx(
        NeedsStrictOff(),
        (torch.randn(2, 3),),
        report=report,
        export_options=ExportOptions(strict=True, fallback=True),
    )
    assert report.capture_attempts[-1].success
    assert report.capture_attempts[0].description.startswith("strict=True")


def test_bad_report_argument():
    with pytest.raises(InvalidArgumentError, match="report"):
        to_onnx(torch.nn.ReLU(), (torch.randn(2),), report="r.txt")
    with pytest.raises(InvalidArgumentError, match="ExportReport"):
        to_onnx(torch.nn.ReLU(), (torch.randn(2),), report=3)


def test_warning_recorded():
    class Warns(torch.nn.Module):
        def forward(self, x):
            return x * 2

    report = ExportReport()
    # an output dropped by the exporter is logged as a warning: use a mutation-free model
    # and a python warning raised from the user's code instead
    import warnings

    def hook(module, args):
        warnings.warn("user warning in a hook", UserWarning, stacklevel=1)

    m = Warns()
    m.register_forward_pre_hook(hook)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        to_onnx(m, (torch.randn(2),), report=report)
    assert any("user warning in a hook" in d.message for d in report.diagnostics)


def test_decomposition_and_patches_recorded():
    from experimental_experiment.torch_interpreter.convert.registry import find_converter
    from experimental_experiment.torch_interpreter.onnx_export_errors import (
        bypass_export_some_errors,
    )

    class Logit(torch.nn.Module):
        def forward(self, x):
            return torch.logit(torch.sigmoid(x), eps=1e-6) + 1

    if find_converter(torch.ops.aten.logit.default, 18) is not None:
        pytest.skip("aten.logit has a converter now: pick an op with none")
    report = ExportReport()
    with bypass_export_some_errors(patch_transformers=True):
        onx = to_onnx(Logit(), (torch.randn(3, 4),), dynamic_shapes=({0: "a"},), report=report)
    assert report.patches  # the patches active during the export
    why = {d.op: d.reason for d in report.decompositions}
    assert why["aten.logit.default"] == "no converter"
    # what the decomposition of logit calls and has no converter either says so
    others = [op for op in why if op != "aten.logit.default"]
    assert all("decomposition of aten.logit.default" in why[op] for op in others)
    x = torch.randn(5, 4)
    sess = onnxruntime.InferenceSession(onx.SerializeToString(), providers=["CPUExecutionProvider"])
    got = sess.run(None, {onx.graph.input[0].name: x.numpy()})[0]
    np.testing.assert_allclose(got, Logit()(x).numpy(), rtol=1e-4, atol=1e-4)
    # outside the context manager, no patch is reported
    report2 = ExportReport()
    to_onnx(torch.nn.ReLU(), (torch.randn(2),), report=report2)
    assert report2.patches == []
