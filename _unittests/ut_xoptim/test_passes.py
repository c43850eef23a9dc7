"""Graph passes (xoptim.passes): what they change, results kept, the pass manager."""

import dataclasses

import numpy as np
import onnxruntime
import pytest
from onnx import TensorProto

from experimental_experiment.errors import ExportError
from experimental_experiment.xbuilder import GraphBuilder, OptimizationOptions
from experimental_experiment.xoptim import optimize_builder
from experimental_experiment.xoptim.passes import (
    GraphPass,
    PassError,
    PassManager,
    PassResult,
    RemoveIdentity,
    RemoveUnused,
    run_passes,
)

F = TensorProto.FLOAT
NO_OPT = OptimizationOptions(
    remove_unused=False,
    remove_identity=False,
    constant_folding=False,
    cse=False,
    merge_initializers=False,
    patterns=None,
)


def _run(model, feeds):
    sess = onnxruntime.InferenceSession(
        model.SerializeToString(), providers=["CPUExecutionProvider"]
    )
    return sess.run(None, feeds)


def _ops(model):
    return [n.op_type for n in model.graph.node]


def _to_onnx(g, optimize=True):
    """The builder's model after the passes and patterns ``optimize`` selects."""
    if optimize:
        optimize_builder(g, optimize if isinstance(optimize, OptimizationOptions) else None)
    return g.to_onnx()


# passes


def _chain_model(optimize):
    """x -> Identity -> Add(c1 + c2 folded) -> Identity -> Mul(Shape folded) -> y;
    an unused branch."""
    g = GraphBuilder()
    x = g.make_tensor_input("x", F, (2, 3))
    c = g.op.Add(np.array([1.0], dtype=np.float32), np.array([2.0], dtype=np.float32))
    a = g.op.Add(g.op.Identity(x), c)
    n = g.op.Cast(g.op.Size(x), to=F)  # static shape: folded
    g.op.Exp(g.op.Sin(x))  # unused
    y = g.op.Mul(g.op.Identity(a), n)
    g.make_tensor_output(y, output_name="y")
    return g, _to_onnx(g, optimize)


def test_passes_change_the_graph_but_not_the_results():
    feed = {"x": np.random.randn(2, 3).astype(np.float32)}
    expected = (feed["x"] + 3) * 6
    g0, raw = _chain_model(NO_OPT)
    g1, opt = _chain_model(True)
    for model in (raw, opt):
        (got,) = _run(model, feed)
        np.testing.assert_allclose(got, expected, rtol=1e-6)
    assert "Identity" in _ops(raw) and "Sin" in _ops(raw) and "Size" in _ops(raw)
    assert sorted(_ops(opt)) == ["Add", "Mul"]
    assert len(opt.graph.initializer) == 2  # 3.0 and 6.0; unused constants removed


def test_optimize_report():
    g, _ = _chain_model(NO_OPT)
    report = optimize_builder(g)
    assert report.applied("remove_identity") == 3  # two explicit, one renaming the output
    assert report.applied("remove_unused") == 2  # Sin, Exp
    assert report.applied("constant_folding") >= 3  # Add of constants, Size, Cast


def test_remove_identity_keeps_output_names():
    g = GraphBuilder()
    x = g.make_tensor_input("x", F, (2,))
    r = g.op.Relu(x)
    g.make_tensor_output(g.op.Identity(r), output_name="y")
    model = _to_onnx(g)
    assert _ops(model) == ["Relu"]
    assert model.graph.output[0].name == "y"
    (got,) = _run(model, {"x": np.array([-1, 2], dtype=np.float32)})
    np.testing.assert_array_equal(got, [0, 2])


def test_constant_folding_respects_size_cap():
    g = GraphBuilder()
    x = g.make_tensor_input("x", F, (4,))
    big = g.op.Add(np.zeros((4,), dtype=np.float32), 1.0)
    g.make_tensor_output(g.op.Add(x, big), output_name="y")
    model = _to_onnx(g, OptimizationOptions(constant_size_cap=2))
    assert _ops(model) == ["Add", "Add"]
    (got,) = _run(model, {"x": np.ones(4, dtype=np.float32)})
    np.testing.assert_array_equal(got, [2, 2, 2, 2])


def test_folded_shape_of_symbolic_input_is_kept():
    g = GraphBuilder()
    x = g.make_tensor_input("x", F, ("n", 3))
    s = g.op.Shape(x)
    g.make_tensor_output(g.op.Reshape(x, g.op.Concat(s, [1], axis=0)), output_name="y")
    model = _to_onnx(g)
    assert "Shape" in _ops(model)
    # only the rank is known: the output is written with 3 unknown dims
    assert len(model.graph.output[0].type.tensor_type.shape.dim) == 3
    feed = np.random.randn(5, 3).astype(np.float32)
    (got,) = _run(model, {"x": feed})
    assert got.shape == (5, 3, 1)


class _Counter(GraphPass):
    """Changes something the first ``n`` times it runs."""

    name = "counter"

    def __init__(self, n):
        self.n, self.calls = n, 0

    def run(self, g):
        self.calls += 1
        return 1 if self.calls <= self.n else 0


class _Broken(GraphPass):
    name = "broken"

    def run(self, g):
        raise ValueError("bug")


def test_pass_manager_stops_when_nothing_changes_and_is_bounded():
    g = GraphBuilder()
    counter = _Counter(2)
    results = PassManager([counter], max_rounds=10)(g)
    assert [r.changes for r in results] == [1, 1, 0]
    assert all(isinstance(r, PassResult) and r.name == "counter" for r in results)
    endless = _Counter(100)
    assert len(PassManager([endless], max_rounds=4)(g)) == 4


def test_pass_manager_names_the_failing_pass():
    g = GraphBuilder()
    with pytest.raises(PassError, match="'broken' failed: ValueError: bug") as e:
        PassManager([RemoveUnused(), _Broken()])(g)
    assert isinstance(e.value, ExportError)


def test_pass_classes_return_what_they_changed():
    g = GraphBuilder()
    x = g.make_tensor_input("x", F, (2,))
    g.op.Neg(x)  # unused
    g.make_tensor_output(g.op.Identity(g.op.Relu(x)), output_name="y")
    assert RemoveIdentity()(g).changes >= 1
    r = RemoveUnused()(g)
    assert r.modified and r.changes == 1
    assert not RemoveUnused()(g).modified
    assert _ops(g.to_onnx()) == ["Relu"]


def test_run_passes_report_entries_are_dataclasses():
    g = GraphBuilder()
    x = g.make_tensor_input("x", F, (2,))
    g.make_tensor_output(g.op.Identity(g.op.Relu(x)), output_name="y")
    report = run_passes(g, OptimizationOptions(patterns=None))
    entry = report.entry("remove_identity", "pass")
    assert entry.applied >= 1 and report.applied("remove_identity") == entry.applied
    # the dict-like access of the first releases still answers, with a warning
    with pytest.warns(DeprecationWarning, match=r"entry\.applied"):
        assert entry["applied"] == entry.applied
    with pytest.warns(DeprecationWarning, match=r"report\.applied\('remove_identity'\)"):
        assert report["remove_identity"] == entry.applied
    with pytest.warns(DeprecationWarning, match=r"0\.3; use entry\.matched = \.\.\. instead"):
        entry["matched"] = 7
    assert entry.matched == 7
    with pytest.warns(DeprecationWarning, match=r"0\.3; use entry\.applied instead"):
        assert entry.get("applied") == entry.applied
    with pytest.warns(DeprecationWarning, match=r"0\.3; use dataclasses\.fields\(entry\)"):
        assert list(entry) == [f.name for f in dataclasses.fields(entry)]
    assert {e.kind for e in report} == {"pass"}


def test_qdq_of_constants_is_not_folded():
    """A quantized weight stays int8 behind its DequantizeLinear (the QDQ form
    onnxruntime fuses), and a QuantizeLinear of a constant stays too."""
    g = GraphBuilder()
    x = g.make_tensor_input("x", F, ("n", 4))
    w = np.arange(-8, 8, dtype=np.int8).reshape(4, 4)
    scale, zp = np.array(0.5, dtype=np.float32), np.array(0, dtype=np.int8)
    wf = g.op.DequantizeLinear(w, scale, zp)
    q = g.op.QuantizeLinear(np.ones((4,), dtype=np.float32), scale, zp)
    b = g.op.DequantizeLinear(q, scale, zp)
    g.make_tensor_output(g.op.Add(g.op.MatMul(x, wf), b), output_name="y")
    model = _to_onnx(g)
    ops = _ops(model)
    assert ops.count("DequantizeLinear") == 2 and "QuantizeLinear" in ops, ops
    feed = np.random.randn(3, 4).astype(np.float32)
    (got,) = _run(model, {"x": feed})
    np.testing.assert_allclose(got, feed @ (w.astype(np.float32) * 0.5) + 1.0, rtol=1e-6)
