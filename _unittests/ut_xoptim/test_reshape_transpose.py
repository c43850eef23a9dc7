"""Reshape and Transpose patterns."""

import numpy as np
from onnx import TensorProto as T
from onnx import helper

from experimental_experiment.xoptim import optimize_model
from experimental_experiment.xoptim.testing import (
    applied,
    check_pattern,
    make_model,
    op_types,
    refused,
)

F = T.FLOAT
I64 = np.int64


def _x(*shapes):
    return [{"x": np.random.randn(*s).astype(np.float32)} for s in shapes]


def test_reshape_reshape():
    model = make_model(
        [
            helper.make_node("Reshape", ["x", "s1"], ["r"]),
            helper.make_node("Reshape", ["r", "s2"], ["y"]),
        ],
        [("x", F, ("n", 2, 3))],
        [("y", F, None)],
        {"s1": np.array([-1, 6], I64), "s2": np.array([-1, 3], I64)},
    )
    opt, report = check_pattern(model, _x((2, 2, 3), (5, 2, 3)))
    assert op_types(opt) == ["Reshape"]
    assert applied(report, "ReshapeReshapeToReshape") == 1


def test_reshape_reshape_with_zero_kept():
    # 0 copies the dimension of the intermediate result, not of x
    model = make_model(
        [
            helper.make_node("Reshape", ["x", "s1"], ["r"]),
            helper.make_node("Reshape", ["r", "s2"], ["y"]),
        ],
        [("x", F, ("n", 2, 3))],
        [("y", F, None)],
        {"s1": np.array([-1, 6], I64), "s2": np.array([0, 2, 3], I64)},
    )
    opt, report = check_pattern(model, _x((2, 2, 3), (5, 2, 3)))
    assert op_types(opt) == ["Reshape", "Reshape"]
    assert any("has a 0" in r for r in refused(report, "ReshapeReshapeToReshape"))


def test_reshape_reshape_with_zeros_of_both():
    # heads split then merged: the 0s of s2 copy dimensions s1 copied from x
    model = make_model(
        [
            helper.make_node("Reshape", ["x", "s1"], ["r"]),
            helper.make_node("Reshape", ["r", "s2"], ["y"]),
        ],
        [("x", F, ("b", "s", 12))],
        [("y", F, None)],
        {"s1": np.array([0, 0, 3, 4], I64), "s2": np.array([0, 0, -1], I64)},
    )
    opt, report = check_pattern(model, _x((2, 5, 12), (1, 1, 12)))
    # Reshape(x, [0, 0, -1]) keeps the shape of x: an Identity between input and output
    assert op_types(opt) in (["Reshape"], ["Identity"])
    assert applied(report, "ReshapeReshapeToReshape") == 1


def test_reshape_to_same_symbolic_shape_removed():
    model = make_model(
        [
            helper.make_node("Shape", ["x"], ["s"]),
            helper.make_node("Reshape", ["x", "s"], ["r"]),
            helper.make_node("Relu", ["r"], ["y"]),
        ],
        [("x", F, ("n", 3))],
        [("y", F, ("n", 3))],
    )
    opt, report = check_pattern(model, _x((2, 3), (7, 3)))
    assert op_types(opt) == ["Relu"]
    assert applied(report, "ReshapeToIdentity") == 1


def test_reshape_changing_shape_kept():
    model = make_model(
        [helper.make_node("Reshape", ["x", "s"], ["r"]), helper.make_node("Relu", ["r"], ["y"])],
        [("x", F, ("n", 3))],
        [("y", F, None)],
        {"s": np.array([3, -1], I64)},
    )
    opt, _ = check_pattern(model, _x((2, 3), (4, 3)))
    assert op_types(opt) == ["Reshape", "Relu"]


def test_reshape_keeping_every_dimension_removed():
    # [0, 0, -1] and [0, 0, 12] keep (b, s, 12) even when the output shape is unknown
    for target in ([0, 0, -1], [0, 0, 12], [0, -1, 12]):
        model = make_model(
            [
                helper.make_node("Reshape", ["x", "s"], ["r"]),
                helper.make_node("Relu", ["r"], ["y"]),
            ],
            [("x", F, ("b", "s", 12))],
            [("y", F, None)],
            {"s": np.array(target, I64)},
        )
        opt, report = check_pattern(model, _x((2, 5, 12), (1, 1, 12), (3, 2, 12)))
        assert op_types(opt) == ["Relu"], target
        assert applied(report, "ReshapeToIdentity") == 1


def test_reshape_moving_dimensions_kept():
    # two -1, a symbolic dimension given as a number, a different rank: kept
    for target in ([0, -1, -1], [2, 0, 12], [0, -1]):
        model = make_model(
            [
                helper.make_node("Reshape", ["x", "s"], ["r"]),
                helper.make_node("Relu", ["r"], ["y"]),
            ],
            [("x", F, ("b", "s", 12))],
            [("y", F, None)],
            {"s": np.array(target, I64)},
        )
        # [0, -1, -1] is not a valid shape, the others run
        opt = (
            optimize_model(model, patterns="default")
            if target.count(-1) > 1
            else check_pattern(model, _x((2, 5, 12)) if target[0] == 2 else [])[0]
        )
        assert op_types(opt) == ["Reshape", "Relu"], target


def test_transpose_transpose():
    model = make_model(
        [
            helper.make_node("Transpose", ["x"], ["t"], perm=[1, 2, 0]),
            helper.make_node("Transpose", ["t"], ["y"], perm=[0, 2, 1]),
        ],
        [("x", F, ("a", "b", 4))],
        [("y", F, None)],
    )
    opt, report = check_pattern(model, _x((2, 3, 4), (3, 5, 4)))
    assert op_types(opt) == ["Transpose"]
    assert applied(report, "TransposeTransposeToTranspose") == 1


def test_transpose_transpose_identity():
    model = make_model(
        [
            helper.make_node("Transpose", ["x"], ["t"], perm=[1, 2, 0]),
            helper.make_node("Transpose", ["t"], ["u"], perm=[2, 0, 1]),
            helper.make_node("Neg", ["u"], ["y"]),
        ],
        [("x", F, ("a", "b", 4))],
        [("y", F, None)],
    )
    opt, _ = check_pattern(model, _x((2, 3, 4), (3, 5, 4)))
    assert op_types(opt) == ["Neg"]


def test_transpose_identity_perm():
    model = make_model(
        [
            helper.make_node("Transpose", ["x"], ["t"], perm=[0, 1]),
            helper.make_node("Neg", ["t"], ["y"]),
        ],
        [("x", F, ("a", 4))],
        [("y", F, None)],
    )
    opt, _ = check_pattern(model, _x((2, 4), (3, 4)))
    assert op_types(opt) == ["Neg"]


def test_transpose_used_twice_kept():
    model = make_model(
        [
            helper.make_node("Transpose", ["x"], ["t"], perm=[1, 0]),
            helper.make_node("Transpose", ["t"], ["y"], perm=[1, 0]),
            helper.make_node("Neg", ["t"], ["z"]),
        ],
        [("x", F, ("a", 4))],
        [("y", F, None), ("z", F, None)],
    )
    opt, report = check_pattern(model, _x((2, 4), (3, 4)))
    assert op_types(opt) == ["Transpose", "Transpose", "Neg"]
    assert refused(report, "TransposeTransposeToTranspose")


def test_transpose_matmul_to_gemm():
    model = make_model(
        [
            helper.make_node("Transpose", ["x"], ["t"], perm=[1, 0]),
            helper.make_node("Transpose", ["w"], ["tw"], perm=[1, 0]),
            helper.make_node("MatMul", ["t", "tw"], ["y"]),
        ],
        [("x", F, (4, "n")), ("w", F, (5, 4))],
        [("y", F, None)],
    )
    feeds = _x((4, 2), (4, 7))
    for f in feeds:
        f["w"] = np.random.randn(5, 4).astype(np.float32)
    opt, report = check_pattern(model, feeds, atol=1e-4)
    assert op_types(opt) == ["Gemm"]
    atts = {a.name: a.i for a in opt.graph.node[0].attribute}
    assert atts == {"transA": 1, "transB": 1}
    assert applied(report, "TransposeMatMulToGemm") == 1


def test_transpose_matmul_3d_kept():
    model = make_model(
        [
            helper.make_node("Transpose", ["x"], ["t"], perm=[0, 2, 1]),
            helper.make_node("MatMul", ["t", "w"], ["y"]),
        ],
        [("x", F, ("b", 4, 3))],
        [("y", F, None)],
        {"w": np.random.randn(4, 5).astype(np.float32)},
    )
    opt, _ = check_pattern(model, _x((2, 4, 3), (3, 4, 3)), atol=1e-4)
    assert op_types(opt) == ["Transpose", "MatMul"]


def test_transpose_folded_into_gemm():
    model = make_model(
        [
            helper.make_node("Transpose", ["x"], ["t"], perm=[1, 0]),
            helper.make_node("Gemm", ["t", "w", "b"], ["y"], transB=1),
        ],
        [("x", F, (4, "n"))],
        [("y", F, None)],
        {"w": np.random.randn(5, 4).astype(np.float32), "b": np.random.randn(5).astype(np.float32)},
    )
    opt, _ = check_pattern(model, _x((4, 2), (4, 7)), atol=1e-4)
    assert op_types(opt) == ["Gemm"]
    assert {a.name: a.i for a in opt.graph.node[0].attribute} == {"transA": 1, "transB": 1}
