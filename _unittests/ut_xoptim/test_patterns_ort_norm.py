"""onnxruntime patterns: SimplifiedLayerNormalization (RMS norm), its Skip variant and
SkipLayerNormalization."""

import numpy as np
import pytest
from onnx import TensorProto as T
from onnx import helper

from experimental_experiment.xoptim.patterns_ort._testing import check_ort_pattern
from experimental_experiment.xoptim.testing import applied, make_model, op_types, refused

F = T.FLOAT
H = 16
#: the Skip* fusions are in a separate set (slower than the unfused nodes on CPU)
SKIP = "default+onnxruntime+onnxruntime_extra"


def _feeds(names, shapes_list, dtype=np.float32):
    rnd = np.random.default_rng(0)
    return [
        {n: rnd.standard_normal(s).astype(dtype) for n, s in zip(names, shapes)}
        for shapes in shapes_list
    ]


def _rms_nodes(x, y, *, square="mul", inverse="reciprocal", axes="axes", eps="eps", weight="w"):
    """The RMS norm as our exporter writes LlamaRMSNorm: x * rsqrt(mean(x^2) + eps) * w."""
    nodes = [
        helper.make_node("Mul", [x, x], ["sq"])
        if square == "mul"
        else helper.make_node("Pow", [x, "two"], ["sq"]),
        helper.make_node("ReduceMean", ["sq", axes], ["mean"], keepdims=1),
        helper.make_node("Add", ["mean", eps], ["var"]),
        helper.make_node("Sqrt", ["var"], ["std"]),
    ]
    normed = "normed" if weight else y
    if inverse == "reciprocal":
        nodes += [
            helper.make_node("Reciprocal", ["std"], ["rstd"]),
            helper.make_node("Mul", [x, "rstd"], [normed]),
        ]
    else:
        nodes.append(helper.make_node("Div", [x, "std"], [normed]))
    if weight:
        nodes.append(helper.make_node("Mul", [weight, normed], [y]))
    return nodes


def _inits(dtype=np.float32):
    rnd = np.random.default_rng(1)
    return {
        "axes": np.array([-1], np.int64),
        "eps": np.array(1e-6, dtype),
        "two": np.array(2.0, dtype),
        "w": (1 + 0.1 * rnd.standard_normal(H)).astype(dtype),
        "w2": (1 + 0.1 * rnd.standard_normal(H)).astype(dtype),
        "axes1": np.array([1], np.int64),
    }


@pytest.mark.parametrize("square, inverse", [("mul", "reciprocal"), ("pow", "div")])
def test_rms_norm_to_simplified_layer_norm(square, inverse):
    model = make_model(
        _rms_nodes("x", "y", square=square, inverse=inverse),
        [("x", F, ("b", "s", H))],
        [("y", F, ("b", "s", H))],
        _inits(),
    )
    assert len(model.graph.node) == 7 - (inverse == "div")
    opt, report = check_ort_pattern(model, _feeds(["x"], [[(2, 5, H)], [(1, 9, H)]]))
    assert op_types(opt) == ["SimplifiedLayerNormalization"]
    assert opt.graph.node[0].domain == ""
    assert applied(report, "RMSNormToSimplifiedLayerNorm") == 1
    assert applied(report, "SimplifiedLayerNormMulToScale") == 1


def test_rms_norm_without_weight_float16():
    model = make_model(
        _rms_nodes("x", "y", weight=None),
        [("x", T.FLOAT16, ("b", "s", H))],
        [("y", T.FLOAT16, ("b", "s", H))],
        _inits(np.float16),
    )
    opt, _ = check_ort_pattern(
        model, _feeds(["x"], [[(2, 5, H)], [(1, 9, H)]], np.float16), atol=1e-2, rtol=1e-2
    )
    assert op_types(opt) == ["SimplifiedLayerNormalization"]


def test_rms_norm_wrong_axis_refused():
    model = make_model(
        _rms_nodes("x", "y", axes="axes1"),
        [("x", F, ("b", "s", H))],
        [("y", F, ("b", "s", H))],
        _inits(),
    )
    opt, report = check_ort_pattern(model, _feeds(["x"], [[(2, 5, H)], [(1, 9, H)]]))
    assert "SimplifiedLayerNormalization" not in op_types(opt)
    assert any("last axes" in r for r in refused(report, "RMSNormToSimplifiedLayerNorm"))


def test_rms_norm_epsilon_not_constant_refused():
    model = make_model(
        _rms_nodes("x", "y", eps="e"),
        [("x", F, ("b", "s", H)), ("e", F, ())],
        [("y", F, ("b", "s", H))],
        _inits(),
    )
    feeds = _feeds(["x"], [[(2, 5, H)], [(1, 9, H)]])
    for f in feeds:
        f["e"] = np.array(1e-6, np.float32)
    opt, report = check_ort_pattern(model, feeds)
    assert "SimplifiedLayerNormalization" not in op_types(opt)
    assert any("epsilon" in r for r in refused(report, "RMSNormToSimplifiedLayerNorm"))


def test_rms_norm_intermediate_used_elsewhere_refused():
    model = make_model(
        _rms_nodes("x", "y"),
        [("x", F, ("b", "s", H))],
        [("y", F, ("b", "s", H)), ("rstd", F, ("b", "s", 1))],
        _inits(),
    )
    opt, report = check_ort_pattern(model, _feeds(["x"], [[(2, 5, H)], [(1, 9, H)]]))
    assert "SimplifiedLayerNormalization" not in op_types(opt)
    assert any("graph output" in r for r in refused(report, "RMSNormToSimplifiedLayerNorm"))


def _residual_block(norm_nodes):
    """s = a + b; y = norm(s); z = s + y (the sum is used again, as in a decoder)."""
    return (
        [helper.make_node("Add", ["a", "b"], ["s"])]
        + norm_nodes
        + [helper.make_node("Add", ["s", "y"], ["z"])]
    )


def test_add_rms_norm_to_skip_simplified_layer_norm():
    model = make_model(
        _residual_block(_rms_nodes("s", "y")),
        [("a", F, ("b", "s", H)), ("b", F, ("b", "s", H))],
        [("z", F, ("b", "s", H))],
        _inits(),
    )
    opt, report = check_ort_pattern(
        model, _feeds(["a", "b"], [[(2, 5, H)] * 2, [(1, 9, H)] * 2]), atol=1e-5, patterns=SKIP
    )
    assert op_types(opt) == ["SkipSimplifiedLayerNormalization", "Add"]
    node = opt.graph.node[0]
    assert node.domain == "com.microsoft"
    assert node.output[3] == "s" and not node.output[1] and not node.output[2]
    assert applied(report, "AddSimplifiedLayerNormToSkipSimplifiedLayerNorm") == 1


def test_add_norm_broadcast_refused():
    # b (H,) broadcasts: not a skip input of the same shape
    model = make_model(
        _residual_block(_rms_nodes("s", "y")),
        [("a", F, ("b", "s", H)), ("b", F, (H,))],
        [("z", F, ("b", "s", H))],
        _inits(),
    )
    opt, report = check_ort_pattern(
        model, _feeds(["a", "b"], [[(2, 5, H), (H,)], [(1, 9, H), (H,)]]), patterns=SKIP
    )
    assert op_types(opt) == ["Add", "SimplifiedLayerNormalization", "Add"]
    assert refused(report, "AddSimplifiedLayerNormToSkipSimplifiedLayerNorm")


def test_sum_used_before_the_norm_refused():
    # the sum is used by a node placed before the normalization: the fused node would
    # be placed after its consumer
    nodes = [
        helper.make_node("Add", ["a", "b"], ["s"]),
        helper.make_node("Relu", ["s"], ["r"]),
        helper.make_node("LayerNormalization", ["s", "w", "w2"], ["y"], axis=-1, epsilon=1e-5),
    ]
    model = make_model(
        nodes,
        [("a", F, ("b", "s", H)), ("b", F, ("b", "s", H))],
        [("y", F, ("b", "s", H)), ("r", F, ("b", "s", H))],
        _inits(),
    )
    opt, report = check_ort_pattern(model, _feeds(["a", "b"], [[(2, 5, H)] * 2]), patterns=SKIP)
    assert op_types(opt) == ["Add", "Relu", "LayerNormalization"]
    assert any("before" in r for r in refused(report, "AddLayerNormToSkipLayerNorm"))


@pytest.mark.parametrize("with_bias", [True, False])
def test_add_layer_norm_to_skip_layer_norm(with_bias):
    inputs = ["s", "w", "w2"] if with_bias else ["s", "w"]
    model = make_model(
        _residual_block(
            [helper.make_node("LayerNormalization", inputs, ["y"], axis=-1, epsilon=1e-5)]
        ),
        [("a", F, ("b", "s", H)), ("b", F, ("b", "s", H))],
        [("z", F, ("b", "s", H))],
        _inits(),
    )
    opt, report = check_ort_pattern(
        model, _feeds(["a", "b"], [[(2, 5, H)] * 2, [(1, 9, H)] * 2]), atol=1e-5, patterns=SKIP
    )
    assert op_types(opt) == ["SkipLayerNormalization", "Add"]
    assert applied(report, "AddLayerNormToSkipLayerNorm") == 1


def test_layer_norm_not_last_axis_refused():
    nodes = [
        helper.make_node("Add", ["a", "b"], ["s"]),
        helper.make_node("LayerNormalization", ["s", "w3"], ["y"], axis=1, epsilon=1e-5),
    ]
    model = make_model(
        nodes,
        [("a", F, (2, 3, H)), ("b", F, (2, 3, H))],
        [("y", F, (2, 3, H))],
        {"w3": np.ones((3, H), np.float32)},
    )
    opt, report = check_ort_pattern(model, _feeds(["a", "b"], [[(2, 3, H)] * 2]), patterns=SKIP)
    assert op_types(opt) == ["Add", "LayerNormalization"]
    assert any("last axis" in r for r in refused(report, "AddLayerNormToSkipLayerNorm"))


def test_weight_folded_into_skip_simplified():
    """Add + RMS norm + weight: whatever order the rewrites happen in, one node."""
    nodes = _residual_block(_rms_nodes("s", "y"))
    model = make_model(
        nodes,
        [("a", F, ("b", "s", H)), ("b", F, ("b", "s", H))],
        [("z", F, ("b", "s", H)), ("y", F, ("b", "s", H))],
        _inits(),
    )
    opt, _ = check_ort_pattern(model, _feeds(["a", "b"], [[(2, 5, H)] * 2]), patterns=SKIP)
    assert op_types(opt) == ["SkipSimplifiedLayerNormalization", "Add"]


def test_skip_fusions_not_in_the_onnxruntime_set():
    model = make_model(
        _residual_block(_rms_nodes("s", "y")),
        [("a", F, ("b", "s", H)), ("b", F, ("b", "s", H))],
        [("z", F, ("b", "s", H))],
        _inits(),
    )
    opt, _ = check_ort_pattern(model, _feeds(["a", "b"], [[(2, 5, H)] * 2]))
    assert op_types(opt) == ["Add", "SimplifiedLayerNormalization", "Add"]


def test_rms_norm_opset23_gives_rms_normalization():
    """From opset 23 the standard operator is used (a model onnx.checker accepts)."""
    model = make_model(
        _rms_nodes("x", "y"),
        [("x", F, ("b", "s", H))],
        [("y", F, ("b", "s", H))],
        _inits(),
        opset=23,
    )
    opt, _ = check_ort_pattern(model, _feeds(["x"], [[(2, 5, H)], [(1, 9, H)]]))
    assert op_types(opt) == ["RMSNormalization"]
