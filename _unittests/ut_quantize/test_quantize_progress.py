"""quantize_model(progress=True): the stages and, for int4, the nodes quantized on a
terminal; nothing when stderr is redirected or progress is False."""

import io

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from experimental_experiment import progress
from experimental_experiment.ext_test_case import fake_terminal
from experimental_experiment.quantize import quantize_model


def _three_matmuls() -> onnx.ModelProto:
    """x @ w0 @ w1 @ w2, the last one the head (kept in float by default)."""
    rng = np.random.default_rng(0)
    inits = [
        numpy_helper.from_array(rng.standard_normal((64, 64)).astype(np.float32), f"w{i}")
        for i in range(3)
    ]
    nodes = [
        helper.make_node("MatMul", ["x", "w0"], ["h0"], name="first_matmul"),
        helper.make_node("MatMul", ["h0", "w1"], ["h1"], name="second_matmul"),
        helper.make_node("MatMul", ["h1", "w2"], ["logits"], name="head_matmul"),
    ]
    graph = helper.make_graph(
        nodes,
        "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 64])],
        [helper.make_tensor_value_info("logits", TensorProto.FLOAT, [2, 64])],
        inits,
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)])


def test_int4_shows_stages_and_nodes(monkeypatch):
    tty = fake_terminal(monkeypatch)
    q = quantize_model(_three_matmuls(), "int4", progress=True)
    assert sum(n.op_type == "MatMulNBits" for n in q.graph.node) == 2
    text = tty.getvalue()
    for expected in [
        "quantize int4: check",
        "quantize int4: prepare",
        "quantize int4: quantize",
        "3/3",  # the stages
        "MatMulNBits",
        "2/2",  # the nodes, the head excluded
        "second_matmul",
    ]:
        assert expected in text, (expected, text)
    assert "head_matmul" not in text


@pytest.mark.parametrize("precision", ["int8", "fp16"])
def test_other_precisions_show_stages(monkeypatch, precision):
    tty = fake_terminal(monkeypatch)
    quantize_model(_three_matmuls(), precision, progress=True)
    text = tty.getvalue()
    assert f"quantize {precision}: quantize" in text and "3/3" in text, text


def test_quiet(monkeypatch):
    tty = fake_terminal(monkeypatch)
    quantize_model(_three_matmuls(), "int4")  # progress=False by default
    assert tty.getvalue() == ""
    redirected = io.StringIO()
    monkeypatch.setattr(progress.sys, "stderr", redirected)
    quantize_model(_three_matmuls(), "int4", progress=True)
    assert redirected.getvalue() == ""
