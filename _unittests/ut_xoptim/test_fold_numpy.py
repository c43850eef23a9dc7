"""Constant folding in numpy (xoptim.fold_numpy): the same values, dtypes and shapes as
the reference evaluator it replaces for the operators met most."""

import numpy as np
import pytest
from onnx import helper, numpy_helper
from onnx.reference import ReferenceEvaluator

from experimental_experiment.xoptim.fold_numpy import evaluate_numpy

i64 = lambda *v: np.array(v, dtype=np.int64)  # noqa: E731
X = np.arange(24, dtype=np.float32).reshape(2, 3, 4) / 7


def _reference(node, feeds, opset):
    inputs = [helper.make_tensor_value_info(i, 0, None) for i in feeds]
    outputs = [helper.make_tensor_value_info(o, 0, None) for o in node.output]
    graph = helper.make_graph([node], "fold", inputs, outputs)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    return ReferenceEvaluator(model).run(None, feeds)


CASES = [
    ("Transpose", [X], {"perm": [2, 0, 1]}),
    ("Transpose", [X.astype(np.float16)], {}),
    ("Unsqueeze", [X, i64(0, -1)], {}),
    ("Unsqueeze", [np.array(3, dtype=np.int64), i64(0)], {}),
    ("Squeeze", [X.reshape(2, 1, 12, 1), i64(1)], {}),
    ("Squeeze", [X.reshape(2, 1, 12, 1)], {}),
    ("Reshape", [X, i64(0, -1)], {}),
    ("Reshape", [X, i64(0, 4, 3)], {"allowzero": 0}),
    ("Reshape", [np.zeros((0, 3), dtype=np.float32), i64(3, 0)], {"allowzero": 1}),
    (
        "Range",
        [np.array(0, dtype=np.int64), np.array(7, dtype=np.int64), np.array(2, dtype=np.int64)],
        {},
    ),
    (
        "Range",
        [
            np.array(1.5, dtype=np.float32),
            np.array(-2, dtype=np.float32),
            np.array(-0.25, dtype=np.float32),
        ],
        {},
    ),
    ("ConstantOfShape", [i64(2, 3)], {}),
    (
        "ConstantOfShape",
        [i64(2, 3)],
        {"value": numpy_helper.from_array(np.array([7], dtype=np.int64))},
    ),
    (
        "ConstantOfShape",
        [i64()],
        {"value": numpy_helper.from_array(np.array([0.5], dtype=np.float16))},
    ),
    ("Concat", [X, X[:, :1]], {"axis": 1}),
    ("Concat", [i64(1, 2), i64(3)], {"axis": -1}),
    ("Identity", [X], {}),
    ("Gather", [X, i64(2, -1, 0)], {"axis": 2}),
    ("Gather", [X.T, i64(1)], {}),
    ("Gather", [i64(5, 6, 7), np.array(-1, dtype=np.int64)], {"axis": 0}),
    ("Mul", [i64(2, 3), i64(4)], {}),
    ("Add", [X, X[:1]], {}),
    ("Sub", [np.array(5, dtype=np.int32), np.array([7, -2], dtype=np.int32)], {}),
    ("Div", [i64(7, -7, 7, -7, 6), i64(2, 2, -2, -2, 3)], {}),
    ("Div", [X, X + 1], {}),
    ("Div", [X.astype(np.float16), np.array(3, dtype=np.float16)], {}),
    ("Slice", [X, i64(1), i64(3)], {}),
    ("Slice", [X, i64(0, -3), i64(1, 100), i64(0, -1)], {}),
    ("Slice", [X, i64(-1), i64(-(2**63)), i64(2), i64(-1)], {}),  # whole axis, reversed
    ("Slice", [X, i64(2**63 - 1, 1), i64(0, 3), i64(1, 2), i64(-2, 1)], {}),
    ("Slice", [X, i64(5), i64(-5), i64(2), i64(-1)], {}),  # clamped at both ends
    ("Slice", [X, i64(3), i64(1)], {}),  # empty
]


@pytest.mark.parametrize("op,inputs,atts", CASES, ids=[f"{c[0]}-{i}" for i, c in enumerate(CASES)])
def test_same_as_reference(op, inputs, atts):
    names = [f"x{i}" for i in range(len(inputs))]
    node = helper.make_node(op, names, ["y"], **atts)
    feeds = dict(zip(names, inputs))
    got = evaluate_numpy(node, feeds, 18)
    assert got is not None, "computed in numpy"
    (expected,) = _reference(node, feeds, 18)
    (value,) = got
    value = np.asarray(value)
    assert value.dtype == expected.dtype and value.shape == expected.shape
    assert value.tobytes() == np.asarray(expected).tobytes()


@pytest.mark.parametrize(
    "node,feeds,opset",
    [
        (helper.make_node("Pow", ["a", "b"], ["y"]), {"a": X, "b": X}, 18),  # not handled
        (
            helper.make_node("Add", ["a", "b"], ["y"]),  # types differ: the reference raises
            {"a": X, "b": X.astype(np.float64)},
            18,
        ),
        (helper.make_node("Unsqueeze", ["a"], ["y"], axes=[0]), {"a": X}, 11),  # attribute
        (helper.make_node("Transpose", ["a"], ["y"], perm=[1, 0]), {"a": X}, 18),  # bad perm
        (
            helper.make_node("Range", ["a", "b", "c"], ["y"]),  # float16: stashed in float32
            {k: np.array(v, dtype=np.float16) for k, v in zip("abc", (0, 1, 0.1))},
            18,
        ),
        (helper.make_node("Concat", ["a", "b"], ["y"], axis=3), {"a": X, "b": X}, 18),
        (helper.make_node("Gather", ["a", "i"], ["y"]), {"a": X, "i": i64(5)}, 18),
        (helper.make_node("Reshape", ["a", "s"], ["y"]), {"a": X, "s": i64(5, -1)}, 18),
        (helper.make_node("Transpose", ["a"], ["y"], domain="com.microsoft"), {"a": X}, 18),
        (  # a repeated axis is invalid
            helper.make_node("Slice", ["a", "s", "e", "x"], ["y"]),
            {"a": X, "s": i64(0, 0), "e": i64(1, 1), "x": i64(1, -2)},
            18,
        ),
        (  # a step of zero is invalid
            helper.make_node("Slice", ["a", "s", "e", "x", "t"], ["y"]),
            {"a": X, "s": i64(0), "e": i64(1), "x": i64(1), "t": i64(0)},
            18,
        ),
    ],
)
def test_left_to_the_reference(node, feeds, opset):
    """Other operators, opsets and the invalid cases: None, the reference decides."""
    assert evaluate_numpy(node, feeds, opset) is None


def test_folding_does_not_import_the_reference_evaluator():
    """A transposed weight and a Range fold without onnx.reference (0.2 s to import)."""
    import subprocess
    import sys

    code = (
        "import sys, numpy as np\n"
        "from onnx import TensorProto\n"
        "from experimental_experiment.xbuilder import GraphBuilder\n"
        "from experimental_experiment.xoptim import optimize_builder\n"
        "g = GraphBuilder(18)\n"
        "x = g.make_tensor_input('x', TensorProto.FLOAT, (2, 4))\n"
        "w = g.make_initializer('w', np.ones((3, 4), dtype=np.float32))\n"
        "y = g.op.MatMul(x, g.op.Transpose(w, perm=[1, 0]))\n"
        "g.make_tensor_output(y, elem_type=TensorProto.FLOAT, shape=(2, 3))\n"
        "optimize_builder(g)\n"
        "assert 'Transpose' not in [n.op_type for n in g.nodes], g.nodes\n"
        "print('onnx.reference' in sys.modules)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False", out.stdout + out.stderr


def test_slice_random_against_onnxruntime():
    """Random starts, ends, axes and steps (negative, out of range) on a 3-D tensor: the
    same slices as onnxruntime, which clamps as the specification says. The reference
    evaluator is not the judge here: with a negative step and a start before the first
    element (start -3 on an axis of 2), it returns nothing, onnxruntime the first
    element."""
    import onnxruntime

    node = helper.make_node("Slice", list("asext"), ["y"])
    graph = helper.make_graph(
        [node],
        "g",
        [helper.make_tensor_value_info("a", 1, None)]
        + [helper.make_tensor_value_info(k, 7, None) for k in "sext"],
        [helper.make_tensor_value_info("y", 1, None)],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)])
    model.ir_version = 10
    sess = onnxruntime.InferenceSession(
        model.SerializeToString(), providers=["CPUExecutionProvider"]
    )
    rng = np.random.default_rng(0)
    for _ in range(500):
        n = int(rng.integers(1, 4))
        axes = rng.permutation([-3, 1, 2])[:n] if rng.random() < 0.5 else rng.permutation(3)[:n]
        feeds = {
            "a": X,
            "s": rng.integers(-6, 7, n).astype(np.int64),
            "e": rng.integers(-6, 7, n).astype(np.int64),
            "x": np.asarray(axes, dtype=np.int64),
            "t": rng.choice([-3, -2, -1, 1, 2, 3], n).astype(np.int64),
        }
        (got,) = evaluate_numpy(node, feeds, 18)
        (expected,) = sess.run(None, feeds)
        assert got.shape == expected.shape and got.tobytes() == expected.tobytes(), feeds
