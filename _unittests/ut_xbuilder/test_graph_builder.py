"""GraphBuilder used directly: op API, constants, names, shape rules, output
(the passes are tested in ``ut_xoptim/test_passes.py``)."""

import numpy as np
import onnx
import onnxruntime
import pytest
from onnx import TensorProto

from experimental_experiment.xbuilder import (
    DEFAULT_OPSET,
    GraphBuilder,
    GraphBuilderError,
)

F, F16, I64, B = TensorProto.FLOAT, TensorProto.FLOAT16, TensorProto.INT64, TensorProto.BOOL


def _run(model: onnx.ModelProto, feeds: dict) -> list:
    onnx.checker.check_model(model, full_check=True)
    sess = onnxruntime.InferenceSession(
        model.SerializeToString(), providers=["CPUExecutionProvider"]
    )
    return sess.run(None, feeds)


def _ops(model: onnx.ModelProto) -> list[str]:
    return [n.op_type for n in model.graph.node]


def _dims(vi) -> list:
    return [d.dim_param or d.dim_value for d in vi.type.tensor_type.shape.dim]


# op API and constants


@pytest.mark.parametrize("elem_type,np_type", [(F, np.float32), (F16, np.float16), (I64, np.int64)])
def test_scalar_takes_the_type_of_the_tensor(elem_type, np_type):
    g = GraphBuilder()
    x = g.make_tensor_input("x", elem_type, ("n",))
    y = g.op.Mul(g.op.Add(x, 2), 3)
    assert g.get_type(y) == elem_type
    for name in g.nodes[0].input[1:]:
        assert g.get_constant(name).dtype == np_type
    g.make_tensor_output(y, output_name="y")
    feed = np.arange(4).astype(np_type)
    (got,) = _run(g.to_onnx(optimize=False), {"x": feed})
    np.testing.assert_allclose(got, (feed + 2) * 3)
    assert got.dtype == np_type


def test_where_scalar_takes_the_branch_type():
    g = GraphBuilder()
    c = g.make_tensor_input("c", B, (3,))
    x = g.make_tensor_input("x", F, (3,))
    g.make_tensor_output(g.op.Where(c, 0.5, x), output_name="y")
    assert g.get_constant(g.nodes[0].input[1]).dtype == np.float32
    (got,) = _run(
        g.to_onnx(),
        {"c": np.array([True, False, True]), "x": np.array([1, 2, 3], dtype=np.float32)},
    )
    np.testing.assert_allclose(got, [0.5, 2, 0.5])


def test_lists_and_arrays_become_constants():
    g = GraphBuilder()
    x = g.make_tensor_input("x", F, (2, 3))
    y = g.op.Reshape(x, [3, 2])
    assert g.get_constant(g.nodes[0].input[1]).dtype == np.int64
    z = g.op.Add(y, np.ones((2,), dtype=np.float32))
    assert g.get_shape(z) == (3, 2)


def test_constants_are_shared_by_value_and_dtype():
    g = GraphBuilder()
    a = g.make_constant(np.array([1, 2], dtype=np.int64))
    b = g.make_constant(np.array([1, 2], dtype=np.int64))
    c = g.make_constant(np.array([1, 2], dtype=np.int32))
    assert a == b and a != c
    assert g.get_type(a) == I64 and g.get_type(c) == TensorProto.INT32
    assert g.get_shape(a) == (2,)


def test_several_outputs_and_attributes():
    g = GraphBuilder()
    x = g.make_tensor_input("x", F, ("n", 6))
    a, b = g.op.Split(x, np.array([2, 4], dtype=np.int64), axis=1, outputs=2)
    assert g.get_shape(a) == ("n", 2) and g.get_shape(b) == ("n", 4)
    g.make_tensor_output(a, output_name="a")
    g.make_tensor_output(b, output_name="b")
    feed = np.arange(12, dtype=np.float32).reshape(2, 6)
    got = _run(g.to_onnx(), {"x": feed})
    np.testing.assert_array_equal(got[0], feed[:, :2])
    np.testing.assert_array_equal(got[1], feed[:, 2:])


def test_unknown_input_and_duplicated_input_raise():
    g = GraphBuilder()
    g.make_tensor_input("x", F, (2,))
    with pytest.raises(GraphBuilderError):
        g.op.Relu("missing")
    with pytest.raises(GraphBuilderError):
        g.make_tensor_input("x", F, (2,))


def test_unique_names():
    g = GraphBuilder()
    names = [g.unique_name("a") for _ in range(5)]
    assert len(set(names)) == 5 and names[0] == "a"
    x = g.make_tensor_input("x", F, (2,))
    outs = [g.op.Relu(x) for _ in range(4)]
    assert len(set(outs)) == 4
    node_names = [n.name for n in g.nodes]
    assert len(set(node_names)) == len(node_names)
    # an explicit output name already taken gets a suffix
    y = g.make_node("Neg", [x], [outs[0]])
    assert y != outs[0]


def test_custom_domain_registers_opset():
    g = GraphBuilder()
    x = g.make_tensor_input("x", F, (2,))
    g.op.Gelu(x, domain="com.microsoft")
    assert g.opsets["com.microsoft"] == 1


# shape rules


def _builder(*inputs):
    g = GraphBuilder()
    names = [g.make_tensor_input(f"i{k}", t, s) for k, (t, s) in enumerate(inputs)]
    return g, names


@pytest.mark.parametrize(
    "shape,target,expected",
    [
        ((2, 3, 4), [6, -1], (6, 4)),
        ((2, 3, 4), [0, -1], (2, 12)),
        (("b", 3, 4), [0, 12], ("b", 12)),
        (("b", 3, 4), [0, 3, 2, 2], ("b", 3, 2, 2)),
        (("b", 3, 4), [-1, 4], (None, 4)),
    ],
)
def test_rule_reshape(shape, target, expected):
    g, (x,) = _builder((F, shape))
    assert g.get_shape(g.op.Reshape(x, np.array(target, dtype=np.int64))) == expected


def test_rule_reshape_dynamic_target_gives_rank():
    g, (x, s) = _builder((F, ("b", 4)), (I64, (3,)))
    y = g.op.Reshape(x, s)
    assert g.get_shape(y) is None and g.get_rank(y) == 3 and g.get_type(y) == F


@pytest.mark.parametrize(
    "shape,perm,expected",
    [
        ((2, 3, 4), [2, 0, 1], (4, 2, 3)),
        (("a", "b", 4), [1, 2, 0], ("b", 4, "a")),
        (("a", 3), None, (3, "a")),
    ],
)
def test_rule_transpose(shape, perm, expected):
    g, (x,) = _builder((F16, shape))
    y = g.op.Transpose(x, perm=perm)
    assert g.get_shape(y) == expected and g.get_type(y) == F16


@pytest.mark.parametrize(
    "shapes,axis,expected",
    [
        (((2, 3), (2, 5)), 1, (2, 8)),
        ((("a", 3), ("a", 5)), -1, ("a", 8)),
        ((("a", 3), ("b", 3)), 0, (None, 3)),
    ],
)
def test_rule_concat(shapes, axis, expected):
    g, names = _builder(*[(I64, s) for s in shapes])
    y = g.op.Concat(*names, axis=axis)
    assert g.get_shape(y) == expected and g.get_type(y) == I64


@pytest.mark.parametrize(
    "data,idx,axis,expected",
    [
        (("n", 4), (2, 3), 0, (2, 3, 4)),
        (("n", 4, "m"), (), 1, ("n", "m")),
        ((5, 4), (7,), -1, (5, 7)),
    ],
)
def test_rule_gather(data, idx, axis, expected):
    g, (x, i) = _builder((F, data), (I64, idx))
    y = g.op.Gather(x, i, axis=axis)
    assert g.get_shape(y) == expected and g.get_type(y) == F


@pytest.mark.parametrize(
    "a,b,expected",
    [
        ((2, 3), (3, 4), (2, 4)),
        (("b", 1, 3, 4), (5, 4, 6), ("b", 5, 3, 6)),
        (("b", "s", 8), (8, 16), ("b", "s", 16)),
        ((3,), (3, 4), (4,)),
        (("n", 3), (3,), ("n",)),
        ((3,), (3,), ()),
    ],
)
def test_rule_matmul(a, b, expected):
    g, (x, y) = _builder((F, a), (F, b))
    assert g.get_shape(g.op.MatMul(x, y)) == expected


@pytest.mark.parametrize(
    "shape,axes,expected",
    [
        (("a", 3), [0], (1, "a", 3)),
        (("a", 3), [-1], ("a", 3, 1)),
        (("a", 3), [0, 3], (1, "a", 3, 1)),
        ((), [0], (1,)),
    ],
)
def test_rule_unsqueeze(shape, axes, expected):
    g, (x,) = _builder((F, shape))
    assert g.get_shape(g.op.Unsqueeze(x, np.array(axes, dtype=np.int64))) == expected


@pytest.mark.parametrize(
    "shape,axes,expected",
    [
        ((1, "a", 1, 3), [0, 2], ("a", 3)),
        ((1, "a", 1, 3), [-2], (1, "a", 3)),
        ((1, 4, 1), None, (4,)),
    ],
)
def test_rule_squeeze(shape, axes, expected):
    g, (x,) = _builder((F, shape))
    y = g.op.Squeeze(x) if axes is None else g.op.Squeeze(x, np.array(axes, dtype=np.int64))
    assert g.get_shape(y) == expected


@pytest.mark.parametrize(
    "shape,starts,ends,axes,steps,expected",
    [
        ((10, 4), [2], [7], [0], None, (5, 4)),
        ((10, 4), [0, 1], [-1, 100], [0, 1], [2, 1], (5, 3)),
        (("n", 4), [1], [3], [1], None, ("n", 2)),
        (("n", 4), [1], [3], [0], None, (None, 4)),
        ((10,), [-1], [-100], [0], [-3], (4,)),
    ],
)
def test_rule_slice(shape, starts, ends, axes, steps, expected):
    g, (x,) = _builder((F, shape))
    args = [np.array(v, dtype=np.int64) for v in (starts, ends, axes)]
    if steps is not None:
        args.append(np.array(steps, dtype=np.int64))
    y = g.op.Slice(x, *args)
    assert g.get_shape(y) == expected
    if all(isinstance(d, int) for d in shape):
        g.make_tensor_output(y, output_name="y")
        feed = np.random.rand(*shape).astype(np.float32)
        (got,) = _run(g.to_onnx(optimize=False), {"i0": feed})
        assert got.shape == expected


@pytest.mark.parametrize(
    "shape,target,expected",
    [
        ((1, 3), [4, 3], (4, 3)),
        ((1, "n"), [4, 1], (4, "n")),
        (("n", 1), [2, 1, 5], (2, "n", 5)),
    ],
)
def test_rule_expand(shape, target, expected):
    g, (x,) = _builder((F, shape))
    assert g.get_shape(g.op.Expand(x, np.array(target, dtype=np.int64))) == expected


def test_rules_dtype_changes():
    g, (x,) = _builder((F16, ("n", 3)))
    assert g.get_type(g.op.Cast(x, to=I64)) == I64
    assert g.get_type(g.op.Equal(x, 0.0)) == B
    s = g.op.Shape(x)
    assert g.get_type(s) == I64 and g.get_shape(s) == (2,)
    assert g.get_shape(g.op.Shape(x, start=1)) == (1,)
    r = g.op.ReduceSum(x, np.array([1], dtype=np.int64), keepdims=0)
    assert g.get_shape(r) == ("n",) and g.get_type(r) == F16
    a = g.op.ArgMax(x, axis=0, keepdims=1)
    assert g.get_shape(a) == (1, 3) and g.get_type(a) == I64


# serialization


def test_to_onnx_defaults_and_checker():
    g = GraphBuilder()
    assert g.main_opset == DEFAULT_OPSET == 20
    x = g.make_tensor_input("x", F, ("batch", 4))
    y = g.op.Relu(g.op.Add(x, np.ones((4,), dtype=np.float32)))
    g.make_tensor_output(y, output_name="y")
    model = g.to_onnx()
    onnx.checker.check_model(model, full_check=True)
    assert model.ir_version <= 13
    assert {o.domain: o.version for o in model.opset_import}[""] == 20
    assert _dims(model.graph.input[0]) == ["batch", 4]
    assert _dims(model.graph.output[0]) == ["batch", 4]
    assert model.graph.output[0].name == "y"
    feed = np.random.randn(3, 4).astype(np.float32)
    (got,) = _run(model, {"x": feed})
    np.testing.assert_allclose(got, np.maximum(feed + 1, 0), rtol=1e-6)


@pytest.mark.parametrize("opset", [17, 20])
def test_other_opset(opset):
    g = GraphBuilder(opset)
    x = g.make_tensor_input("x", F, (2,))
    g.make_tensor_output(g.op.Neg(x), output_name="y")
    model = g.to_onnx()
    onnx.checker.check_model(model, full_check=True)
    assert {o.domain: o.version for o in model.opset_import}[""] == opset
    assert model.ir_version <= 13


def test_output_is_an_input():
    g = GraphBuilder()
    x = g.make_tensor_input("x", F, ("n",))
    g.make_tensor_output(x, output_name="y")
    g.make_tensor_output(g.op.Neg(x), output_name="z")
    model = g.to_onnx()
    assert [o.name for o in model.graph.output] == ["y", "z"]
    feed = np.array([1, -2], dtype=np.float32)
    y, z = _run(model, {"x": feed})
    np.testing.assert_array_equal(y, feed)
    np.testing.assert_array_equal(z, -feed)


def test_output_is_an_input_without_new_name():
    g = GraphBuilder()
    x = g.make_tensor_input("x", F, (2,))
    out = g.make_tensor_output(x)
    assert out != x
    feed = np.array([1, -2], dtype=np.float32)
    (got,) = _run(g.to_onnx(), {"x": feed})
    np.testing.assert_array_equal(got, feed)


def test_output_is_an_initializer_and_used_twice():
    g = GraphBuilder()
    x = g.make_tensor_input("x", F, (2,))
    w = g.make_initializer("w", np.array([3, 4], dtype=np.float32))
    y = g.op.Mul(x, w)
    g.make_tensor_output(w, output_name="w_out")
    g.make_tensor_output(y, output_name="y")
    g.make_tensor_output(y, output_name="y2")
    model = g.to_onnx()
    assert [o.name for o in model.graph.output] == ["w_out", "y", "y2"]
    feed = np.array([1, 2], dtype=np.float32)
    w_out, y1, y2 = _run(model, {"x": feed})
    np.testing.assert_array_equal(w_out, [3, 4])
    np.testing.assert_array_equal(y1, [3, 8])
    np.testing.assert_array_equal(y2, [3, 8])


def test_to_onnx_does_not_optimize():
    g = GraphBuilder()
    x = g.make_tensor_input("x", F, (2,))
    g.make_tensor_output(g.op.Identity(g.op.Relu(x)), output_name="y")
    ops = [n.op_type for n in g.to_onnx().graph.node]
    assert ops[0] == "Relu" and ops.count("Identity") >= 1  # nothing removed
    with pytest.raises(GraphBuilderError, match="optimize_builder"):
        g.to_onnx(optimize=True)


def test_small_constants_are_not_weights():
    import numpy as np
    from onnx import TensorProto

    from experimental_experiment.xbuilder import GraphBuilder

    g = GraphBuilder(18)
    x = g.make_tensor_input("x", TensorProto.FLOAT, (2, 3))
    w = g.make_initializer("weight", np.ones((3,), dtype=np.float32))
    one = g.make_constant(np.array(1.0, dtype=np.float32))
    big = g.make_constant(np.zeros((17,), dtype=np.float32))
    g.make_tensor_output(g.op.Add(g.op.Mul(x, w), one), output_name="y")
    assert g.small_constants() == {one}
    assert big in g.small_constants(max_size=17) and w not in g.small_constants(100)
