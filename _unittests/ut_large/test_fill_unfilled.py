"""A model exported from the meta device with a non-persistent buffer (a rotary
embedding's ``inv_freq``) not rebuilt: the export warns visibly (also with an export
report), and fill_weights does not return quietly leaving the buffer unfilled."""

import warnings

import pytest
import torch

from experimental_experiment.large import fill_weights
from experimental_experiment.report import ExportReport
from experimental_experiment.torch_interpreter import to_onnx
from experimental_experiment.torch_interpreter.errors import UnfilledWeightsWarning


class Rotary(torch.nn.Module):
    def __init__(self, n=16):
        super().__init__()
        self.proj = torch.nn.Linear(n, n)
        self.register_buffer("inv_freq", 1.0 / 10000 ** (torch.arange(n) / n), persistent=False)

    def forward(self, x):
        return self.proj(x) * torch.cos(self.inv_freq)


def _export_meta(path, report=None):
    with torch.device("meta"):
        meta = Rotary().eval()
    to_onnx(meta, (torch.randn(2, 16),), filename=str(path), report=report)


def test_export_warns_naming_the_buffer_and_reports_it(tmp_path):
    report = ExportReport()
    with pytest.warns(UnfilledWeightsWarning, match=r"non-persistent buffers \['inv_freq'\]"):
        _export_meta(tmp_path / "m.onnx", report=report)
    assert any("inv_freq" in d.message for d in report.diagnostics)


def test_fill_weights_warns_naming_the_unfilled_buffer(tmp_path):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UnfilledWeightsWarning)
        _export_meta(tmp_path / "m.onnx")
    torch.save(Rotary().state_dict(), str(tmp_path / "w.pt"))
    with pytest.warns(UnfilledWeightsWarning, match=r"1 initializer.*inv_freq.*non-persistent"):
        report = fill_weights(str(tmp_path / "m.onnx"), [str(tmp_path / "w.pt")])
    assert len(report.unfilled) == 1 and "inv_freq" in report.unfilled[0]
    assert len(report.matched) == 2


def test_fill_weights_all_filled_does_not_warn(tmp_path):
    with torch.device("meta"):
        meta = torch.nn.Linear(16, 16)
    to_onnx(meta, (torch.randn(2, 16),), filename=str(tmp_path / "m.onnx"))
    torch.save(torch.nn.Linear(16, 16).state_dict(), str(tmp_path / "w.pt"))
    with warnings.catch_warnings():
        warnings.simplefilter("error", UnfilledWeightsWarning)
        report = fill_weights(str(tmp_path / "m.onnx"), [str(tmp_path / "w.pt")])
    assert report.unfilled == []
