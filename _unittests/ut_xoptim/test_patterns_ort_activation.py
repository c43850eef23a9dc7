"""onnxruntime patterns: Gelu, FastGelu, BiasGelu (com.microsoft)."""

import math

import numpy as np
import pytest
from onnx import TensorProto as T
from onnx import helper

from experimental_experiment.xoptim.patterns_ort._testing import check_ort_pattern
from experimental_experiment.xoptim.testing import applied, make_model, op_types, refused

F = T.FLOAT
H = 8


def _feeds(dtype=np.float32, with_bias=False):
    rnd = np.random.default_rng(0)
    return [{"x": (2 * rnd.standard_normal(s)).astype(dtype)} for s in [(2, 3, H), (1, 7, H)]]


def _consts(half=0.5):
    rnd = np.random.default_rng(1)
    return {
        "half": np.array(half, np.float32),
        "one": np.array(1.0, np.float32),
        "rsqrt2": np.array(math.sqrt(0.5), np.float32),
        "c3": np.array(0.044715, np.float32),
        "three": np.array(3.0, np.float32),
        "k": np.array(math.sqrt(2 / math.pi), np.float32),
        "bias": rnd.standard_normal(H).astype(np.float32),
        "bias2": rnd.standard_normal((3, H)).astype(np.float32),
    }


def _erf_gelu(x, y):
    """The decomposed form our exporter writes for gelu(approximate='none')."""
    return [
        helper.make_node("Mul", [x, "half"], ["h"]),
        helper.make_node("Mul", [x, "rsqrt2"], ["xs"]),
        helper.make_node("Erf", ["xs"], ["e"]),
        helper.make_node("Add", ["e", "one"], ["e1"]),
        helper.make_node("Mul", ["h", "e1"], [y]),
    ]


def _tanh_gelu(x, y, pow_form=False):
    """gelu(approximate='tanh') as our exporter writes it or, with ``pow_form``, as
    transformers' NewGELUActivation does."""
    if pow_form:
        cube = [helper.make_node("Pow", [x, "three"], ["cube"])]
    else:
        cube = [
            helper.make_node("Mul", [x, x], ["sq"]),
            helper.make_node("Mul", ["sq", x], ["cube"]),
        ]
    return cube + [
        helper.make_node("Mul", [x, "half"], ["h"]),
        helper.make_node("Mul", ["cube", "c3"], ["c"]),
        helper.make_node("Add", [x, "c"], ["inner"]),
        helper.make_node("Mul", ["inner", "k"], ["ik"]),
        helper.make_node("Tanh", ["ik"], ["t"]),
        helper.make_node("Add", ["t", "one"], ["t1"]),
        helper.make_node("Mul", ["h", "t1"], [y]),
    ]


def _model(nodes, opset=18, outputs=(("y", F, ("b", "s", H)),)):
    return make_model(nodes, [("x", F, ("b", "s", H))], list(outputs), _consts(), opset=opset)


def test_erf_gelu_to_gelu():
    opt, report = check_ort_pattern(_model(_erf_gelu("x", "y")), _feeds())
    assert op_types(opt) == ["Gelu"] and opt.graph.node[0].domain == "com.microsoft"
    assert applied(report, "GeluErfToOrtGelu") == 1


@pytest.mark.parametrize("pow_form", [False, True])
def test_tanh_gelu_to_fast_gelu(pow_form):
    opt, report = check_ort_pattern(_model(_tanh_gelu("x", "y", pow_form)), _feeds(), atol=1e-4)
    assert op_types(opt) == ["FastGelu"]
    assert applied(report, "GeluTanhToFastGelu") == 1


@pytest.mark.parametrize("opset", [18, 20])
def test_add_gelu_to_bias_gelu(opset):
    nodes = [helper.make_node("Add", ["x", "bias"], ["xb"])] + _erf_gelu("xb", "y")
    opt, report = check_ort_pattern(_model(nodes, opset), _feeds())
    assert op_types(opt) == ["BiasGelu"]
    assert applied(report, "AddGeluToBiasGelu") == 1


@pytest.mark.parametrize("opset", [18, 20])
def test_add_tanh_gelu_to_fast_gelu_with_bias(opset):
    nodes = [helper.make_node("Add", ["bias", "x"], ["xb"])] + _tanh_gelu("xb", "y")
    opt, report = check_ort_pattern(_model(nodes, opset), _feeds(), atol=1e-4)
    assert op_types(opt) == ["FastGelu"] and len(opt.graph.node[0].input) == 2
    assert applied(report, "AddFastGeluToFastGelu") == 1


def test_bias_not_a_vector_refused():
    nodes = [helper.make_node("Add", ["x", "bias2"], ["xb"])] + _erf_gelu("xb", "y")
    model = make_model(nodes, [("x", F, ("b", 3, H))], [("y", F, ("b", 3, H))], _consts())
    feeds = [{"x": np.random.randn(*s).astype(np.float32)} for s in [(2, 3, H), (5, 3, H)]]
    opt, report = check_ort_pattern(model, feeds)
    assert op_types(opt) == ["Add", "Gelu"]
    assert any("vector" in r for r in refused(report, "AddGeluToBiasGelu"))


def test_wrong_constant_not_fused():
    model = make_model(
        _erf_gelu("x", "y"), [("x", F, ("b", "s", H))], [("y", F, ("b", "s", H))], _consts(half=0.6)
    )
    opt, _ = check_ort_pattern(model, _feeds())
    assert "Gelu" not in op_types(opt)


def test_intermediate_used_elsewhere_refused():
    model = _model(_erf_gelu("x", "y"), outputs=(("y", F, ("b", "s", H)), ("e", F, ("b", "s", H))))
    opt, report = check_ort_pattern(model, _feeds())
    assert "Gelu" not in op_types(opt)
    assert any("graph output" in r for r in refused(report, "GeluErfToOrtGelu"))
