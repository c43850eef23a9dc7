"""The optimizer's index: built once and updated by the rewrites (not rebuilt each
round), equal to a fresh one after every round; nodes tracked by identity in
NodeSet / NodeMap (no bare id() sets)."""

from onnx import TensorProto as T
from onnx import helper

from experimental_experiment.xbuilder import OptimizationOptions
from experimental_experiment.xoptim import optimizer
from experimental_experiment.xoptim.graph_index import GraphIndex
from experimental_experiment.xoptim.loader import model_to_builder
from experimental_experiment.xoptim.node_set import NodeMap, NodeSet
from experimental_experiment.xoptim.optimizer import apply_patterns_once, optimize_builder
from experimental_experiment.xoptim.patterns.transpose import TransposeTransposeToTranspose
from experimental_experiment.xoptim.report import OptimizationReport
from experimental_experiment.xoptim.testing import make_model

NO_PASS = OptimizationOptions(
    remove_unused=False,
    remove_identity=False,
    constant_folding=False,
    cse=False,
    merge_initializers=False,
)


def _chain(n=4):
    """n Transpose(perm=[1, 2, 0]) in a row: three rounds of rewrites for n=4."""
    names = ["x"] + [f"t{i}" for i in range(n - 1)] + ["y"]
    nodes = [
        helper.make_node("Transpose", [names[i]], [names[i + 1]], perm=[1, 2, 0], name=f"n{i}")
        for i in range(n)
    ]
    return make_model(nodes, [("x", T.FLOAT, (2, 3, 4))], [("y", T.FLOAT, None)])


def _snapshot(index: GraphIndex):
    prod = {k: (v[0].name, v[1]) for k, v in index.producer.items()}
    cons = {k: sorted(n.name for n in v) for k, v in index.consumers.items()}
    return prod, cons


def test_index_built_once_without_pass(monkeypatch):
    built = []

    class Counting(GraphIndex):
        def __init__(self, g):
            built.append(1)
            super().__init__(g)

    monkeypatch.setattr(optimizer, "GraphIndex", Counting)
    g = model_to_builder(_chain())
    report = optimize_builder(g, NO_PASS, patterns=[TransposeTransposeToTranspose()])
    rounds = [e for e in report if e.name == "TransposeTransposeToTranspose"][0]
    assert rounds.applied >= 3  # several rounds
    assert len(built) == 1


def test_incremental_index_equals_a_fresh_one():
    g = model_to_builder(_chain(6))
    index = GraphIndex(g)
    report = OptimizationReport()
    while apply_patterns_once(g, [TransposeTransposeToTranspose()], report, index=index):
        assert _snapshot(index) == _snapshot(GraphIndex(g))
        assert [index.position(n) for n in g.nodes] == list(range(len(g.nodes)))
    assert [n.op_type for n in g.nodes] == ["Identity"]


def test_node_set_uses_identity_not_equality():
    a = helper.make_node("Neg", ["x"], ["y"])
    b = helper.make_node("Neg", ["x"], ["y"])
    assert a == b  # protobuf equality: the reason sets of nodes need identity
    s = NodeSet([a])
    assert a in s and b not in s
    s.add(b)
    s.discard(a)
    assert list(s) == [b]
    m = NodeMap([(a, 1), (b, 2)])
    assert m[a] == 1 and m[b] == 2 and len(m) == 2
    assert m.pop(a) == 1 and a not in m
