"""The passes of the onnx_ir prototype: a pattern pass reports what it changed, the
fixed-point manager repeats until nothing changes, the loader reads no external data."""

import numpy as np
import onnx
from onnx import TensorProto as T
from onnx import helper

from experimental_experiment.xoptim.ir import (
    FixedPointPasses,
    IRMatch,
    IRPattern,
    PatternPass,
    default_passes,
    load,
    save,
)
from experimental_experiment.xoptim.ir.transpose import TransposeTransposeIR
from experimental_experiment.xoptim.ir.values import producer, used_once_by
from experimental_experiment.xoptim.testing import make_model, op_types, run_ort


def _chain(n, perm=(1, 0)):
    """n Transpose nodes in a row."""
    names = ["x"] + [f"t{i}" for i in range(n - 1)] + ["y"]
    nodes = [
        helper.make_node("Transpose", [names[i]], [names[i + 1]], perm=list(perm)) for i in range(n)
    ]
    shape = (2, 3, 4)[: len(perm)]
    return make_model(nodes, [("x", T.FLOAT, shape)], [("y", T.FLOAT, None)])


def test_pattern_pass_counts_rewrites():
    res = PatternPass(TransposeTransposeIR())(load(_chain(2)))
    assert res.modified and res.rewrites == 1
    assert res.per_pattern == {"TransposeTransposeIR": 1}
    assert op_types(save(res.model)) == ["Identity"]  # y is a graph output


def test_fixed_point_reaches_the_end_of_a_chain():
    model = _chain(4, (1, 2, 0))  # T^4 = T
    res = FixedPointPasses([PatternPass(TransposeTransposeIR())])(load(model))
    out = save(res.model)
    assert op_types(out) == ["Transpose"]
    assert res.rewrites == 2  # (T1 T2) -> T12, (T12 T3) -> x: T4 is left
    x = np.arange(24, dtype=np.float32).reshape(2, 3, 4)
    np.testing.assert_array_equal(run_ort(out, {"x": x})[0], run_ort(model, {"x": x})[0])


def test_nothing_to_do_is_not_modified():
    res = default_passes()(
        load(
            make_model(
                [helper.make_node("Neg", ["x"], ["y"])],
                [("x", T.FLOAT, (2,))],
                [("y", T.FLOAT, None)],
            )
        )
    )
    assert not res.modified and res.rewrites == 0


def test_custom_pattern_with_use_def_chains():
    class NegNeg(IRPattern):
        anchor = ("Neg",)

        def match(self, node):
            first = producer(node.inputs[0], "Neg")
            if first is None or not used_once_by(first.outputs[0], node):
                return None
            return IRMatch([first, node], {"x": first.inputs[0]})

        def rewrite(self, graph, match):
            return [], [match.bound["x"]]

    model = make_model(
        [
            helper.make_node("Neg", ["x"], ["a"]),
            helper.make_node("Neg", ["a"], ["b"]),
            helper.make_node("Abs", ["b"], ["y"]),
        ],
        [("x", T.FLOAT, (2,))],
        [("y", T.FLOAT, None)],
    )
    out = save(FixedPointPasses([PatternPass(NegNeg())])(load(model)).model)
    assert op_types(out) == ["Abs"]
    assert out.graph.node[0].input[0] == "x"


def test_load_does_not_read_external_data(tmp_path):
    model = make_model(
        [helper.make_node("Add", ["x", "w"], ["y"])],
        [("x", T.FLOAT, (1024,))],
        [("y", T.FLOAT, None)],
        {"w": np.ones(1024, np.float32)},
    )
    path = str(tmp_path / "m.onnx")
    onnx.save(model, path, save_as_external_data=True, location="m.data", size_threshold=0)
    (tmp_path / "m.data").unlink()  # loading must not need it
    m = load(path)
    assert m.graph.num_nodes() == 1
