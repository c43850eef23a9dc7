"""Fusions: LayerNormalization, RMSNormalization (opset 23), Softmax, Gelu (opset 20)."""

import math

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
I64 = np.int64


def _x(*shapes):
    return [{"x": np.random.randn(*s).astype(np.float32)} for s in shapes]


def _layer_norm_nodes(axes="ax", eps="eps", bias=True):
    nodes = [
        helper.make_node("ReduceMean", ["x", axes], ["m"]),
        helper.make_node("Sub", ["x", "m"], ["d"]),
        helper.make_node("Pow", ["d", "two"], ["p"]),
        helper.make_node("ReduceMean", ["p", axes], ["v"]),
        helper.make_node("Add", ["v", eps], ["ve"]),
        helper.make_node("Sqrt", ["ve"], ["s"]),
        helper.make_node("Div", ["d", "s"], ["n"]),
        helper.make_node("Mul", ["w", "n"], ["nw" if bias else "y"]),
    ]
    if bias:
        nodes.append(helper.make_node("Add", ["nw", "b"], ["y"]))
    return nodes


def _ln_inits(last=8, axes=(-1,), scale_shape=None):
    return {
        "ax": np.array(axes, I64),
        "eps": np.array([1e-5], np.float32),
        "two": np.array(2.0, np.float32),
        "w": np.random.randn(*(scale_shape or (last,))).astype(np.float32),
        "b": np.random.randn(last).astype(np.float32),
    }


@pytest.mark.parametrize("bias", [True, False])
def test_layer_norm_fused(bias):
    model = make_model(
        _layer_norm_nodes(bias=bias),
        [("x", F, ("b", "s", 8))],
        [("y", F, ("b", "s", 8))],
        _ln_inits(),
    )
    opt, report = check_pattern(model, _x((2, 3, 8), (1, 5, 8)), atol=1e-4, rtol=1e-4)
    assert op_types(opt) == ["LayerNormalization"]
    ln = opt.graph.node[0]
    assert len(ln.input) == (3 if bias else 2)
    assert applied(report, "DecomposedLayerNormToLayerNorm") == 1


def test_layer_norm_not_last_axis_kept():
    model = make_model(
        _layer_norm_nodes(), [("x", F, ("b", 8, 8))], [("y", F, None)], _ln_inits(axes=(1,))
    )
    opt, report = check_pattern(model, _x((2, 8, 8), (3, 8, 8)), atol=1e-4)
    assert "LayerNormalization" not in op_types(opt)
    assert refused(report, "DecomposedLayerNormToLayerNorm")


def test_layer_norm_broadcasting_scale_kept():
    # the scale has more dims than the normalized shape: the output shape changes
    model = make_model(
        _layer_norm_nodes(bias=False),
        [("x", F, ("b", 8))],
        [("y", F, None)],
        _ln_inits(scale_shape=(3, 1, 8)),
    )
    opt, report = check_pattern(model, _x((2, 8), (4, 8)), atol=1e-4)
    assert "LayerNormalization" not in op_types(opt)


def test_layer_norm_intermediate_used_twice_kept():
    nodes = _layer_norm_nodes() + [helper.make_node("Neg", ["v"], ["z"])]
    model = make_model(nodes, [("x", F, ("b", 8))], [("y", F, None), ("z", F, None)], _ln_inits())
    opt, report = check_pattern(model, _x((2, 8), (4, 8)), atol=1e-4)
    assert "LayerNormalization" not in op_types(opt)
    assert any("used outside" in r for r in refused(report, "DecomposedLayerNormToLayerNorm"))


def _rms_nodes(square="Pow", reciprocal=True, scale=True):
    nodes = (
        [helper.make_node("Pow", ["x", "two"], ["p"])]
        if square == "Pow"
        else [helper.make_node("Mul", ["x", "x"], ["p"])]
    )
    nodes += [
        helper.make_node("ReduceMean", ["p", "ax"], ["v"]),
        helper.make_node("Add", ["eps", "v"], ["ve"]),
        helper.make_node("Sqrt", ["ve"], ["s"]),
    ]
    if reciprocal:
        nodes += [
            helper.make_node("Reciprocal", ["s"], ["r"]),
            helper.make_node("Mul", ["r", "x"], ["n"]),
        ]
    else:
        nodes.append(helper.make_node("Div", ["x", "s"], ["n"]))
    nodes.append(helper.make_node("Mul", ["n", "w"], ["y"]))
    return nodes


@pytest.mark.parametrize("square, reciprocal", [("Pow", True), ("Mul", False)])
def test_rms_norm_fused_at_opset_23(square, reciprocal):
    model = make_model(
        _rms_nodes(square, reciprocal),
        [("x", F, ("b", "s", 8))],
        [("y", F, ("b", "s", 8))],
        _ln_inits(),
        opset=23,
    )
    opt, report = check_pattern(model, _x((2, 3, 8), (1, 5, 8)), atol=1e-4, rtol=1e-4)
    assert op_types(opt) == ["RMSNormalization"]
    assert applied(report, "DecomposedRMSNormToRMSNorm") == 1


def test_rms_norm_left_alone_before_opset_23():
    model = make_model(
        _rms_nodes(), [("x", F, ("b", 8))], [("y", F, ("b", 8))], _ln_inits(), opset=18
    )
    opt, _ = check_pattern(model, _x((2, 8), (4, 8)), atol=1e-4)
    assert "RMSNormalization" not in op_types(opt) and len(opt.graph.node) == 7


def _softmax_nodes(sub_max):
    nodes = []
    src = "x"
    if sub_max:
        nodes += [
            helper.make_node("ReduceMax", ["x", "ax"], ["mx"]),
            helper.make_node("Sub", ["x", "mx"], ["xs"]),
        ]
        src = "xs"
    return nodes + [
        helper.make_node("Exp", [src], ["e"]),
        helper.make_node("ReduceSum", ["e", "ax"], ["se"]),
        helper.make_node("Div", ["e", "se"], ["y"]),
    ]


@pytest.mark.parametrize("sub_max", [False, True])
def test_softmax_fused(sub_max):
    model = make_model(
        _softmax_nodes(sub_max),
        [("x", F, ("b", "s", 6))],
        [("y", F, ("b", "s", 6))],
        {"ax": np.array([-1], I64)},
    )
    opt, report = check_pattern(model, _x((2, 3, 6), (1, 4, 6)), atol=1e-6)
    assert op_types(opt) == ["Softmax"]
    assert applied(report, "ExpSumDivToSoftmax") == 1
    assert applied(report, "SoftmaxSubMaxToSoftmax") == int(sub_max)


def test_softmax_two_axes_kept():
    model = make_model(
        _softmax_nodes(False),
        [("x", F, ("b", 3, 6))],
        [("y", F, None)],
        {"ax": np.array([1, 2], I64)},
    )
    opt, report = check_pattern(model, _x((2, 3, 6), (1, 3, 6)), atol=1e-6)
    assert "Softmax" not in op_types(opt)
    assert refused(report, "ExpSumDivToSoftmax")


def test_softmax_max_on_other_axis_kept():
    nodes = [
        helper.make_node("ReduceMax", ["x", "a0"], ["mx"]),
        helper.make_node("Sub", ["x", "mx"], ["xs"]),
        helper.make_node("Softmax", ["xs"], ["y"], axis=-1),
    ]
    model = make_model(nodes, [("x", F, ("b", 6))], [("y", F, None)], {"a0": np.array([0], I64)})
    opt, _ = check_pattern(model, _x((2, 6), (3, 6)), atol=1e-6)
    assert op_types(opt) == ["ReduceMax", "Sub", "Softmax"]


def _gelu_erf_nodes(div):
    inner = (
        helper.make_node("Div", ["x", "sq2"], ["a"])
        if div
        else helper.make_node("Mul", ["isq2", "x"], ["a"])
    )
    return [
        inner,
        helper.make_node("Erf", ["a"], ["e"]),
        helper.make_node("Add", ["one", "e"], ["e1"]),
        helper.make_node("Mul", ["x", "e1"], ["xe"]),
        helper.make_node("Mul", ["xe", "half"], ["y"]),
    ]


_GELU_INITS = {
    "sq2": np.array(math.sqrt(2), np.float32),
    "isq2": np.array(math.sqrt(0.5), np.float32),
    "one": np.array(1.0, np.float32),
    "half": np.array(0.5, np.float32),
    "c1": np.array(0.044715, np.float32),
    "three": np.array(3.0, np.float32),
    "c2": np.array(math.sqrt(2 / math.pi), np.float32),
}


@pytest.mark.parametrize("div", [True, False])
def test_gelu_erf_fused_at_opset_20(div):
    model = make_model(
        _gelu_erf_nodes(div), [("x", F, ("b", 5))], [("y", F, ("b", 5))], _GELU_INITS, opset=20
    )
    opt, report = check_pattern(model, _x((2, 5), (4, 5)), atol=1e-5)
    assert op_types(opt) == ["Gelu"]
    assert applied(report, "GeluErfToGelu") == 1


def test_gelu_left_alone_before_opset_20():
    model = make_model(
        _gelu_erf_nodes(True), [("x", F, ("b", 5))], [("y", F, ("b", 5))], _GELU_INITS, opset=18
    )
    opt, _ = check_pattern(model, _x((2, 5), (4, 5)))
    assert "Gelu" not in op_types(opt)


def test_gelu_wrong_constant_kept():
    inits = dict(_GELU_INITS, half=np.array(0.6, np.float32))
    model = make_model(
        _gelu_erf_nodes(True), [("x", F, ("b", 5))], [("y", F, ("b", 5))], inits, opset=20
    )
    opt, _ = check_pattern(model, _x((2, 5), (4, 5)))
    assert "Gelu" not in op_types(opt)


@pytest.mark.parametrize("cube", ["Pow", "Mul"])
def test_gelu_tanh_fused(cube):
    if cube == "Pow":
        c = [helper.make_node("Pow", ["x", "three"], ["x3"])]
    else:
        c = [
            helper.make_node("Mul", ["x", "x"], ["x2"]),
            helper.make_node("Mul", ["x2", "x"], ["x3"]),
        ]
    nodes = c + [
        helper.make_node("Mul", ["x3", "c1"], ["x3c"]),
        helper.make_node("Add", ["x", "x3c"], ["s"]),
        helper.make_node("Mul", ["s", "c2"], ["t0"]),
        helper.make_node("Tanh", ["t0"], ["t"]),
        helper.make_node("Add", ["t", "one"], ["t1"]),
        helper.make_node("Mul", ["x", "half"], ["xh"]),
        helper.make_node("Mul", ["xh", "t1"], ["y"]),
    ]
    model = make_model(nodes, [("x", F, ("b", 5))], [("y", F, ("b", 5))], _GELU_INITS, opset=20)
    opt, report = check_pattern(model, _x((2, 5), (4, 5)), atol=1e-5)
    assert op_types(opt) == ["Gelu"]
    assert applied(report, "GeluTanhToGelu") == 1


def test_rms_norm_double_kept():
    # RMSNormalization computes in float32 at best: double keeps its decomposed form
    inits = {
        k: (v.astype(np.float64) if v.dtype == np.float32 else v) for k, v in _ln_inits().items()
    }
    model = make_model(
        _rms_nodes(), [("x", T.DOUBLE, ("b", 8))], [("y", T.DOUBLE, None)], inits, opset=23
    )
    feeds = [{"x": np.random.randn(n, 8)} for n in (2, 3)]
    opt, report = check_pattern(model, feeds)
    assert "RMSNormalization" not in op_types(opt)
    assert refused(report, "DecomposedRMSNormToRMSNorm")


def test_layer_norm_add_broadcasting_bias_kept():
    nodes = [
        helper.make_node("LayerNormalization", ["x", "w"], ["n"], axis=-1),
        helper.make_node("Add", ["n", "b2"], ["y"]),
    ]
    model = make_model(
        nodes,
        [("x", F, ("b", 8))],
        [("y", F, None)],
        {"w": np.ones(8, np.float32), "b2": np.ones((3, 1, 8), np.float32)},
    )
    opt, report = check_pattern(model, _x((2, 8), (4, 8)))
    assert op_types(opt) == ["LayerNormalization", "Add"]
    assert refused(report, "LayerNormAddToLayerNorm")


def test_rms_norm_without_scale_fused_at_opset_23():
    nodes = _rms_nodes()[:-1] + [helper.make_node("Neg", ["n"], ["y"])]
    model = make_model(nodes, [("x", F, ("b", 8))], [("y", F, ("b", 8))], _ln_inits(), opset=23)
    opt, report = check_pattern(model, _x((2, 8), (4, 8)), atol=1e-5)
    assert op_types(opt) == ["RMSNormalization", "Neg"]


def test_rms_norm_without_scale_dynamic_last_dim_kept():
    nodes = _rms_nodes()[:-1] + [helper.make_node("Neg", ["n"], ["y"])]
    model = make_model(nodes, [("x", F, ("b", "d"))], [("y", F, ("b", "d"))], _ln_inits(), opset=23)
    opt, report = check_pattern(model, _x((2, 8), (4, 5)), atol=1e-5)
    assert "RMSNormalization" not in op_types(opt)
    assert any("not static" in r for r in refused(report, "DecomposedRMSNormToRMSNorm"))
