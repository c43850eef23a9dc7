"""The discrepancy finder points at the FX node whose converter is wrong."""

import inspect

import numpy as np
import onnx
import pytest
import torch

from experimental_experiment.investigate import compare_intermediates, find_discrepancies
from experimental_experiment.torch_interpreter import Dispatcher, to_onnx


class Model(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.linear = torch.nn.Linear(4, 4)

    def forward(self, x):
        y = self.linear(x)
        z = y * 3.0
        w = torch.relu(z) - x
        return w.sum(dim=-1)


def _line(text: str) -> int:
    lines, start = inspect.getsourcelines(Model.forward)
    return start + next(i for i, line in enumerate(lines) if text in line)


def wrong_mul(g, x, other):
    """Adds instead of multiplying: the injected bug."""
    if not isinstance(other, str):
        other = g.make_constant(np.array(other, dtype=np.float32))
    return g.op.Add(x, other)


@pytest.mark.parametrize("runtime", ["onnxruntime", "reference"])
@pytest.mark.parametrize("shape", [(2, 4), (5, 3, 4)])
def test_wrong_converter_found_at_the_exact_node(runtime, shape):
    torch.manual_seed(0)
    x = torch.randn(*shape)
    dispatcher = Dispatcher({torch.ops.aten.mul.Tensor: wrong_mul})
    report = find_discrepancies(Model(), (x,), dispatcher=dispatcher, runtime=runtime)
    first = report.first
    assert first is not None, report
    assert first.aten_op == "aten.mul.Tensor"
    assert [n.split("(")[0] for n in first.onnx_nodes] == ["Add"]
    assert f"line {_line('y * 3.0')}" in first.source
    assert first.max_abs_diff > 1e-3
    # the values before it match: the linear layer is compared and right
    before = report.comparisons[: report.comparisons.index(first)]
    assert before and all(c.ok for c in before)
    assert first.torch_stats.shape == first.onnx_stats.shape == tuple(shape)


def test_correct_export_has_no_discrepancy():
    model, x = Model(), torch.randn(3, 4)
    report = find_discrepancies(model, (x,))
    assert report.first is None
    ops = {c.aten_op for c in report.comparisons}
    assert {"aten.mul.Tensor", "aten.relu.default", "aten.sub.Tensor"} <= ops
    assert "no discrepancy" in str(report)


def test_onnx_nodes_carry_origin():
    ep = torch.export.export(Model(), (torch.randn(2, 4),), strict=False)
    onx = to_onnx(ep, optimize=False)
    tagged = [n for n in onx.graph.node if n.metadata_props]
    assert tagged
    props = {p.key: p.value for p in tagged[0].metadata_props}
    assert set(props) == {"fx_node", "fx_target", "source"}
    relu = next(n for n in onx.graph.node if n.op_type == "Relu")
    props = {p.key: p.value for p in relu.metadata_props}
    assert props["fx_target"] == "aten.relu.default"
    assert f"line {_line('torch.relu(z)')}" in props["source"]
    onnx.checker.check_model(onx)
    # the optimized model keeps enough tags to be compared
    opt = to_onnx(ep)
    report = compare_intermediates(ep, opt, (torch.randn(2, 4),))
    assert report.comparisons and report.first is None


def test_bad_rewrite_found_by_bisection():
    from experimental_experiment.investigate import find_bad_rewrite
    from experimental_experiment.xoptim import Pattern

    class ReluToAbs(Pattern):
        """Relu(x) -> Abs(x): a wrong rewrite."""

        def pattern(self, op, x):
            return op.Relu(x)

        def rewrite(self, op, x):
            return op.Abs(x)

    x = torch.randn(6, 4)
    ep = torch.export.export(Model(), (x,), strict=False)
    onx = to_onnx(ep, optimize=False)
    feeds = {onx.graph.input[0].name: x.numpy()}
    assert find_bad_rewrite(onx, feeds) is None  # the default rewrites keep the results
    found = find_bad_rewrite(onx, feeds, patterns=[ReluToAbs()])
    assert found["pattern"] == "ReluToAbs" and found["max_diff"] > 1e-3
