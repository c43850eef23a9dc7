"""MatMul + Add -> Gemm, neutral elements (x * 1, x + 0, ...)."""

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


def _x(*shapes):
    return [{"x": np.random.randn(*s).astype(np.float32)} for s in shapes]


@pytest.mark.parametrize("bias_shape", [(5,), (1, 5)])
def test_matmul_add_to_gemm(bias_shape):
    model = make_model(
        [helper.make_node("MatMul", ["x", "w"], ["m"]), helper.make_node("Add", ["b", "m"], ["y"])],
        [("x", F, ("n", 4))],
        [("y", F, ("n", 5))],
        {
            "w": np.random.randn(4, 5).astype(np.float32),
            "b": np.random.randn(*bias_shape).astype(np.float32),
        },
    )
    opt, report = check_pattern(model, _x((2, 4), (7, 4)), atol=1e-4)
    assert op_types(opt) == ["Gemm"]
    assert applied(report, "MatMulAddToGemm") == 1


def test_matmul_add_broadcasting_bias_kept():
    # the bias makes the output 3-D: Gemm cannot do it
    model = make_model(
        [helper.make_node("MatMul", ["x", "w"], ["m"]), helper.make_node("Add", ["m", "b"], ["y"])],
        [("x", F, ("n", 4))],
        [("y", F, None)],
        {
            "w": np.random.randn(4, 5).astype(np.float32),
            "b": np.random.randn(3, 1, 5).astype(np.float32),
        },
    )
    opt, report = check_pattern(model, _x((2, 4), (7, 4)), atol=1e-4)
    assert op_types(opt) == ["MatMul", "Add"]
    assert refused(report, "MatMulAddToGemm")


def test_matmul_add_3d_kept():
    model = make_model(
        [helper.make_node("MatMul", ["x", "w"], ["m"]), helper.make_node("Add", ["m", "b"], ["y"])],
        [("x", F, ("b", "n", 4))],
        [("y", F, None)],
        {"w": np.random.randn(4, 5).astype(np.float32), "b": np.random.randn(5).astype(np.float32)},
    )
    opt, _ = check_pattern(model, _x((2, 3, 4), (1, 7, 4)), atol=1e-4)
    assert op_types(opt) == ["MatMul", "Add"]


@pytest.mark.parametrize(
    "op, value, swap, name",
    [
        ("Mul", 1.0, True, "MulByOneToIdentity"),
        ("Add", 0.0, True, "AddZeroToIdentity"),
        ("Sub", 0.0, False, "SubZeroToIdentity"),
        ("Div", 1.0, False, "DivByOneToIdentity"),
    ],
)
def test_neutral_element_removed(op, value, swap, name):
    inputs = ["c", "x"] if swap else ["x", "c"]
    model = make_model(
        [helper.make_node(op, inputs, ["a"]), helper.make_node("Relu", ["a"], ["y"])],
        [("x", F, ("n", 3))],
        [("y", F, ("n", 3))],
        {"c": np.full((3,), value, dtype=np.float32)},
    )
    opt, report = check_pattern(model, _x((2, 3), (6, 3)))
    assert op_types(opt) == ["Relu"]
    assert applied(report, name) == 1


def test_mul_by_one_broadcasting_kept():
    # x (n, 1) * ones (1, 3) has shape (n, 3): not a no-op
    model = make_model(
        [helper.make_node("Mul", ["x", "c"], ["a"]), helper.make_node("Relu", ["a"], ["y"])],
        [("x", F, ("n", 1))],
        [("y", F, None)],
        {"c": np.ones((1, 3), dtype=np.float32)},
    )
    opt, report = check_pattern(model, _x((2, 1), (5, 1)))
    assert op_types(opt) == ["Mul", "Relu"]
    assert any("broadcasting" in r for r in refused(report, "MulByOneToIdentity"))


def test_sub_zero_on_the_left_kept():
    model = make_model(
        [helper.make_node("Sub", ["c", "x"], ["y"])],
        [("x", F, ("n", 3))],
        [("y", F, None)],
        {"c": np.zeros((3,), dtype=np.float32)},
    )
    opt, _ = check_pattern(model, _x((2, 3), (5, 3)))
    assert op_types(opt) == ["Sub"]


def test_mul_by_almost_one_kept():
    model = make_model(
        [helper.make_node("Mul", ["x", "c"], ["y"])],
        [("x", F, ("n", 3))],
        [("y", F, None)],
        {"c": np.array([1, 1, 1.0001], dtype=np.float32)},
    )
    opt, _ = check_pattern(model, _x((2, 3), (5, 3)))
    assert op_types(opt) == ["Mul"]


@pytest.mark.parametrize(
    "value, shape, kept", [(True, (3,), False), (True, (1, 3), True), (False, (3,), True)]
)
def test_and_true_removed(value, shape, kept):
    # And(x, True of shape (1, 3)) broadcasts x (3,) to (1, 3); And(x, False) is False
    model = make_model(
        [
            helper.make_node("Greater", ["x", "z"], ["b"]),
            helper.make_node("And", ["c", "b"], ["y"]),
        ],
        [("x", F, (3,))],
        [("y", T.BOOL, None)],
        {"c": np.full(shape, value), "z": np.zeros((3,), dtype=np.float32)},
    )
    opt, report = check_pattern(model, _x((3,), (3,)))
    assert op_types(opt) == (["Greater", "And"] if kept else ["Greater"])
    assert applied(report, "AndTrueToIdentity") == (0 if kept else 1)
