"""The converter registry passes a converter its node context only when it declares
the keyword-only parameter ``ctx``, read from the signature once."""

import functools

import numpy as np
import pytest
import torch

from experimental_experiment.runtime import run_onnx
from experimental_experiment.torch_interpreter import Dispatcher
from experimental_experiment.torch_interpreter.convert.registry import (
    COMPLEX,
    DEFAULT_REGISTRY,
    call_converter,
    find_converter,
    takes_context,
)

aten = torch.ops.aten


def _plain(g, x, y=1):
    return ("plain", x, y)


def _with_ctx(g, x, y=1, *, ctx):
    return ("ctx", x, y, ctx)


def _kwargs_only(g, x, **kwargs):
    return ("kwargs", x, kwargs)


def _positional_ctx(g, ctx):  # a schema argument called ctx, not the context
    return ("positional", ctx)


def test_takes_context():
    assert takes_context(_with_ctx)
    assert takes_context(functools.partial(_with_ctx, y=2))
    assert not takes_context(_plain)
    assert not takes_context(_kwargs_only)  # **kwargs does not ask for the context
    assert not takes_context(_positional_ctx)
    assert not takes_context(len)  # a builtin without a signature


def test_call_converter():
    ctx = object()
    assert call_converter(_with_ctx, "g", ("x",), {"y": 3}, ctx) == ("ctx", "x", 3, ctx)
    assert call_converter(_plain, "g", ("x",), {"y": 3}, ctx) == ("plain", "x", 3)
    assert call_converter(_kwargs_only, "g", ("x",), {"a": 1}, ctx) == ("kwargs", "x", {"a": 1})
    assert call_converter(_positional_ctx, "g", ("v",), {}, ctx) == ("positional", "v")


def test_builtin_converters_declare_ctx_when_they_need_it():
    # relu needs nothing, zeros_like needs the output dtype
    assert not takes_context(find_converter(aten.relu.default, 18))
    assert takes_context(find_converter(aten.zeros_like.default, 18))


# the registry object: the user's converters layered on top, complex variants


def _graph(model, args, dynamic_shapes=None):
    ep = torch.export.export(model, args, dynamic_shapes=dynamic_shapes)
    return ep.run_decompositions({}).graph_module


def _convert(gm, registry):
    from experimental_experiment.torch_interpreter.convert.interpreter import Interpreter
    from experimental_experiment.torch_interpreter.stages import InputPlan
    from experimental_experiment.xbuilder import GraphBuilder

    g = GraphBuilder(18)
    interp = Interpreter(g, gm, InputPlan(), registry=registry)
    interp.run(["out"])
    return g.to_onnx(), interp


class _Counting(Dispatcher):
    """A Dispatcher counting how many times the interpreter asks it."""

    calls = 0

    def find(self, op):
        type(self).calls += 1
        return super().find(op)


class _NegComplex(torch.nn.Module):
    def forward(self, z):
        return -z


def _neg_as_mul(g, x):
    return g.op.Mul(x, g.make_constant(np.array(-1, dtype=np.float32)))


def test_layered_registry_user_converter_wins_one_lookup_per_node():
    gm = _graph(_NegComplex(), (torch.randn(3, 4, dtype=torch.complex64),))
    n_nodes = sum(n.op == "call_function" for n in gm.graph.nodes)
    user = _Counting({aten.neg.default: _neg_as_mul})
    _Counting.calls = 0
    registry = DEFAULT_REGISTRY.layered(user)
    onx, interp = _convert(gm, registry)
    # the user's converter, asked once per node, replaced the complex variant (Neg)
    assert _Counting.calls == n_nodes, (_Counting.calls, n_nodes)
    assert [n.op_type for n in onx.graph.node if n.op_type != "Identity"] == ["Mul"]
    assert any("_neg_as_mul" in fn for _, fn in interp.converters_used), interp.converters_used
    # the built-in registry was not changed by the layer
    assert DEFAULT_REGISTRY.find(aten.neg.default, 18, COMPLEX) is not _neg_as_mul
    z = torch.randn(3, 4, dtype=torch.complex64)
    (got,) = run_onnx(onx, [torch.view_as_real(z)])
    np.testing.assert_allclose(got, torch.view_as_real(-z).numpy())


def test_layered_registry_falls_back_to_the_builtin_one():
    registry = DEFAULT_REGISTRY.layered(Dispatcher({aten.neg.default: _neg_as_mul}))
    assert registry.find(aten.relu.default, 18) is DEFAULT_REGISTRY.find(aten.relu.default, 18)
    assert registry.find(aten.neg.default, 18) is _neg_as_mul
    missing = registry.lookup(aten._cudnn_rnn.default, 18)
    assert not missing and "no converter is registered" in missing.reason
    assert DEFAULT_REGISTRY.layered(None) is DEFAULT_REGISTRY


def _complex_reciprocal(g, z):
    """1 / z = conj(z) / |z|^2 on real pairs."""
    sign = g.make_constant(np.array([1, -1], dtype=np.float32))
    norm2 = g.op.ReduceSum(g.op.Mul(z, z), np.array([-1], dtype=np.int64), keepdims=1)
    return g.op.Div(g.op.Mul(z, sign), norm2)


class _Reciprocal(torch.nn.Module):
    def forward(self, z):
        return torch.reciprocal(z)


def test_complex_variant_found_by_the_registry():
    registry = DEFAULT_REGISTRY.copy()
    registry.register(aten.reciprocal.default, _complex_reciprocal, variant=COMPLEX)
    gm = _graph(
        _Reciprocal(),
        (torch.randn(3, 4, dtype=torch.complex64),),
        dynamic_shapes=({0: torch.export.Dim("n")},),
    )
    node = next(n for n in gm.graph.nodes if n.target is aten.reciprocal.default)
    # the node reads a complex tensor: the complex variant, not the real converter
    assert registry.lookup_node(node, 18).converter is _complex_reciprocal
    assert registry.find(aten.reciprocal.default, 18) is not _complex_reciprocal
    assert "for complex tensors" in DEFAULT_REGISTRY.lookup_node(node, 18).reason
    onx, _ = _convert(gm, registry)
    for n in (3, 6):
        z = torch.randn(n, 4, dtype=torch.complex64)
        (got,) = run_onnx(onx, [torch.view_as_real(z)])
        expected = torch.view_as_real(torch.reciprocal(z)).numpy()
        np.testing.assert_allclose(got, expected, rtol=1e-4, atol=1e-5)


def test_builtin_complex_variant_is_registered_like_an_overload():
    assert DEFAULT_REGISTRY.find(aten.mul.Tensor, 18, COMPLEX).__name__ == "aten_complex_mul"
    assert DEFAULT_REGISTRY.find(aten.mul.Tensor, 18).__name__ != "aten_complex_mul"
    # a converter written for real pairs is registered for both variants
    fft = DEFAULT_REGISTRY.find(aten._fft_r2c.default, 18)
    assert fft is DEFAULT_REGISTRY.find(aten._fft_r2c.default, 18, COMPLEX)


def test_registry_tables_are_read_only():
    with pytest.raises(TypeError):
        DEFAULT_REGISTRY.entries[(aten.relu.default, "")] = ()  # type: ignore[index]
