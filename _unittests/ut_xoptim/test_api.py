"""Pattern API (declarative, imperative), engine rules, pattern sets, report, passes,
determinism, bisection."""

import dataclasses
import logging

import numpy as np
import onnx
import pytest
from onnx import TensorProto as T
from onnx import helper

from experimental_experiment.xbuilder import GraphBuilder, OptimizationOptions
from experimental_experiment.xoptim import (
    Match,
    Pattern,
    bisect_patterns,
    get_pattern_list,
    optimize,
    optimize_builder,
    optimize_model,
)
from experimental_experiment.xoptim.testing import (
    applied,
    check_pattern,
    make_model,
    op_types,
    refused,
    run_ort,
)

F = T.FLOAT


class ReluReluToRelu(Pattern):
    """Relu(Relu(x)) -> Relu(x)."""

    def pattern(self, op, x):
        return op.Relu(op.Relu(x))

    def rewrite(self, op, x):
        return op.Relu(x)


class AddReluToNegSub(Pattern):
    """Add(Relu(x), y) -> Sub(y, Neg(Relu(x))): checks commutative matching."""

    def pattern(self, op, x, y):
        return op.Add(op.Relu(x), y)

    def rewrite(self, op, x, y):
        return op.Sub(y, op.Neg(op.Relu(x)))


class MulTwoToAdd(Pattern):
    """Mul(x, 2) -> Add(x, x): a constant in the pattern."""

    def pattern(self, op, x):
        return op.Mul(x, 2.0)

    def rewrite(self, op, x):
        return op.Add(x, x)


class ConcatOfOneToIdentity(Pattern):
    """Concat(x) -> x (imperative)."""

    anchor = "Concat"

    def match(self, g, node):
        if len(node.input) != 1:
            return None
        return Match(self, [node], bound={"x": node.input[0]})

    def apply(self, op, match):
        return match.bound["x"]


class BrokenPattern(Pattern):
    """Relu(x) -> raises."""

    def pattern(self, op, x):
        return op.Relu(x)

    def rewrite(self, op, x):
        raise RuntimeError("bug")


class WrongTypePattern(Pattern):
    """Relu(x) -> Cast(x, int64): changes the type, refused by the engine."""

    def pattern(self, op, x):
        return op.Relu(x)

    def rewrite(self, op, x):
        return op.Cast(x, to=T.INT64)


class WrongResultPattern(Pattern):
    """Relu(x) -> Abs(x): wrong results, found by bisect_patterns."""

    def pattern(self, op, x):
        return op.Relu(x)

    def rewrite(self, op, x):
        return op.Abs(x)


def _builder(n_relu=2):
    g = GraphBuilder(18)
    x = g.make_tensor_input("x", F, ("n", 3))
    r = x
    for _ in range(n_relu):
        r = g.op.Relu(r)
    g.make_tensor_output(r, output_name="y")
    return g


def _feeds():
    return [
        {"x": np.random.randn(2, 3).astype(np.float32)},
        {"x": np.random.randn(5, 3).astype(np.float32)},
    ]


def test_declarative_on_builder_keeps_output_name():
    g = _builder(3)
    report = optimize_builder(g, patterns=[ReluReluToRelu()])
    model = g.to_onnx(optimize=False)
    assert op_types(model) == ["Relu"]
    assert [o.name for o in model.graph.output] == ["y"]
    assert applied(report, "ReluReluToRelu") == 2


def test_commutative_match():
    model = make_model(
        [helper.make_node("Relu", ["x"], ["r"]), helper.make_node("Add", ["z", "r"], ["y"])],
        [("x", F, ("n", 3)), ("z", F, ("n", 3))],
        [("y", F, ("n", 3))],
    )
    feeds = [{"x": f["x"], "z": f["x"] * 2} for f in _feeds()]
    opt, report = check_pattern(model, feeds, patterns=[AddReluToNegSub()])
    assert op_types(opt) == ["Relu", "Neg", "Sub"]


def test_constant_in_pattern():
    nodes = [
        helper.make_node("Mul", ["x", "two"], ["a"]),
        helper.make_node("Mul", ["a", "three"], ["y"]),
    ]
    model = make_model(
        nodes,
        [("x", F, ("n", 3))],
        [("y", F, ("n", 3))],
        {"two": np.array([2.0], np.float32), "three": np.float32(3.0)},
    )
    opt, report = check_pattern(model, _feeds(), patterns=[MulTwoToAdd()])
    assert op_types(opt) == ["Add", "Mul"]
    assert applied(report, "MulTwoToAdd") == 1


def test_imperative_pattern():
    model = make_model(
        [helper.make_node("Concat", ["x"], ["c"], axis=0), helper.make_node("Neg", ["c"], ["y"])],
        [("x", F, ("n", 3))],
        [("y", F, ("n", 3))],
    )
    opt, report = check_pattern(model, _feeds(), patterns=[ConcatOfOneToIdentity()])
    assert op_types(opt) == ["Neg"]
    assert applied(report, "ConcatOfOneToIdentity") == 1


def test_broken_or_wrong_type_rewrite_is_refused():
    for pattern, reason in [
        (BrokenPattern(), "rewrite failed"),
        (WrongTypePattern(), "changes the type"),
    ]:
        g = _builder(1)
        report = optimize_builder(g, patterns=[pattern])
        assert op_types(g.to_onnx(optimize=False)) == ["Relu"]
        assert any(reason in r for r in refused(report, pattern.name)), report


def test_get_pattern_list():
    default = [p.name for p in get_pattern_list("default")]
    assert "CastCastToCast" in default and len(default) == len(set(default))
    assert get_pattern_list("none") == [] and get_pattern_list(None) == []
    minus = [p.name for p in get_pattern_list("default,-CastCastToCast")]
    assert minus == [n for n in default if n != "CastCastToCast"]
    both = [p.name for p in get_pattern_list("default+onnxruntime")]
    assert both[: len(default)] == default
    assert [p.name for p in get_pattern_list("CastToIdentity")] == ["CastToIdentity"]
    with pytest.raises(ValueError, match="unknown pattern"):
        get_pattern_list("default,-NoSuchPattern")
    for p in get_pattern_list("default"):
        assert type(p).__doc__, p.name


def test_options_select_patterns():
    model = make_model(
        [helper.make_node("Cast", ["x"], ["c"], to=F), helper.make_node("Neg", ["c"], ["y"])],
        [("x", F, ("n", 3))],
        [("y", F, ("n", 3))],
    )
    assert op_types(optimize_model(model)) == ["Neg"]
    assert op_types(optimize_model(model, patterns="default,-CastToIdentity")) == ["Cast", "Neg"]
    assert op_types(optimize_model(model, patterns="none")) == ["Cast", "Neg"]
    g = _builder(1)
    g.op.Cast("x", to=F)
    report = optimize_builder(g, OptimizationOptions(patterns=None))
    assert all(e.kind == "pass" for e in report)


def test_report_format_and_verbose_logs(caplog):
    model = make_model(
        [
            helper.make_node("Cast", ["x"], ["c"], to=T.INT64),
            helper.make_node("Cast", ["c"], ["y"], to=F),
        ],
        [("x", F, ("n", 3))],
        [("y", F, ("n", 3))],
    )
    with caplog.at_level(logging.INFO, logger="experimental_experiment"):
        report = optimize(model, verbose=2).report
    assert "CastCastToCast refused" in caplog.text and "loses information" in caplog.text
    names = [e.name for e in report]
    assert {
        "remove_unused",
        "remove_identity",
        "constant_folding",
        "cse",
        "merge_initializers",
        "CastCastToCast",
    } <= set(names)
    for e in report:
        assert {f.name for f in dataclasses.fields(e)} >= {
            "name",
            "kind",
            "matched",
            "applied",
            "refused",
            "time_s",
        }
    assert report.applied("CastCastToCast") == 0 and refused(report, "CastCastToCast")


def test_cse_and_duplicated_initializers():
    nodes = [
        helper.make_node("Add", ["x", "c1"], ["a"]),
        helper.make_node("Add", ["x", "c2"], ["b"]),
        helper.make_node("Mul", ["a", "b"], ["y"]),
    ]
    model = make_model(
        nodes,
        [("x", F, ("n", 3))],
        [("y", F, ("n", 3))],
        {"c1": np.ones(3, np.float32) * 5, "c2": np.ones(3, np.float32) * 5},
    )
    opt, report = check_pattern(model, _feeds())
    assert op_types(opt) == ["Add", "Mul"] and len(opt.graph.initializer) == 1
    assert report.applied("merge_initializers") == 1 and report.applied("cse") == 1


def test_random_nodes_not_merged():
    nodes = [
        helper.make_node("RandomNormalLike", ["x"], ["a"]),
        helper.make_node("RandomNormalLike", ["x"], ["b"]),
        helper.make_node("Sub", ["a", "b"], ["y"]),
    ]
    model = make_model(nodes, [("x", F, ("n", 3))], [("y", F, ("n", 3))])
    assert op_types(optimize_model(model)) == ["RandomNormalLike", "RandomNormalLike", "Sub"]


def test_determinism():
    nodes = [
        helper.make_node("Transpose", ["x"], ["t"], perm=[1, 0]),
        helper.make_node("Transpose", ["t"], ["u"], perm=[1, 0]),
        helper.make_node("Cast", ["u"], ["c"], to=T.DOUBLE),
        helper.make_node("Cast", ["c"], ["d"], to=F),
        helper.make_node("Add", ["d", "z"], ["e"]),
        helper.make_node("Add", ["d", "z"], ["f"]),
        helper.make_node("Mul", ["e", "f"], ["y"]),
    ]
    model = make_model(
        nodes, [("x", F, ("n", 3))], [("y", F, ("n", 3))], {"z": np.zeros(3, np.float32) + 1}
    )
    first = optimize_model(model).SerializeToString()
    for _ in range(2):
        assert optimize_model(model).SerializeToString() == first


def test_subgraph_and_function_kept():
    then_g = helper.make_graph(
        [helper.make_node("Neg", ["u"], ["o"])],
        "then",
        [],
        [helper.make_tensor_value_info("o", F, None)],
    )
    else_g = helper.make_graph(
        [helper.make_node("Abs", ["u"], ["o2"])],
        "else",
        [],
        [helper.make_tensor_value_info("o2", F, None)],
    )
    fct = helper.make_function(
        "local",
        "twice",
        ["a"],
        ["b"],
        [helper.make_node("Add", ["a", "a"], ["b"])],
        [helper.make_opsetid("", 18)],
    )
    nodes = [
        helper.make_node("Transpose", ["x"], ["t"], perm=[1, 0]),
        helper.make_node("Transpose", ["t"], ["u"], perm=[1, 0]),
        helper.make_node("If", ["cond"], ["i"], then_branch=then_g, else_branch=else_g),
        helper.make_node("twice", ["i"], ["y"], domain="local"),
    ]
    model = make_model(
        nodes,
        [("x", F, ("n", 3)), ("cond", T.BOOL, ())],
        [("y", F, None)],
        extra_opsets={"local": 1},
    )
    model.functions.append(fct)
    feeds = [{"x": f["x"], "cond": np.array(c)} for f, c in zip(_feeds(), [True, False])]
    opt, _ = check_pattern(model, feeds)
    assert op_types(opt) == ["If", "twice"]


def test_bisect_patterns():
    model = make_model(
        [helper.make_node("Neg", ["x"], ["a"]), helper.make_node("Relu", ["a"], ["y"])],
        [("x", F, ("n", 3))],
        [("y", F, ("n", 3))],
    )
    feeds = {"x": np.random.randn(4, 3).astype(np.float32)}
    assert bisect_patterns(model, feeds, patterns="default") is None
    res = bisect_patterns(model, feeds, patterns=[ReluReluToRelu(), WrongResultPattern()])
    assert res["pattern"] == "WrongResultPattern" and res["index"] == 1
    assert res["max_diff"] > 0
    np.testing.assert_allclose(run_ort(res["model"], feeds)[0], np.abs(-feeds["x"]))


def test_optimize_model_from_file(tmp_path):
    model = make_model(
        [helper.make_node("Cast", ["x"], ["c"], to=F), helper.make_node("Neg", ["c"], ["y"])],
        [("x", F, ("n", 3))],
        [("y", F, ("n", 3))],
    )
    path = str(tmp_path / "m.onnx")
    onnx.save(model, path)
    assert op_types(optimize_model(path)) == ["Neg"]


def test_return_report_is_deprecated():
    model = make_model(
        [helper.make_node("Cast", ["x"], ["c"], to=F), helper.make_node("Neg", ["c"], ["y"])],
        [("x", F, ("n", 3))],
        [("y", F, ("n", 3))],
    )
    expected = optimize(model)
    with pytest.warns(
        DeprecationWarning,
        match=r"optimize_model\(\.\.\., return_report=True\) is deprecated and will be "
        r"removed in 0\.3; use optimize\(\.\.\.\)\.report instead",
    ) as record:
        opt, report = optimize_model(model, return_report=True)
    assert record[0].filename == __file__  # points at the caller's line
    assert opt.SerializeToString() == expected.model.SerializeToString()
    assert [(e.name, e.kind, e.applied) for e in report] == [
        (e.name, e.kind, e.applied) for e in expected.report
    ]
