"""Expand, Squeeze/Unsqueeze, Slice, Split/Concat, shape folding patterns."""

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
I64 = np.int64


def _x(*shapes):
    return [{"x": np.random.randn(*s).astype(np.float32)} for s in shapes]


def test_expand_to_same_shape_removed():
    model = make_model(
        [
            helper.make_node("Shape", ["x"], ["s"]),
            helper.make_node("Expand", ["x", "s"], ["e"]),
            helper.make_node("Neg", ["e"], ["y"]),
        ],
        [("x", F, ("n", 3))],
        [("y", F, ("n", 3))],
    )
    opt, report = check_pattern(model, _x((2, 3), (5, 3)))
    assert op_types(opt) == ["Neg"]
    assert applied(report, "ExpandToIdentity") == 1


def test_expand_broadcasting_kept():
    model = make_model(
        [helper.make_node("Expand", ["x", "s"], ["y"])],
        [("x", F, ("n", 1))],
        [("y", F, None)],
        {"s": np.array([1, 4], I64)},
    )
    opt, report = check_pattern(model, _x((2, 1), (5, 1)))
    assert op_types(opt) == ["Expand"]
    assert refused(report, "ExpandToIdentity")


def test_unsqueeze_squeeze():
    model = make_model(
        [
            helper.make_node("Unsqueeze", ["x", "a"], ["u"]),
            helper.make_node("Squeeze", ["u", "b"], ["s"]),
            helper.make_node("Neg", ["s"], ["y"]),
        ],
        [("x", F, ("n", 3))],
        [("y", F, None)],
        {"a": np.array([1], I64), "b": np.array([-2], I64)},
    )
    opt, report = check_pattern(model, _x((2, 3), (5, 3)))
    assert op_types(opt) == ["Neg"]
    assert applied(report, "UnsqueezeSqueezeToIdentity") == 1


def test_squeeze_unsqueeze():
    model = make_model(
        [
            helper.make_node("Squeeze", ["x", "a"], ["u"]),
            helper.make_node("Unsqueeze", ["u", "a"], ["s"]),
            helper.make_node("Neg", ["s"], ["y"]),
        ],
        [("x", F, ("n", 1, 3))],
        [("y", F, None)],
        {"a": np.array([1], I64)},
    )
    opt, _ = check_pattern(model, _x((2, 1, 3), (5, 1, 3)))
    assert op_types(opt) == ["Neg"]


def test_squeeze_unsqueeze_other_axis_kept():
    model = make_model(
        [
            helper.make_node("Squeeze", ["x", "a"], ["u"]),
            helper.make_node("Unsqueeze", ["u", "b"], ["y"]),
        ],
        [("x", F, ("n", 1, 3))],
        [("y", F, None)],
        {"a": np.array([1], I64), "b": np.array([2], I64)},
    )
    opt, _ = check_pattern(model, _x((2, 1, 3), (5, 1, 3)))
    assert op_types(opt) == ["Squeeze", "Unsqueeze"]


def test_unsqueeze_unsqueeze():
    model = make_model(
        [
            helper.make_node("Unsqueeze", ["x", "a"], ["u"]),
            helper.make_node("Unsqueeze", ["u", "b"], ["y"]),
        ],
        [("x", F, ("n", 3))],
        [("y", F, None)],
        {"a": np.array([0, 2], I64), "b": np.array([-1, 1], I64)},
    )
    opt, report = check_pattern(model, _x((2, 3), (5, 3)))
    assert op_types(opt) == ["Unsqueeze"]
    assert applied(report, "UnsqueezeUnsqueezeToUnsqueeze") == 1


def test_slice_full_removed():
    model = make_model(
        [
            helper.make_node("Slice", ["x", "s", "e", "a"], ["u"]),
            helper.make_node("Neg", ["u"], ["y"]),
        ],
        [("x", F, ("n", 3))],
        [("y", F, ("n", 3))],
        {"s": np.array([0], I64), "e": np.array([2**62], I64), "a": np.array([0], I64)},
    )
    opt, report = check_pattern(model, _x((2, 3), (5, 3)))
    assert op_types(opt) == ["Neg"]
    assert applied(report, "SliceToIdentity") == 1


def test_slice_reversed_kept():
    # same shape but reversed: not a no-op
    model = make_model(
        [helper.make_node("Slice", ["x", "s", "e", "a", "p"], ["y"])],
        [("x", F, ("n", 3))],
        [("y", F, None)],
        {
            "s": np.array([-1], I64),
            "e": np.array([-(2**62)], I64),
            "a": np.array([1], I64),
            "p": np.array([-1], I64),
        },
    )
    opt, _ = check_pattern(model, _x((2, 3), (5, 3)))
    assert op_types(opt) == ["Slice"]


def test_slice_slice():
    model = make_model(
        [
            helper.make_node("Slice", ["x", "s1", "e1", "a1"], ["u"]),
            helper.make_node("Slice", ["u", "s2", "e2", "a2"], ["y"]),
        ],
        [("x", F, ("n", 6))],
        [("y", F, None)],
        {
            "s1": np.array([1], I64),
            "e1": np.array([5], I64),
            "a1": np.array([1], I64),
            "s2": np.array([1], I64),
            "e2": np.array([-1], I64),
            "a2": np.array([0], I64),
        },
    )
    opt, report = check_pattern(model, _x((3, 6), (5, 6)))
    assert op_types(opt) == ["Slice"]
    assert applied(report, "SliceSliceToSlice") == 1


def test_slice_slice_same_axis_kept():
    model = make_model(
        [
            helper.make_node("Slice", ["x", "s1", "e1", "a1"], ["u"]),
            helper.make_node("Slice", ["u", "s1", "e1", "a1"], ["y"]),
        ],
        [("x", F, ("n", 6))],
        [("y", F, None)],
        {"s1": np.array([1], I64), "e1": np.array([5], I64), "a1": np.array([1], I64)},
    )
    opt, report = check_pattern(model, _x((3, 6), (5, 6)))
    assert op_types(opt) == ["Slice", "Slice"]
    assert refused(report, "SliceSliceToSlice")


def test_split_concat():
    model = make_model(
        [
            helper.make_node("Split", ["x", "sp"], ["a", "b"], axis=1),
            helper.make_node("Concat", ["a", "b"], ["c"], axis=-1),
            helper.make_node("Neg", ["c"], ["y"]),
        ],
        [("x", F, ("n", 6))],
        [("y", F, None)],
        {"sp": np.array([2, 4], I64)},
    )
    opt, report = check_pattern(model, _x((3, 6), (5, 6)))
    assert op_types(opt) == ["Neg"]
    assert applied(report, "SplitConcatToIdentity") == 1


def test_split_concat_swapped_kept():
    model = make_model(
        [
            helper.make_node("Split", ["x", "sp"], ["a", "b"], axis=1),
            helper.make_node("Concat", ["b", "a"], ["y"], axis=1),
        ],
        [("x", F, ("n", 6))],
        [("y", F, None)],
        {"sp": np.array([2, 4], I64)},
    )
    opt, _ = check_pattern(model, _x((3, 6), (5, 6)))
    assert op_types(opt) == ["Split", "Concat"]


def test_shape_of_static_dims_folded():
    # the last dimension is static: Gather(Shape(x), 1) is a constant
    model = make_model(
        [
            helper.make_node("Shape", ["x"], ["s"]),
            helper.make_node("Gather", ["s", "i"], ["d"]),
            helper.make_node("Shape", ["x"], ["s2"], start=2),
            helper.make_node("Concat", ["m", "d", "s2"], ["c"], axis=0),
            helper.make_node("Reshape", ["x", "c"], ["r"]),
            helper.make_node("Neg", ["r"], ["y"]),
        ],
        [("x", F, ("n", 3, 4))],
        [("y", F, None)],
        {"i": np.array([1], I64), "m": np.array([-1], I64)},
    )
    opt, report = check_pattern(model, _x((2, 3, 4), (5, 3, 4)))
    assert op_types(opt) in (["Reshape", "Neg"], ["Neg"])
    assert applied(report, "GatherShapeToConstant") == 1
    assert applied(report, "ShapeToConstant") == 1


def test_shape_of_dynamic_dim_kept():
    model = make_model(
        [helper.make_node("Shape", ["x"], ["s"]), helper.make_node("Gather", ["s", "i"], ["y"])],
        [("x", F, ("n", 3))],
        [("y", T.INT64, None)],
        {"i": np.array([0], I64)},
    )
    opt, _ = check_pattern(model, _x((2, 3), (5, 3)))
    assert op_types(opt) == ["Shape", "Gather"]
