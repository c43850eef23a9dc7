"""The one helper per plumbing: i64 constants, reading constants and attributes."""

import numpy as np
from onnx import TensorProto, helper

from experimental_experiment.xbuilder import GraphBuilder
from experimental_experiment.xbuilder.dtypes import i64
from experimental_experiment.xbuilder.graph_utils import (
    attribute_value,
    constant_ints,
    constant_value,
)


def test_i64():
    for values in (3, [1, -2], (4,), np.array([1.0, 2.0])):
        a = i64(values)
        assert a.dtype == np.int64
        np.testing.assert_array_equal(a, np.array(values).astype(np.int64))


def test_attribute_value():
    node = helper.make_node("Pad", ["x"], ["y"], mode="reflect", pads=[1, 2], value=0.5)
    assert attribute_value(node, "mode") == "reflect"
    assert attribute_value(node, "pads") == [1, 2]
    assert attribute_value(node, "value") == 0.5
    assert attribute_value(node, "missing", 7) == 7


def test_constant_readers():
    g = GraphBuilder()
    x = g.make_tensor_input("x", TensorProto.FLOAT, ("n",))
    small = g.make_constant(i64([3, 4]))
    big = g.make_initializer("w", np.zeros((100,), dtype=np.float32))
    assert constant_ints(g, small) == [3, 4]
    np.testing.assert_array_equal(constant_value(g, small), [3, 4])
    assert constant_value(g, big, max_size=10) is None
    assert constant_value(g, big).shape == (100,)
    assert constant_ints(g, big) is None  # not integers
    assert constant_value(g, x) is None and constant_value(g, "") is None
