"""onnxruntime patterns around GroupQueryAttention: the rotations done by the kernel
(do_rotary=1), the query/key/value projections packed in one MatMul. Checked against
the unfused model in onnxruntime on batch 1 and 2, prompts and decoding steps after
caches of several lengths, positions differing between batches."""

import numpy as np
import pytest
from onnx import TensorProto as T
from onnx import helper

from experimental_experiment.xoptim import optimize, optimize_model
from experimental_experiment.xoptim.patterns_ort._testing import check_ort_pattern
from experimental_experiment.xoptim.testing import applied, make_model, op_types, refused

F, I32 = T.FLOAT, T.INT32
H, KV, D, X = 4, 2, 16, 24
ROTARY = "RotaryGroupQueryAttentionToGroupQueryAttention"
PACKED = "MatMulGroupQueryAttentionToPackedGroupQueryAttention"
MS = "com.microsoft"


def _weights(seed=0, d=D):
    rnd = np.random.default_rng(seed)
    w = lambda n: (rnd.standard_normal((X, n)) / 4).astype(np.float32)  # noqa: E731
    i64 = lambda *v: np.array(v, dtype=np.int64)  # noqa: E731
    return {
        "wq": w(H * d),
        "wk": w(KV * d),
        "wv": w(KV * d),
        "zero": i64(0),
        "one": i64(1),
        "flat": i64(-1, d // 2),
    }


def _positions(consecutive=True):
    """Caches with one row per token and their positions (what the rotary pattern
    builds), or positions given as an input."""
    nodes = [
        helper.make_node("Reshape", ["f", "flat"], ["f2"]),
        helper.make_node("Cos", ["f2"], ["cos"]),
        helper.make_node("Sin", ["f2"], ["sin"]),
    ]
    if consecutive:
        nodes += [
            helper.make_node("Shape", ["f2"], ["n1"], start=0, end=1),
            helper.make_node("Squeeze", ["n1"], ["n"]),
            helper.make_node("Range", ["zero", "n", "one"], ["r"]),
            helper.make_node("Shape", ["f"], ["bs"], start=0, end=2),
            helper.make_node("Reshape", ["r", "bs"], ["pos"]),
        ]
    return nodes


def _model(rotary=True, consecutive=True, weight_input=False, d=D, total64=False):
    nodes = [
        helper.make_node("MatMul", ["x", w], [o])
        for w, o in (("wq", "q"), ("wk", "k"), ("wv", "v"))
    ]
    if total64:  # total_sequence_length cast from an int64 tensor of shape (1,)
        nodes.append(helper.make_node("Cast", ["total64"], ["total"], to=I32))
    q, k = "q", "k"
    if rotary:
        nodes += _positions(consecutive)
        nodes += [
            helper.make_node("RotaryEmbedding", ["q", "pos", "cos", "sin"], ["qr"], domain=MS),
            helper.make_node("RotaryEmbedding", ["k", "pos", "cos", "sin"], ["kr"], domain=MS),
        ]
        q, k = "qr", "kr"
    nodes.append(
        helper.make_node(
            "GroupQueryAttention",
            [
                q,
                k,
                "v",
                "pk",
                "pv",
                "seqlens",
                "total",
                "",
                "",
                "",
                "",
                "",
                "",
                "",
                "",
                "",
                "qlens",
            ],
            ["y", "present_k", "present_v"],
            domain=MS,
            num_heads=H,
            kv_num_heads=KV,
            scale=d**-0.5,
        )
    )
    inputs = [
        ("x", F, ("b", "s", X)),
        ("pk", F, ("b", KV, "p", d)),
        ("pv", F, ("b", KV, "p", d)),
        ("seqlens", I32, ("b",)),
        ("total", I32, ()),
        ("qlens", I32, ("b",)),
        ("f", F, ("b", "s", d // 2)),
    ]
    if total64:
        inputs[4] = ("total64", T.INT64, (1,))
    if rotary and not consecutive:
        inputs.append(("pos", T.INT64, ("b", "s")))
    inits = _weights(d=d)
    if weight_input:
        inputs.append(("wk", F, (X, KV * d)))
        wk = inits.pop("wk")
    outputs = [
        ("y", F, ("b", "s", H * d)),
        ("present_k", F, ("b", KV, "t", d)),
        ("present_v", F, ("b", KV, "t", d)),
    ]
    model = make_model(nodes, inputs, outputs, inits, extra_opsets={MS: 1})
    return (model, wk) if weight_input else model


def _feeds(extra=None):
    rnd = np.random.default_rng(1)
    inv = 1.0 / (10000 ** (np.arange(0, D, 2) / D))
    feeds = []
    for b, s, p in [(1, 1, 0), (2, 4, 0), (1, 5, 0), (1, 1, 7), (2, 1, 7), (2, 3, 6), (1, 1, 33)]:
        # positions differ between batches (left padding of a batch, for example)
        pos = rnd.integers(0, 20, (b, 1)) + np.arange(p, p + s)[None, :]
        f = (pos[:, :, None] * inv[None, None, :]).astype(np.float32)
        r = lambda *shape: rnd.standard_normal(shape).astype(np.float32)  # noqa: E731
        feed = {
            "x": r(b, s, X),
            "pk": r(b, KV, p, D),
            "pv": r(b, KV, p, D),
            "f": f,
            "seqlens": np.full((b,), p + s - 1, np.int32),
            "total": np.array(p + s, np.int32),
            "qlens": np.full((b,), s, np.int32),
        }
        feed.update(extra or {})
        feeds.append(feed)
    return feeds


@pytest.mark.parametrize("total64", [False, True])
def test_rotary_and_projections_packed_in_group_query_attention(total64):
    model = _model(total64=total64)
    feeds = _feeds()
    if total64:
        for f in feeds:
            f["total64"] = f.pop("total").reshape((1,)).astype(np.int64)
    opt, report = check_ort_pattern(model, feeds, atol=1e-5)
    assert applied(report, ROTARY) == 1
    assert applied(report, PACKED) == 1
    types = op_types(opt)
    assert types.count("MatMul") == 1 and "RotaryEmbedding" not in types
    gqa = [n for n in opt.graph.node if n.op_type == "GroupQueryAttention"]
    assert len(gqa) == 1 and list(gqa[0].input[1:3]) == ["", ""]
    assert {a.name: a.i for a in gqa[0].attribute if a.name == "do_rotary"} == {"do_rotary": 1}
    packed = [i for i in opt.graph.initializer if list(i.dims) == [X, (H + 2 * KV) * D]]
    assert len(packed) == 1
    # the caches are padded with total_sequence_length rows, one Cast to int64 (none
    # added when total_sequence_length is cast from int64, the Cast to int32 stays)
    assert types.count("Pad") == 2 and types.count("Cast") == 1, types


def test_packed_projections_without_rotary():
    model = _model(rotary=False)
    opt, report = check_ort_pattern(model, _feeds(), atol=1e-5)
    assert applied(report, PACKED) == 1 and applied(report, ROTARY) == 0
    assert op_types(opt) == ["MatMul", "GroupQueryAttention"]


def test_packing_is_byte_deterministic():
    first = optimize_model(_model(), patterns="default+onnxruntime").SerializeToString()
    second = optimize_model(_model(), patterns="default+onnxruntime").SerializeToString()
    assert first == second


def test_positions_not_proven_consecutive_refused():
    # during a prompt the kernel numbers the tokens from the first position of a batch
    model = _model(consecutive=False)
    feeds = _feeds({"pos": None})
    for feed in feeds:
        b, s = feed["x"].shape[:2]
        feed["pos"] = np.arange(b * s, dtype=np.int64).reshape(b, s)
    opt, report = check_ort_pattern(model, feeds, atol=1e-5)
    assert applied(report, ROTARY) == 0
    assert any("consecutive" in r for r in refused(report, ROTARY))
    assert op_types(opt).count("RotaryEmbedding") == 2


def test_weight_not_constant_refused():
    model, wk = _model(rotary=False, weight_input=True)
    opt, report = check_ort_pattern(model, _feeds({"wk": wk}), atol=1e-5)
    assert applied(report, PACKED) == 0
    assert any("constant" in r for r in refused(report, PACKED))
    assert op_types(opt).count("MatMul") == 3


def test_head_size_not_multiple_of_16_refused():
    res = optimize(_model(d=8), patterns="default+onnxruntime")
    opt, report = res.model, res.report
    assert applied(report, ROTARY) == 0
    assert any("multiple of 16" in r for r in refused(report, ROTARY))
    assert op_types(opt).count("RotaryEmbedding") == 2
