"""onnxruntime patterns: FusedMatMul (transposed inputs, scalar scale)."""

import numpy as np
import pytest
from onnx import TensorProto as T
from onnx import helper

from experimental_experiment.xoptim.patterns_ort._testing import check_ort_pattern
from experimental_experiment.xoptim.testing import applied, make_model, op_types, refused

F = T.FLOAT


def _feeds(*shapes, dtype=np.float32):
    rnd = np.random.default_rng(0)
    return [
        {f"x{i}": rnd.standard_normal(s).astype(dtype) for i, s in enumerate(group)}
        for group in shapes
    ]


def _fused(model):
    return [
        (n.op_type, {a.name: helper.get_attribute_value(a) for a in n.attribute})
        for n in model.graph.node
    ]


def test_transpose_b_and_scale_fused():
    # attention scores: (q * 0.25) @ k^T
    model = make_model(
        [
            helper.make_node("Mul", ["x0", "s"], ["q"]),
            helper.make_node("Transpose", ["x1"], ["kt"], perm=[0, 1, 3, 2]),
            helper.make_node("MatMul", ["q", "kt"], ["y"]),
        ],
        [("x0", F, ("b", 2, "s", 8)), ("x1", F, ("b", 2, "s", 8))],
        [("y", F, ("b", 2, "s", "s"))],
        {"s": np.array(0.25, np.float32)},
    )
    opt, report = check_ort_pattern(model, _feeds([(2, 2, 5, 8)] * 2, [(1, 2, 7, 8)] * 2))
    assert op_types(model) == ["Mul", "Transpose", "MatMul"]
    assert _fused(opt) == [("FusedMatMul", {"alpha": 0.25, "transA": 0, "transB": 1})]
    assert opt.graph.node[0].domain == "com.microsoft"
    assert applied(report, "TransposeMatMulToFusedMatMul") == 1


def test_transpose_a_fused():
    model = make_model(
        [
            helper.make_node("Transpose", ["x0"], ["at"], perm=[0, 2, 1]),
            helper.make_node("MatMul", ["at", "x1"], ["y"]),
        ],
        [("x0", F, ("b", 6, "n")), ("x1", F, (6, 4))],
        [("y", F, ("b", "n", 4))],
    )
    opt, _ = check_ort_pattern(model, _feeds([(2, 6, 3), (6, 4)], [(3, 6, 5), (6, 4)]))
    assert _fused(opt) == [("FusedMatMul", {"alpha": 1.0, "transA": 1, "transB": 0})]


@pytest.mark.parametrize("op, value, alpha", [("Mul", 0.5, 0.5), ("Div", 4.0, 0.25)])
def test_scale_after_matmul_fused(op, value, alpha):
    model = make_model(
        [helper.make_node("MatMul", ["x0", "x1"], ["m"]), helper.make_node(op, ["m", "s"], ["y"])],
        [("x0", F, ("b", "n", 6)), ("x1", F, ("b", 6, 3))],
        [("y", F, ("b", "n", 3))],
        {"s": np.array([value], np.float32)},
    )
    opt, report = check_ort_pattern(model, _feeds([(2, 4, 6), (2, 6, 3)], [(1, 7, 6), (1, 6, 3)]))
    assert _fused(opt) == [("FusedMatMul", {"alpha": alpha, "transA": 0, "transB": 0})]
    assert applied(report, "MatMulScaleToFusedMatMul") == 1


def test_float16():
    model = make_model(
        [
            helper.make_node("Transpose", ["x1"], ["kt"], perm=[0, 2, 1]),
            helper.make_node("MatMul", ["x0", "kt"], ["y"]),
        ],
        [("x0", T.FLOAT16, ("b", "n", 8)), ("x1", T.FLOAT16, ("b", "m", 8))],
        [("y", T.FLOAT16, ("b", "n", "m"))],
    )
    opt, _ = check_ort_pattern(
        model,
        _feeds([(2, 3, 8), (2, 5, 8)], [(1, 4, 8), (1, 2, 8)], dtype=np.float16),
        atol=1e-2,
        rtol=1e-2,
    )
    assert op_types(opt) == ["FusedMatMul"]


def test_wrong_axes_not_fused():
    # perm=[0, 2, 1, 3] does not swap the last two axes
    model = make_model(
        [
            helper.make_node("Transpose", ["x1"], ["kt"], perm=[0, 2, 1, 3]),
            helper.make_node("MatMul", ["x0", "kt"], ["y"]),
        ],
        [("x0", F, ("b", 3, 4, 5)), ("x1", F, ("b", 5, 3, 6))],
        [("y", F, ("b", 3, 4, 6))],
    )
    opt, _ = check_ort_pattern(
        model, _feeds([(2, 3, 4, 5), (2, 5, 3, 6)], [(1, 3, 4, 5), (1, 5, 3, 6)])
    )
    assert op_types(opt) == ["Transpose", "MatMul"]


def test_transpose_used_elsewhere_not_fused():
    model = make_model(
        [
            helper.make_node("Transpose", ["x1"], ["kt"], perm=[0, 2, 1]),
            helper.make_node("MatMul", ["x0", "kt"], ["y"]),
            helper.make_node("Relu", ["kt"], ["z"]),
        ],
        [("x0", F, ("b", "n", 8)), ("x1", F, ("b", "m", 8))],
        [("y", F, ("b", "n", "m")), ("z", F, ("b", 8, "m"))],
    )
    opt, _ = check_ort_pattern(model, _feeds([(2, 3, 8), (2, 5, 8)], [(1, 4, 8), (1, 2, 8)]))
    assert op_types(opt) == ["Transpose", "MatMul", "Relu"]


def test_non_scalar_scale_not_fused():
    model = make_model(
        [
            helper.make_node("MatMul", ["x0", "x1"], ["m"]),
            helper.make_node("Mul", ["m", "s"], ["y"]),
        ],
        [("x0", F, ("b", "n", 6)), ("x1", F, ("b", 6, 3))],
        [("y", F, ("b", "n", 3))],
        {"s": np.array([0.5, 2.0, 1.5], np.float32)},
    )
    opt, _ = check_ort_pattern(model, _feeds([(2, 4, 6), (2, 6, 3)]))
    assert op_types(opt) == ["MatMul", "Mul"]


def test_non_constant_scale_not_fused():
    model = make_model(
        [
            helper.make_node("MatMul", ["x0", "x1"], ["m"]),
            helper.make_node("Mul", ["m", "x2"], ["y"]),
        ],
        [("x0", F, ("b", "n", 6)), ("x1", F, ("b", 6, 3)), ("x2", F, ())],
        [("y", F, ("b", "n", 3))],
    )
    opt, _ = check_ort_pattern(model, _feeds([(2, 4, 6), (2, 6, 3), ()]))
    assert op_types(opt) == ["MatMul", "Mul"]


def test_double_not_fused():
    model = make_model(
        [
            helper.make_node("Transpose", ["x1"], ["kt"], perm=[0, 2, 1]),
            helper.make_node("MatMul", ["x0", "kt"], ["y"]),
        ],
        [("x0", T.DOUBLE, ("b", "n", 8)), ("x1", T.DOUBLE, ("b", "m", 8))],
        [("y", T.DOUBLE, ("b", "n", "m"))],
    )
    opt, report = check_ort_pattern(model, _feeds([(2, 3, 8), (2, 5, 8)], dtype=np.float64))
    assert op_types(opt) == ["Transpose", "MatMul"]
    assert refused(report, "TransposeMatMulToFusedMatMul")


def _weight_model():
    # the output projection of a language model: X @ W^T with a constant W
    w = np.random.default_rng(1).standard_normal((5, 8)).astype(np.float32)
    return make_model(
        [
            helper.make_node("Transpose", ["w"], ["wt"], perm=[1, 0]),
            helper.make_node("MatMul", ["x0", "wt"], ["y"]),
        ],
        [("x0", F, ("b", "n", 8))],
        [("y", F, ("b", "n", 5))],
        {"w": w},
    )


@pytest.mark.parametrize(
    "patterns, expected",
    [
        ("default+onnxruntime", ["Transpose", "MatMul"]),
        ("default+onnxruntime+TransposeWeightMatMulToFusedMatMul", ["FusedMatMul"]),
    ],
)
def test_constant_weight_left_to_prepacking(patterns, expected):
    from experimental_experiment.xbuilder import OptimizationOptions
    from experimental_experiment.xoptim import optimize_model
    from experimental_experiment.xoptim.testing import run_ort

    # constant folding off: the Transpose of a weight too large to be folded
    model = _weight_model()
    opt = optimize_model(
        model, patterns=patterns, options=OptimizationOptions(constant_folding=False)
    )
    assert op_types(opt) == expected
    for feed in _feeds([(2, 3, 8)], [(1, 4, 8)]):
        np.testing.assert_allclose(run_ort(opt, feed)[0], run_ort(model, feed)[0], atol=1e-5)
