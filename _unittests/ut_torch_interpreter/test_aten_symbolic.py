"""Symbolic scalars (SymInt, SymFloat, SymBool): sizes, python arithmetic on them, and
the runtime assertions torch.export leaves in the graph."""

import math
import operator
from types import SimpleNamespace

import numpy as np
import onnx
import pytest
import torch
from onnx import TensorProto

from experimental_experiment.ext_test_case import OpModule, check_export, run_onnx
from experimental_experiment.torch_interpreter import Dispatcher, to_onnx
from experimental_experiment.torch_interpreter.convert.registry import (
    call_converter,
    find_converter,
)
from experimental_experiment.xbuilder import GraphBuilder

DS2 = ({0: "batch", 1: "n"},)


def _sets(*shapes):
    return [(torch.randn(*s),) for s in shapes]


def _expr(x):
    n, m = x.shape
    return x.reshape(-1)[: (n * m) % 7 + (-n) + n * 2 - max(1, n // 2) + min(n, m)]


MODELS = {
    "add_size": lambda x: x + x.shape[0],
    "sym_size_last": lambda x: x * x.shape[-1],
    "mul_sizes": lambda x: x * (x.shape[0] * x.shape[1]),
    "sub_size": lambda x: x[: x.shape[0] - 1],
    "truediv": lambda x: x * (x.shape[0] / 3),
    "floordiv_mod": lambda x: x[: x.shape[0] // 2 + x.shape[1] % 3],
    "expr": _expr,
    "ceil": lambda x: x[: math.ceil(x.shape[0] / 3)],
    "floor": lambda x: x[: math.floor(x.shape[0] / 3)] + torch.sym_float(x.shape[1]),
    "trunc": lambda x: x[: torch.sym_int(x.shape[0] * 1.5)],
    "sym_float": lambda x: x + torch.sym_float(x.shape[0]) * 2.5,
    "numel": lambda x: x + x.numel(),
    "sym_max_min": lambda x: x[: max(x.shape[0] // 2, 2), : min(x.shape[0], x.shape[1])],
    "sym_sum": lambda x: x.reshape(-1)[: torch.sym_sum([x.shape[0], x.shape[1], 2])],
    # the first shape takes one branch, the second one the other
    "sym_ite": lambda x: x[:, : torch.sym_ite(x.shape[0] > 5, x.shape[0] - 3, x.shape[1])],
    "sym_sqrt": lambda x: x * torch.sym_sqrt(x.shape[0]),
}


@pytest.mark.parametrize("name", sorted(MODELS))
def test_symbolic_in_graph(name):
    check_export(OpModule(MODELS[name]), _sets((4, 6), (7, 5)), dynamic_shapes=DS2)


def test_symbolic_float16_input():
    # a SymInt/SymFloat added to a float16 tensor keeps float16
    fn = lambda x: x * (x.shape[0] / 4) + x.shape[1]  # noqa: E731
    check_export(
        OpModule(fn),
        [(torch.randn(4, 6).half(),), (torch.randn(7, 5).half(),)],
        dynamic_shapes=DS2,
        atol=1e-2,
    )


def test_symint_input():
    class M(torch.nn.Module):
        def forward(self, x, n: int):
            return x[:n] * n

    x = torch.randn(5, 3)
    onx = to_onnx(M(), (x, 3), dynamic_shapes=({0: "batch"}, torch.export.Dim.DYNAMIC))
    assert onx.graph.input[1].type.tensor_type.elem_type == TensorProto.INT64
    for xi, n in [(x, 3), (torch.randn(8, 3), 6)]:
        (got,) = run_onnx(onx, [xi, torch.tensor(n)])
        np.testing.assert_allclose(got, (xi[:n] * n).numpy(), rtol=1e-6)


def test_unbacked_with_assertions():
    # item() gives an unbacked SymInt: torch._check becomes comparisons feeding
    # _assert_scalar, dropped from the ONNX graph
    class M(torch.nn.Module):
        def forward(self, x, t):
            n = t.item()
            torch._check(n >= 0)
            torch._check(n <= x.shape[0])
            return x[:n] * 2

    def item(g, t):
        return g.op.Reshape(t, np.array([], dtype=np.int64))

    dispatcher = Dispatcher({torch.ops.aten.item.default: item})
    x = torch.randn(5, 3)
    onx = to_onnx(
        M(), (x, torch.tensor(2)), dynamic_shapes=({0: "batch"}, None), dispatcher=dispatcher
    )
    for xi, n in [(x, 2), (torch.randn(8, 3), 7)]:
        (got,) = run_onnx(onx, [xi, torch.tensor(n)])
        np.testing.assert_allclose(got, (xi[:n] * 2).numpy(), rtol=1e-6)


def test_sym_size_is_int64_scalar():
    onx = to_onnx(
        OpModule(lambda x: x.view(x.shape[0] * 2, -1)),
        (torch.randn(4, 6),),
        dynamic_shapes=DS2,
        optimize=False,
    )
    ops = [n.op_type for n in onx.graph.node]
    assert ops[:2] == ["Shape", "Gather"], ops
    check_export(
        OpModule(lambda x: x.view(x.shape[0] * 2, -1)), _sets((4, 6), (3, 8)), dynamic_shapes=DS2
    )


def test_symbolic_outputs():
    # SymInt and SymBool outputs become int64 and bool 0-D outputs
    fn = lambda x: (x * 2, x.shape[0] * 2, x.numel(), x.shape[0] // 3 > 0)  # noqa: E731
    onx = to_onnx(OpModule(fn), (torch.randn(4, 3),), dynamic_shapes=({0: "batch"},))
    types = [o.type.tensor_type.elem_type for o in onx.graph.output]
    assert types == [TensorProto.FLOAT, TensorProto.INT64, TensorProto.INT64, TensorProto.BOOL]
    for n in (7, 2):
        got = run_onnx(onx, [torch.randn(n, 3)])[1:]
        assert [g.item() for g in got] == [n * 2, n * 3, n // 3 > 0]


# each converter alone, on int64 / float32 scalars, against python's operators
def _run_converter(op, values):
    g = GraphBuilder(18)
    names = []
    for i, v in enumerate(values):
        t = (
            TensorProto.FLOAT
            if isinstance(v, float)
            else (TensorProto.BOOL if isinstance(v, bool) else TensorProto.INT64)
        )
        names.append(g.make_tensor_input(f"a{i}", t, ()))
    expected = op(*values)
    torch_dtype = {bool: torch.bool, int: torch.int64, float: torch.float32}[type(expected)]
    ctx = SimpleNamespace(
        node=SimpleNamespace(target=op),
        dtype=lambda i=0: {
            torch.bool: TensorProto.BOOL,
            torch.int64: TensorProto.INT64,
            torch.float32: TensorProto.FLOAT,
        }[torch_dtype],
    )
    out = call_converter(find_converter(op, 18), g, names, {}, ctx)
    g.make_tensor_output(out, output_name="y")
    onx = g.to_onnx()
    onnx.checker.check_model(onx)
    (got,) = run_onnx(
        onx,
        [torch.tensor(v, dtype=torch.float32 if isinstance(v, float) else None) for v in values],
    )
    assert got.shape == ()
    assert got.dtype == {bool: np.bool_, int: np.int64, float: np.float32}[type(expected)]
    if isinstance(expected, float):
        np.testing.assert_allclose(got, expected, rtol=1e-6)
    else:
        assert got.item() == expected, (op, values, got, expected)


BINARY = [
    operator.add,
    operator.sub,
    operator.mul,
    operator.truediv,
    operator.floordiv,
    operator.mod,
    operator.pow,
    operator.eq,
    operator.ne,
    operator.lt,
    operator.le,
    operator.gt,
    operator.ge,
    torch.sym_max,
    torch.sym_min,
]
PAIRS = [(7, 2), (-7, 2), (7, -2), (-6, 3), (5, 5)]


@pytest.mark.parametrize("op", BINARY, ids=lambda o: o.__name__)
def test_binary_int(op):
    for x, y in PAIRS:
        if op is operator.pow and y < 0:
            continue
        _run_converter(op, (x, y))


@pytest.mark.parametrize(
    "op",
    [
        operator.add,
        operator.mul,
        operator.truediv,
        operator.floordiv,
        operator.mod,
        operator.lt,
        torch.sym_max,
    ],
    ids=lambda o: o.__name__,
)
def test_binary_float(op):
    for x, y in [(7.5, 2.0), (-7.5, 2.0), (3.0, -1.25)]:
        _run_converter(op, (x, y))


def test_mixed_int_float():
    _run_converter(operator.mul, (3, 2.5))
    _run_converter(operator.add, (2.5, -3))


@pytest.mark.parametrize("op", [operator.and_, operator.or_], ids=lambda o: o.__name__)
def test_and_or(op):
    for x, y in [(True, False), (True, True), (6, 3)]:
        _run_converter(op, (x, y))


@pytest.mark.parametrize(
    "op,values",
    [
        (operator.neg, [3, -4, 2.5]),
        (torch.sym_not, [True, False]),
        (torch.sym_float, [3, -4]),
        (torch.sym_int, [2.7, -2.7, 5]),
        (math.ceil, [2.2, -2.2, 3]),
        (math.floor, [2.7, -2.2, 3]),
        (math.trunc, [2.7, -2.7]),
    ],
    ids=lambda v: getattr(v, "__name__", "v"),
)
def test_unary(op, values):
    for v in values:
        _run_converter(op, (v,))
