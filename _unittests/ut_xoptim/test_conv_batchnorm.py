"""Default pattern ConvBatchNormToConv: an inference BatchNormalization folded into Conv."""

import numpy as np
import pytest
from onnx import TensorProto as T
from onnx import helper

from experimental_experiment.xoptim.testing import (
    applied,
    check_pattern,
    make_model,
    op_types,
    refused,
)

F = T.FLOAT


def _inits(with_bias=True, groups=1):
    rnd = np.random.default_rng(0)
    inits = {
        "w": rnd.standard_normal((4, 6 // groups, 3, 3)).astype(np.float32),
        "scale": (1 + 0.2 * rnd.standard_normal(4)).astype(np.float32),
        "beta": rnd.standard_normal(4).astype(np.float32),
        "mean": rnd.standard_normal(4).astype(np.float32),
        "var": (0.5 + rnd.random(4)).astype(np.float32),
    }
    if with_bias:
        inits["b"] = rnd.standard_normal(4).astype(np.float32)
    return inits


def _feeds():
    rnd = np.random.default_rng(1)
    return [{"x": rnd.standard_normal(s).astype(np.float32)} for s in [(2, 6, 8, 8), (1, 6, 5, 7)]]


@pytest.mark.parametrize("with_bias, groups", [(True, 1), (False, 1), (True, 2)])
def test_conv_batchnorm_folded(with_bias, groups):
    conv_in = ["x", "w", "b"] if with_bias else ["x", "w"]
    model = make_model(
        [
            helper.make_node("Conv", conv_in, ["c"], pads=[1, 1, 1, 1], group=groups),
            helper.make_node(
                "BatchNormalization", ["c", "scale", "beta", "mean", "var"], ["y"], epsilon=1e-3
            ),
        ],
        [("x", F, ("n", 6, "h", "w"))],
        [("y", F, ("n", 4, "h", "w"))],
        _inits(with_bias, groups),
    )
    opt, report = check_pattern(model, _feeds(), atol=1e-4, rtol=1e-4)
    assert op_types(opt) == ["Conv"]
    assert applied(report, "ConvBatchNormToConv") == 1


def test_conv_batchnorm_statistics_not_constant_kept():
    model = make_model(
        [
            helper.make_node("Conv", ["x", "w"], ["c"], pads=[1, 1, 1, 1]),
            helper.make_node("BatchNormalization", ["c", "scale", "beta", "m", "var"], ["y"]),
        ],
        [("x", F, ("n", 6, "h", "w")), ("m", F, (4,))],
        [("y", F, ("n", 4, "h", "w"))],
        _inits(False),
    )
    feeds = _feeds()
    for f in feeds:
        f["m"] = np.arange(4).astype(np.float32)
    opt, report = check_pattern(model, feeds, atol=1e-4)
    assert op_types(opt) == ["Conv", "BatchNormalization"]
    assert any("constant" in r for r in refused(report, "ConvBatchNormToConv"))


def test_conv_output_used_elsewhere_kept():
    model = make_model(
        [
            helper.make_node("Conv", ["x", "w"], ["c"], pads=[1, 1, 1, 1]),
            helper.make_node("BatchNormalization", ["c", "scale", "beta", "mean", "var"], ["y"]),
        ],
        [("x", F, ("n", 6, "h", "w"))],
        [("y", F, ("n", 4, "h", "w")), ("c", F, ("n", 4, "h", "w"))],
        _inits(False),
    )
    opt, _ = check_pattern(model, _feeds(), atol=1e-4)
    assert op_types(opt) == ["Conv", "BatchNormalization"]


@pytest.mark.parametrize("act", ["Relu", "Sigmoid", "Tanh"])
def test_conv_batchnorm_activation_to_fused_conv(act):
    """default+onnxruntime: BatchNormalization folded, then FusedConv (com.microsoft)."""
    from experimental_experiment.xoptim.patterns_ort._testing import check_ort_pattern

    model = make_model(
        [
            helper.make_node("Conv", ["x", "w", "b"], ["c"], pads=[1, 1, 1, 1]),
            helper.make_node("BatchNormalization", ["c", "scale", "beta", "mean", "var"], ["n"]),
            helper.make_node(act, ["n"], ["y"]),
        ],
        [("x", F, ("n", 6, "h", "w"))],
        [("y", F, ("n", 4, "h", "w"))],
        _inits(),
    )
    opt, report = check_ort_pattern(model, _feeds(), atol=1e-4, rtol=1e-4)
    assert op_types(opt) == ["FusedConv"]
    assert opt.graph.node[0].domain == "com.microsoft"
    assert applied(report, "ConvActivationToFusedConv") == 1


def test_fused_conv_float16_refused():
    from experimental_experiment.xoptim.patterns_ort._testing import check_ort_pattern

    inits = {k: v.astype(np.float16) for k, v in _inits(False).items()}
    model = make_model(
        [
            helper.make_node("Conv", ["x", "w"], ["c"], pads=[1, 1, 1, 1]),
            helper.make_node("Relu", ["c"], ["y"]),
        ],
        [("x", T.FLOAT16, ("n", 6, "h", "w"))],
        [("y", T.FLOAT16, ("n", 4, "h", "w"))],
        inits,
    )
    feeds = [{"x": f["x"].astype(np.float16)} for f in _feeds()]
    opt, report = check_ort_pattern(model, feeds, atol=1e-2, rtol=1e-2)
    assert op_types(opt) == ["Conv", "Relu"]
    assert refused(report, "ConvActivationToFusedConv")
