"""Cast patterns: no-op casts, exact chains folded, lossy chains kept."""

import numpy as np
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


def _feeds(dtype=np.float32):
    return [
        {"x": (np.random.randn(2, 3) * 10).astype(dtype)},
        {"x": (np.random.randn(5, 3) * 10).astype(dtype)},
    ]


def test_cast_to_same_type_removed():
    model = make_model(
        [helper.make_node("Cast", ["x"], ["c"], to=F), helper.make_node("Relu", ["c"], ["y"])],
        [("x", F, ("n", 3))],
        [("y", F, ("n", 3))],
    )
    opt, report = check_pattern(model, _feeds())
    assert op_types(opt) == ["Relu"]
    assert applied(report, "CastToIdentity") == 1


def test_cast_widening_then_back_removed():
    model = make_model(
        [
            helper.make_node("Cast", ["x"], ["c"], to=T.DOUBLE),
            helper.make_node("Cast", ["c"], ["y"], to=T.FLOAT16),
        ],
        [("x", T.FLOAT16, ("n", 3))],
        [("y", T.FLOAT16, ("n", 3))],
    )
    opt, report = check_pattern(model, _feeds(np.float16))
    assert op_types(opt) == ["Identity"]  # y is a graph output, x an input
    assert applied(report, "CastCastToCast") == 1


def test_cast_widening_then_other_type_becomes_one_cast():
    model = make_model(
        [
            helper.make_node("Cast", ["x"], ["c"], to=F),
            helper.make_node("Cast", ["c"], ["d"], to=T.INT64),
            helper.make_node("Neg", ["d"], ["y"]),
        ],
        [("x", T.FLOAT16, ("n", 3))],
        [("y", T.INT64, ("n", 3))],
    )
    opt, _ = check_pattern(model, _feeds(np.float16))
    assert op_types(opt) == ["Cast", "Neg"]
    assert opt.graph.node[0].attribute[0].i == T.INT64


def test_lossy_cast_chain_kept():
    # float -> int64 -> float truncates: not a no-op
    model = make_model(
        [
            helper.make_node("Cast", ["x"], ["c"], to=T.INT64),
            helper.make_node("Cast", ["c"], ["y"], to=F),
        ],
        [("x", F, ("n", 3))],
        [("y", F, ("n", 3))],
    )
    opt, report = check_pattern(model, _feeds())
    assert op_types(opt) == ["Cast", "Cast"]
    assert any("loses information" in r for r in refused(report, "CastCastToCast"))


def test_narrowing_cast_chain_kept():
    model = make_model(
        [
            helper.make_node("Cast", ["x"], ["c"], to=T.FLOAT16),
            helper.make_node("Cast", ["c"], ["y"], to=F),
        ],
        [("x", F, ("n", 3))],
        [("y", F, ("n", 3))],
    )
    opt, _ = check_pattern(model, _feeds())
    assert op_types(opt) == ["Cast", "Cast"]


def test_cast_chain_intermediate_used_twice_kept():
    model = make_model(
        [
            helper.make_node("Cast", ["x"], ["c"], to=T.DOUBLE),
            helper.make_node("Cast", ["c"], ["y"], to=F),
            helper.make_node("Neg", ["c"], ["z"]),
        ],
        [("x", F, ("n", 3))],
        [("y", F, ("n", 3)), ("z", T.DOUBLE, ("n", 3))],
    )
    opt, report = check_pattern(model, _feeds())
    assert op_types(opt) == ["Cast", "Cast", "Neg"]
    assert any("used outside" in r for r in refused(report, "CastCastToCast"))
