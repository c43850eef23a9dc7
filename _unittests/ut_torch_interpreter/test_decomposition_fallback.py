"""Decomposition fallback: operators with no converter are decomposed by torch."""

import pytest
import torch

from experimental_experiment.ext_test_case import OpModule, check_export
from experimental_experiment.torch_interpreter import Dispatcher, ExportOptions, to_onnx
from experimental_experiment.torch_interpreter.capture.decomposition_fallback import (
    decompose_unsupported,
    find_decomposition,
    missing_ops,
)
from experimental_experiment.torch_interpreter.convert.registry import find_converter
from experimental_experiment.torch_interpreter.errors import UnsupportedOpError

aten = torch.ops.aten


def _fn(x):
    # aten.hardswish has a converter, aten.logit a decomposition and no converter
    return torch.logit(torch.sigmoid(x), eps=1e-6) + 1


def test_no_converter_is_decomposed():
    if find_converter(aten.logit.default, 18) is not None:
        pytest.skip("aten.logit now has a converter: pick another op for this test")
    check_export(
        OpModule(_fn),
        [(torch.randn(3, 4),), (torch.randn(5, 2),)],
        dynamic_shapes=({0: "a", 1: "b"},),
    )


def test_switch_off_raises():
    if find_converter(aten.logit.default, 18) is not None:
        pytest.skip("aten.logit now has a converter")
    with pytest.raises(UnsupportedOpError, match="logit"):
        to_onnx(
            OpModule(_fn),
            (torch.randn(3, 4),),
            export_options=ExportOptions(decomposition_fallback=False),
        )


def test_graph_unchanged_when_everything_converts():
    ep = torch.export.export(OpModule(lambda x: x.relu() + 1), (torch.randn(2, 3),))
    assert missing_ops(ep, 18) == []
    assert decompose_unsupported(ep, 18) is ep


def test_only_missing_op_is_decomposed():
    if find_converter(aten.logit.default, 18) is not None:
        pytest.skip("aten.logit now has a converter")
    ep = torch.export.export(OpModule(_fn), (torch.randn(2, 3),))
    new = decompose_unsupported(ep, 18)
    targets = {n.target for n in new.graph.nodes if n.op == "call_function"}
    assert aten.logit.default not in targets
    assert aten.sigmoid.default in targets  # kept as captured


def test_error_names_op_and_reason():
    class Weird(torch.nn.Module):
        def forward(self, x):
            return torch.ops.aten.cummax.default(x, 0)[0]  # no decomposition in torch

    if find_converter(aten.cummax.default, 18) is not None:
        ep = torch.export.export(Weird(), (torch.randn(2, 3),))
        fake = lambda op: op is not aten.cummax.default  # noqa: E731
        assert aten.cummax.default not in missing_ops(ep, 18, fake)
        return
    with pytest.raises(UnsupportedOpError, match=r"aten.cummax.default \(torch has no"):
        to_onnx(Weird(), (torch.randn(2, 3),))


def test_dispatcher_wins_over_fallback():
    calls = []

    def my_logit(g, x, eps=None):
        calls.append(eps)
        return g.op.Log(g.op.Div(x, g.op.Sub(1.0, x)))

    model = OpModule(lambda x: torch.logit(torch.sigmoid(x)))
    onx = to_onnx(
        model, (torch.randn(2, 3),), dispatcher=Dispatcher({aten.logit.default: my_logit})
    )
    assert calls == [None]
    assert onx is not None


def test_find_decomposition():
    assert find_decomposition(aten.logit.default) is not None
    assert find_decomposition(aten.cummax.default) is None
    assert find_decomposition(len) is None
