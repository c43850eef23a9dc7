"""The onnx_ir prototype (experimental_experiment.xoptim.ir): each of its three patterns
gives the same nodes as its xoptim counterpart and the same onnxruntime results before
and after, on two input shapes."""

import numpy as np
import pytest
from onnx import TensorProto as T
from onnx import helper

from experimental_experiment.xoptim.ir.compare import run_ir, run_xoptim
from experimental_experiment.xoptim.testing import make_model, op_types, run_ort

F = T.FLOAT
H = 8


def _feeds(names_shapes, dtype=np.float32):
    rnd = np.random.default_rng(0)
    return {n: rnd.standard_normal(s).astype(dtype) for n, s in names_shapes}


def _check(model, feeds_list, expected_ops, atol=1e-5):
    """Both optimizers give ``expected_ops`` (Identity aside) and the original results."""
    opt_x, n_x = run_xoptim(model)
    opt_i, n_i = run_ir(model)
    assert n_i == n_x > 0
    ops = [t for t in op_types(opt_i) if t != "Identity"]
    assert ops == [t for t in op_types(opt_x) if t != "Identity"] == expected_ops
    for feeds in feeds_list:
        expected = run_ort(model, feeds)
        for got in (run_ort(opt_i, feeds), run_ort(opt_x, feeds)):
            for e, g in zip(expected, got):
                np.testing.assert_allclose(e, g, atol=atol, rtol=atol)
    return opt_i


@pytest.mark.parametrize(
    "p1, p2, expected",
    [
        ([1, 0, 2], [0, 2, 1], ["Transpose"]),
        ([1, 2, 0], [2, 0, 1], []),  # the composition is the identity
    ],
)
def test_transpose_transpose(p1, p2, expected):
    model = make_model(
        [
            helper.make_node("Transpose", ["x"], ["t"], perm=p1),
            helper.make_node("Transpose", ["t"], ["y"], perm=p2),
        ],
        [("x", F, ("a", 3, 4))],
        [("y", F, None)],
    )
    opt = _check(model, [_feeds([("x", (2, 3, 4))]), _feeds([("x", (5, 3, 4))])], expected)
    assert [o.name for o in opt.graph.output] == ["y"]


def test_transpose_used_elsewhere_is_kept():
    model = make_model(
        [
            helper.make_node("Transpose", ["x"], ["t"], perm=[1, 0]),
            helper.make_node("Transpose", ["t"], ["y"], perm=[1, 0]),
            helper.make_node("Neg", ["t"], ["z"]),
        ],
        [("x", F, (3, 4))],
        [("y", F, None), ("z", F, None)],
    )
    _, n = run_ir(model)
    assert n == 0


def test_matmul_add_to_gemm():
    model = make_model(
        [
            helper.make_node("MatMul", ["a", "b"], ["ab"]),
            helper.make_node("Add", ["ab", "c"], ["y"]),
        ],
        [("a", F, ("m", 4))],
        [("y", F, ("m", 5))],
        {"b": np.ones((4, 5), np.float32), "c": np.arange(5).astype(np.float32)},
    )
    _check(model, [_feeds([("a", (3, 4))]), _feeds([("a", (7, 4))])], ["Gemm"])


def test_matmul_add_broadcasting_bias_is_kept():
    model = make_model(
        [
            helper.make_node("MatMul", ["a", "b"], ["ab"]),
            helper.make_node("Add", ["ab", "c"], ["y"]),
        ],
        [("a", F, (1, 4))],
        [("y", F, None)],
        {"b": np.ones((4, 5), np.float32), "c": np.ones((3, 5), np.float32)},
    )
    _, n = run_ir(model)
    assert n == 0


def _rms(square, inverse):
    nodes = [
        helper.make_node("Mul", ["x", "x"], ["sq"])
        if square == "mul"
        else helper.make_node("Pow", ["x", "two"], ["sq"]),
        helper.make_node("ReduceMean", ["sq", "axes"], ["mean"], keepdims=1),
        helper.make_node("Add", ["mean", "eps"], ["var"]),
        helper.make_node("Sqrt", ["var"], ["std"]),
    ]
    if inverse == "reciprocal":
        nodes += [
            helper.make_node("Reciprocal", ["std"], ["rstd"]),
            helper.make_node("Mul", ["x", "rstd"], ["normed"]),
        ]
    else:
        nodes.append(helper.make_node("Div", ["x", "std"], ["normed"]))
    nodes.append(helper.make_node("Mul", ["normed", "w"], ["y"]))
    inits = {
        "axes": np.array([-1], np.int64),
        "eps": np.array(1e-6, np.float32),
        "two": np.array(2.0, np.float32),
        "w": np.linspace(0.5, 1.5, H).astype(np.float32),
    }
    return make_model(nodes, [("x", F, ("b", "s", H))], [("y", F, ("b", "s", H))], inits)


@pytest.mark.parametrize("square, inverse", [("mul", "reciprocal"), ("pow", "div")])
def test_rms_norm(square, inverse):
    feeds = [_feeds([("x", (2, 5, H))]), _feeds([("x", (1, 9, H))])]
    _check(_rms(square, inverse), feeds, ["SimplifiedLayerNormalization", "Mul"], atol=1e-4)


def test_rms_norm_other_axis_is_kept():
    model = _rms("mul", "reciprocal")
    model.graph.initializer[0].CopyFrom(helper.make_tensor("axes", T.INT64, [1], [1]))
    _, n = run_ir(model)
    assert n == 0
