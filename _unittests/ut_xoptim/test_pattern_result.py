"""A pattern's match returns a value (Match, Refusal with its reason, or None); nothing
is stored on the pattern, so one instance can be used on several graphs at once."""

from onnx import TensorProto, helper

from experimental_experiment.xbuilder import GraphBuilder
from experimental_experiment.xoptim import Match, Pattern, optimize
from experimental_experiment.xoptim.pattern_graph import Refusal

F = TensorProto.FLOAT


class NegNegToIdentity(Pattern):
    """Neg(Neg(x)) -> x, refused when x is an input named "keep"."""

    anchor = "Neg"

    def match(self, g, node):
        first = self.producer(g, node.input[0])
        if first is None or first.op_type != "Neg":
            return None
        if first.input[0] == "keep":
            return self.refuse("the input is called keep")
        return Match(self, [first, node], bound={"x": first.input[0]})

    def apply(self, op, match):
        return match.bound["x"]


def _builder(name):
    g = GraphBuilder(18)
    x = g.make_tensor_input(name, F, ("n",))
    g.make_tensor_output(g.op.Neg(g.op.Neg(x)), output_name="y")
    return g


def _last_neg(g):
    return [n for n in g.nodes if n.op_type == "Neg"][-1]


def test_match_returns_a_value_and_stores_nothing():
    p = NegNegToIdentity()
    before = dict(vars(p))
    g = _builder("keep")
    res = p.match(g, _last_neg(g))
    assert isinstance(res, Refusal) and res.reason == "the input is called keep"
    assert not res  # false like "no match"
    g2 = _builder("x")
    m = p.match(g2, _last_neg(g2))
    assert isinstance(m, Match) and m.bound == {"x": "x"}
    assert dict(vars(p)) == before
    assert not hasattr(Pattern, "outputs") and not hasattr(p, "_refusal")


def test_refusal_reason_in_the_report():
    nodes = [helper.make_node("Neg", ["keep"], ["a"]), helper.make_node("Neg", ["a"], ["y"])]
    graph = helper.make_graph(
        nodes,
        "g",
        [helper.make_tensor_value_info("keep", F, ["n"])],
        [helper.make_tensor_value_info("y", F, ["n"])],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)])
    res = optimize(model, patterns=[NegNegToIdentity()])
    opt, report = res.model, res.report
    entry = report.entry("NegNegToIdentity", "pattern")
    assert entry.refused == 1 and "the input is called keep" in entry.refusals[0]
    assert [n.op_type for n in opt.graph.node] == ["Neg", "Neg"]


class RecordingNegNeg(NegNegToIdentity):
    """Records what ``match`` receives."""

    def __init__(self):
        super().__init__()
        self.seen = []

    def match(self, g, node):
        self.seen.append(g)
        return super().match(g, node)


def test_index_is_an_argument_not_a_builder_attribute():
    from experimental_experiment.xoptim.graph_index import GraphIndex
    from experimental_experiment.xoptim.matcher import IndexedGraph
    from experimental_experiment.xoptim.optimizer import apply_patterns_once
    from experimental_experiment.xoptim.report import OptimizationReport

    g = _builder("x")
    attributes = set(vars(g))
    p = RecordingNegNeg()
    assert apply_patterns_once(g, [p], OptimizationReport()) == 1
    # the optimizer gave the pattern a view holding the round's index, the builder
    # itself got no new attribute
    assert set(vars(g)) == attributes
    assert len(p.seen) == 2  # one call per Neg, both with the round's view
    view = p.seen[0]
    assert p.seen[1] is view
    assert isinstance(view, IndexedGraph) and view.builder is g
    assert isinstance(view.index, GraphIndex)
    assert view.get_type("x") == F  # the builder's methods
    assert "Neg" not in [n.op_type for n in g.nodes]
    # outside the optimizer the pattern indexes the builder itself
    g2 = _builder("x")
    neg = _last_neg(g2)
    assert NegNegToIdentity.producer(g2, neg.input[0]).op_type == "Neg"
    assert NegNegToIdentity.n_consumers(g2, neg.output[0]) == 1  # a graph output
