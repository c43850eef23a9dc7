"""The optimizer inside If/Loop/Scan bodies (nested ones too).

Every model is exported twice: with ``OptimizationOptions(subgraphs=False)`` (the
bodies as the converters wrote them) and with the default options. The expected op
types of each body after optimization come from what the patterns and the folding
must do (``x * 1.0``, ``Transpose(Transpose(x))`` with the same perm twice and
``Squeeze(Unsqueeze(x))`` disappear, a computation on constants becomes one constant),
and both models are checked with onnxruntime against eager torch on two sizes.
"""

import numpy as np
import onnx
import pytest
import torch
from onnx import AttributeProto, TensorProto, numpy_helper
from torch._higher_order_ops.scan import scan
from torch._higher_order_ops.while_loop import while_loop

from experimental_experiment.ext_test_case import check_export
from experimental_experiment.xbuilder import GraphBuilder, OptimizationOptions
from experimental_experiment.xbuilder.graph_utils import used_names
from experimental_experiment.xoptim import optimize_builder, optimize_model
from experimental_experiment.xoptim.subgraphs import count_nodes

DS = ({0: "n"},)
NO_SUBGRAPHS = OptimizationOptions(subgraphs=False)


def _body(graph: onnx.GraphProto, op_type: str, attr: str) -> onnx.GraphProto:
    """The subgraph ``attr`` of the only node ``op_type`` of ``graph``."""
    nodes = [n for n in graph.node if n.op_type == op_type]
    assert len(nodes) == 1, [n.op_type for n in graph.node]
    return next(a.g for a in nodes[0].attribute if a.name == attr)


def _ops(graph) -> list[str]:
    return [n.op_type for n in graph.node]


def _inits(onx) -> dict[str, np.ndarray]:
    return {i.name: numpy_helper.to_array(i) for i in onx.graph.initializer}


def _export_both(model, inputs, ds=DS):
    """(model without subgraph optimization, optimized model), both checked."""
    before = check_export(model, inputs, dynamic_shapes=ds, options=NO_SUBGRAPHS)
    after = check_export(model, inputs, dynamic_shapes=ds)
    # same model twice: byte-identical
    again = check_export(model, inputs[:1], dynamic_shapes=ds)
    assert again.SerializeToString() == after.SerializeToString()
    return before, after


class CondNested(torch.nn.Module):
    def forward(self, x):
        def inner_true(x):
            y = x.transpose(0, 1).transpose(0, 1) * 1.0
            return y + torch.arange(3, dtype=torch.float32) * 2

        def inner_false(x):
            return x.unsqueeze(0).squeeze(0) - 1

        def true_fn(x):
            return torch.cond(x.mean() > 0.5, inner_true, inner_false, (x,)) * 3

        def false_fn(x):
            return x.abs()

        return torch.cond(x.sum() > 0, true_fn, false_fn, (x,))


def test_cond_nested():
    inputs = [(torch.rand(5, 3) + 0.6,), (torch.rand(7, 3) * 0.1,), (-torch.rand(2, 3),)]
    before, after = _export_both(CondNested(), inputs)
    inner = {
        k: _body(_body(m.graph, "If", "then_branch"), "If", "then_branch")
        for k, m in [("before", before), ("after", after)]
    }
    assert _ops(inner["before"]) == [
        "Transpose",
        "Transpose",
        "Mul",
        "Range",
        "Cast",
        "Mul",
        "Add",
    ], _ops(inner["before"])
    # the pair of transposes and the product by one vanish, arange(3) * 2 is folded
    assert _ops(inner["after"]) == ["Add"]
    x, cst = inner["after"].node[0].input
    assert x == "x"  # the outer input, read directly by both nested branches
    np.testing.assert_array_equal(_inits(after)[cst], np.array([0, 2, 4], np.float32))
    else_after = _body(_body(after.graph, "If", "then_branch"), "If", "else_branch")
    assert _ops(else_after) == ["Sub"]
    assert count_nodes(after.graph) < count_nodes(before.graph)


class ScanBody(torch.nn.Module):
    def forward(self, x):
        def body(carry, xi):
            carry = carry + xi.unsqueeze(0).squeeze(0) * 1.0
            return carry, carry.clone()

        return scan(body, torch.zeros_like(x[0]), x)


def test_scan_body():
    inputs = [(torch.randn(5, 3),), (torch.randn(8, 3),)]
    before, after = _export_both(ScanBody(), inputs)
    b, a = _body(before.graph, "Scan", "body"), _body(after.graph, "Scan", "body")
    assert sorted(_ops(b)) == ["Add", "Identity", "Mul", "Squeeze", "Unsqueeze"], _ops(b)
    # the second output repeats the first one: its Identity stays
    assert _ops(a) == ["Add", "Identity"]
    assert [i.name for i in a.input] == [i.name for i in b.input]
    assert [o.name for o in a.output] == [o.name for o in b.output]


class WhileOuter(torch.nn.Module):
    """The bodies read ``x`` and ``x.shape[0]`` from the outer scope."""

    def forward(self, x):
        def cond_fn(i, acc):
            return i < x.shape[0]

        def body_fn(i, acc):
            row = x.index_select(0, i.reshape(1)).squeeze(0)
            return i + 1, acc.transpose(0, 0) * 1.0 * 0.5 + row

        return while_loop(cond_fn, body_fn, (torch.tensor(0), torch.zeros_like(x[0])))


def test_while_loop_body_reads_outer_names():
    inputs = [(torch.randn(5, 3),), (torch.randn(2, 3),)]
    before, after = _export_both(WhileOuter(), inputs)
    b, a = _body(before.graph, "Loop", "body"), _body(after.graph, "Loop", "body")
    assert _ops(b).count("Mul") == 2, _ops(b)
    assert _ops(a).count("Mul") == 1, _ops(a)  # * 1.0 removed, * 0.5 stays
    assert len(a.node) < len(b.node)
    # x is still read from the outer scope, not a body input, and not renamed
    inner_inputs = {i.name for i in a.input}
    loop = next(n for n in after.graph.node if n.op_type == "Loop")
    assert "x" in used_names(loop) and "x" not in inner_inputs


class MapBody(torch.nn.Module):
    def forward(self, x, y):
        return torch._higher_order_ops.map(
            lambda xi, y: (xi * 1.0).unsqueeze(0).squeeze(0) * y + xi.sum(), x, y
        )


def test_map_body():
    inputs = [(torch.randn(5, 3), torch.randn(3)), (torch.randn(8, 3), torch.randn(3))]
    before, after = _export_both(MapBody(), inputs, ds=({0: "n"}, None))
    b, a = _body(before.graph, "Scan", "body"), _body(after.graph, "Scan", "body")
    assert sorted(_ops(b)) == ["Add", "Mul", "Mul", "ReduceSum", "Squeeze", "Unsqueeze"], _ops(b)
    assert sorted(_ops(a)) == ["Add", "Mul", "ReduceSum"], _ops(a)


class CondOuterValues(torch.nn.Module):
    """A branch reads a computed outer value (never folded) and a buffer (a constant,
    folded with the body's constants)."""

    def __init__(self):
        super().__init__()
        self.register_buffer("b", torch.arange(3, dtype=torch.float32))

    def forward(self, x, bias):
        scale = bias.exp() * 2

        def true_fn(x):
            return x * scale + self.b * 2

        def false_fn(x):
            return x - scale

        return torch.cond(x.sum() > 0, true_fn, false_fn, (x,))


def test_cond_outer_values():
    inputs = [(torch.rand(4, 3), torch.randn(3)), (-torch.rand(6, 3), torch.randn(3))]
    before, after = _export_both(CondOuterValues(), inputs, ds=({0: "n"}, None))
    b, a = _body(before.graph, "If", "then_branch"), _body(after.graph, "If", "then_branch")
    assert _ops(b) == ["Mul", "Mul", "Add"], _ops(b)
    assert _ops(a) == ["Mul", "Add"], _ops(a)
    mul, add = a.node
    scale = [i for i in mul.input if i != "x"][0]
    # the outer value is still computed by the main graph
    assert scale not in _inits(after)
    assert any(scale in n.output for n in after.graph.node)
    folded = [i for i in add.input if i in _inits(after)]
    assert len(folded) == 1
    buffer = dict(CondOuterValues().named_buffers())["b"].numpy()
    np.testing.assert_array_equal(_inits(after)[folded[0]], buffer * 2)


# builder level: what a body may and may not touch
def _builder_with_if():
    g = GraphBuilder(18)
    x = g.make_tensor_input("x", TensorProto.FLOAT, ("n",))
    y = g.op.Mul(x, 3.0)  # computed outside, used inside
    c1 = g.make_constant(np.array([1.0], dtype=np.float32))
    branches = {}
    for key in ("then_branch", "else_branch"):
        child = g.make_subgraph_builder()
        two = child.op.Add(c1, c1)  # constant: folds
        z = child.op.Mul(child.op.Add(y, two), 1.0)  # Mul by one: removed
        out = child.op.Identity(y) if key == "else_branch" else z
        child.outputs = [out]
        branches[key] = child.to_graph_proto(key)
    cond = g.op.Greater(g.op.ReduceSum(x, keepdims=0), 0.0)
    g.make_tensor_output(g.op.If(cond, **branches), elem_type=TensorProto.FLOAT, shape=("n",))
    return g


def _run(onx, x):
    import onnxruntime

    sess = onnxruntime.InferenceSession(onx.SerializeToString(), providers=["CPUExecutionProvider"])
    return sess.run(None, {"x": x})[0]


@pytest.mark.parametrize("n", [2, 5])
def test_builder_body_keeps_outer_names(n):
    g = _builder_with_if()
    report = optimize_builder(g)
    onx = g.to_onnx()
    onnx.checker.check_model(onx, full_check=True)
    then, other = (_body(onx.graph, "If", a) for a in ("then_branch", "else_branch"))
    y = next(n.output[0] for n in onx.graph.node if n.op_type == "Mul")
    assert _ops(then) == ["Add"] and y in then.node[0].input
    two = [i for i in then.node[0].input if i != y][0]
    np.testing.assert_array_equal(_inits(onx)[two], np.array([2.0], np.float32))
    # an outer name returned by a branch goes through an Identity, kept
    assert _ops(other) == ["Identity"] and list(other.node[0].input) == [y]
    assert report.applied("optimize_subgraphs") > 0
    x = np.arange(n, dtype=np.float32) + 1
    np.testing.assert_allclose(_run(onx, x), x * 3 + 2)
    np.testing.assert_allclose(_run(onx, -x), -x * 3)


def test_optimize_model_skips_a_subgraph_reusing_names():
    """Both branches define ``t`` (allowed by ONNX in two scopes): types could not be
    told apart, the branches are left as they are, the model stays valid."""
    from onnx import helper

    def branch(name, op):
        c = helper.make_node("Constant", [], ["one"], value_float=1.0)
        n1 = helper.make_node(op, ["x", "one"], ["t"])
        n2 = helper.make_node("Mul", ["t", "one"], [f"{name}_out"])
        return helper.make_graph(
            [c, n1, n2],
            name,
            [],
            [helper.make_tensor_value_info(f"{name}_out", TensorProto.FLOAT, None)],
        )

    cond = helper.make_node("Greater", ["x", "zero"], ["gt"])
    red = helper.make_node("ReduceMin", ["gt_f"], ["g0"], keepdims=0)
    cast = helper.make_node("Cast", ["gt"], ["gt_f"], to=TensorProto.FLOAT)
    tob = helper.make_node("Cast", ["g0"], ["b"], to=TensorProto.BOOL)
    node = helper.make_node(
        "If", ["b"], ["y"], then_branch=branch("then", "Add"), else_branch=branch("else", "Sub")
    )
    graph = helper.make_graph(
        [cond, cast, red, tob, node],
        "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [3])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [3])],
        [numpy_helper.from_array(np.array(0, np.float32), "zero")],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)])
    opt = optimize_model(model)
    onnx.checker.check_model(opt, full_check=True)
    then = _body(opt.graph, "If", "then_branch")
    assert _ops(then) == ["Constant", "Add", "Mul"]
    x = np.array([1, 2, 3], np.float32)
    np.testing.assert_allclose(_run(opt, x), x + 1)
    np.testing.assert_allclose(_run(opt, -x), -x - 1)


def test_optimize_model_subgraph_of_a_loaded_model():
    """A model read back from ONNX: the branch's Constant is folded away with the
    product by one, types come from the value infos."""
    g = _builder_with_if()
    onx = g.to_onnx()
    opt = optimize_model(onx)
    then = _body(opt.graph, "If", "then_branch")
    assert _ops(then) == ["Add"], _ops(then)
    x = np.arange(4, dtype=np.float32)
    np.testing.assert_allclose(_run(opt, x + 1), (x + 1) * 3 + 2)


def test_options_leave_subgraphs():
    g = _builder_with_if()
    optimize_builder(g, OptimizationOptions(subgraphs=False))
    then = _body(g.to_onnx().graph, "If", "then_branch")
    assert _ops(then) == ["Add", "Add", "Mul"]
    assert all(
        a.type == AttributeProto.GRAPH for n in g.nodes if n.op_type == "If" for a in n.attribute
    )


def test_rewrites_inside_bodies_count_for_max_rewrites():
    """bisect_patterns relies on max_rewrites: rewrites in bodies are logged and
    counted like the others."""
    from experimental_experiment.xoptim import optimize

    onx = _builder_with_if().to_onnx()
    full = optimize(onx)
    assert [name for name, _ in full.rewrites] == ["MulByOneToIdentity"]
    none = optimize(onx, max_rewrites=0)
    assert none.rewrites == []
    # the folding still runs, the product by one stays
    assert _ops(_body(none.model.graph, "If", "then_branch")) == ["Add", "Mul"]
    assert _ops(_body(full.model.graph, "If", "then_branch")) == ["Add"]
    x = np.arange(3, dtype=np.float32) + 1
    for m in (none.model, full.model):
        np.testing.assert_allclose(_run(m, x), x * 3 + 2)
