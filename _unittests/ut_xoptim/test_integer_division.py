"""FloorDivOfSizeToDiv: the floor division of a size plus a constant by a positive
constant, as the converters write it (Div(Sub(t, Mod(t, c)), c)), becomes one Div of a
non-negative numerator; checked against numpy's floor division on several sizes,
including the sizes where truncation and floor differ (t < 0)."""

import numpy as np
import pytest
from onnx import TensorProto, helper

from experimental_experiment.xoptim.patterns.integer_division import FloorDivOfSizeToDiv
from experimental_experiment.xoptim.testing import (
    applied,
    check_pattern,
    make_model,
    op_types,
    refused,
    run_ort,
)

I64 = TensorProto.INT64


def _floordiv_model(k, c: int, plus: int | None):
    """y = (x.shape[1] + k) // c (+ plus), the way the symbolic converters write it
    (``k`` an int or a 1-D array, which broadcasts the size)."""
    nodes = [
        helper.make_node("Shape", ["x"], ["shape"]),
        helper.make_node("Gather", ["shape", "one"], ["s"], axis=0),
        helper.make_node("Add", ["s", "k"], ["t"]),
        helper.make_node("Mod", ["t", "c"], ["r"], fmod=0),
        helper.make_node("Sub", ["t", "r"], ["e"]),
        helper.make_node("Div", ["e", "c"], ["q" if plus is not None else "y"]),
    ]
    if plus is not None:
        nodes.append(helper.make_node("Add", ["q", "p"], ["y"]))
    k = np.array(k, np.int64)
    inits = {
        "one": np.array(1, np.int64),
        "k": k,
        "c": np.array(c, np.int64),
        "p": np.array(plus or 0, np.int64),
    }
    return make_model(
        nodes, [("x", TensorProto.FLOAT, ("a", "b"))], [("y", I64, k.shape)], initializers=inits
    )


def _expected(size, k, c, plus):
    return (size + k) // c + (plus or 0)


@pytest.mark.parametrize(
    "k,c,plus", [(-1, 8, 1), (-1, 8, None), (-5, 2, 1), (-9, 4, 3), (3, 4, None), (0, 3, 1)]
)
def test_floor_division_of_a_size(k, c, plus):
    model = _floordiv_model(k, c, plus)
    feeds = [{"x": np.zeros((2, n), np.float32)} for n in (0, 1, 3, 7, 8, 9, 16, 17)]
    opt, report = check_pattern(model, feeds, patterns=[FloorDivOfSizeToDiv()])
    assert applied(report, "FloorDivOfSizeToDiv") == 1
    assert "Mod" not in op_types(opt)
    if k < 0 and plus is not None and plus == -(k // c):
        assert op_types(opt).count("Add") == 1 and "Sub" not in op_types(opt)
    for feed in feeds:  # an independent reference: python's floor division
        assert int(run_ort(opt, feed)[0]) == _expected(feed["x"].shape[1], k, c, plus)


def test_a_numerator_that_is_not_a_size_is_left():
    nodes = [
        helper.make_node("Mod", ["t", "c"], ["r"], fmod=0),
        helper.make_node("Sub", ["t", "r"], ["e"]),
        helper.make_node("Div", ["e", "c"], ["y"]),
    ]
    model = make_model(
        nodes, [("t", I64, ())], [("y", I64, ())], initializers={"c": np.array(4, np.int64)}
    )
    feeds = [{"t": np.array(v, np.int64)} for v in (-7, -1, 0, 5)]
    opt, report = check_pattern(model, feeds, patterns=[FloorDivOfSizeToDiv()])
    assert applied(report, "FloorDivOfSizeToDiv") == 0
    assert "Mod" in op_types(opt)


def test_a_constant_that_broadcasts_the_size_is_left():
    # s is 0-D, k is [1]: (s + k) // c is [1]; Div(s + k', c) would be 0-D
    model = _floordiv_model([-1], 4, None)
    feeds = [{"x": np.zeros((2, n), np.float32)} for n in (0, 5)]
    opt, report = check_pattern(model, feeds, patterns=[FloorDivOfSizeToDiv()])
    assert applied(report, "FloorDivOfSizeToDiv") == 0
    assert any("broadcasts" in r for r in refused(report, "FloorDivOfSizeToDiv"))
