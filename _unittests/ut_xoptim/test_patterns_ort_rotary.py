"""onnxruntime pattern: RotaryEmbedding for the half rotation of transformers."""

import numpy as np
from onnx import TensorProto as T
from onnx import helper

from experimental_experiment.xoptim.patterns_ort._testing import check_ort_pattern
from experimental_experiment.xoptim.testing import applied, make_model, op_types, refused

F = T.FLOAT
N, D = 3, 8


def _inits():
    i64 = lambda *v: np.array(v, dtype=np.int64)  # noqa: E731
    return {
        "zero": i64(0),
        "half": i64(D // 2),
        "big": i64(np.iinfo(np.int64).max),
        "last": i64(-1),
        "one": i64(1),
        "ax1": i64(1),
    }


def _rotary_nodes(swap_halves=False, sin_angles="f"):
    """x * cos + rotate_half(x) * sin, cos and sin computed from the angles f."""
    first, second = ("s1", "s2") if not swap_halves else ("s2", "s1")
    return [
        helper.make_node("Concat", ["f", "f"], ["emb"], axis=-1),
        helper.make_node("Concat", [sin_angles, sin_angles], ["emb_s"], axis=-1),
        helper.make_node("Cos", ["emb"], ["cos3"]),
        helper.make_node("Sin", ["emb_s"], ["sin3"]),
        helper.make_node("Unsqueeze", ["cos3", "ax1"], ["cos"]),
        helper.make_node("Unsqueeze", ["sin3", "ax1"], ["sin"]),
        helper.make_node("Mul", ["x", "cos"], ["xc"]),
        helper.make_node("Slice", ["x", "zero", "half", "last", "one"], ["s1"]),
        helper.make_node("Slice", ["x", "half", "big", "last", "one"], ["s2"]),
        helper.make_node("Neg", [second], ["neg"]),
        helper.make_node("Concat", ["neg", first], ["rot"], axis=-1),
        helper.make_node("Mul", ["rot", "sin"], ["xs"]),
        helper.make_node("Add", ["xc", "xs"], ["y"]),
    ]


def _model(batch_of_angles=1, **kw):
    return make_model(
        _rotary_nodes(**kw),
        [
            ("x", F, ("b", N, "s", D)),
            ("f", F, (batch_of_angles, "s", D // 2)),
            ("g", F, (batch_of_angles, "s", D // 2)),
        ],
        [("y", F, ("b", N, "s", D))],
        _inits(),
    )


def _feeds(batch_of_angles=1):
    rnd = np.random.default_rng(0)
    feeds = []
    for b, s in [(2, 5), (1, 11)]:
        inv = 1.0 / (10000 ** (np.arange(0, D, 2) / D))
        f = np.arange(s)[None, :, None] * inv[None, None, :]
        f = np.tile(f, (b if batch_of_angles == "b" else 1, 1, 1)).astype(np.float32)
        feeds.append(
            {
                "x": rnd.standard_normal((b, N, s, D)).astype(np.float32),
                "f": f,
                "g": (f * 1.5).astype(np.float32),
            }
        )
    return feeds


def test_half_rotation_to_rotary_embedding():
    model = _model()
    opt, report = check_ort_pattern(model, _feeds(), atol=1e-5)
    assert len(model.graph.node) == 13
    assert op_types(opt) == ["Squeeze", "Cos", "Sin", "RotaryEmbedding"]
    assert applied(report, "HalfRotaryToRotaryEmbedding") == 1


def _feeds_per_batch():
    """Angles of different positions for every batch (a decoding step after caches
    of different lengths)."""
    rnd = np.random.default_rng(1)
    inv = 1.0 / (10000 ** (np.arange(0, D, 2) / D))
    feeds = []
    for b, s in [(2, 5), (3, 1), (1, 4)]:
        pos = rnd.integers(0, 50, (b, 1)) + np.arange(s)[None, :]
        f = (pos[:, :, None] * inv[None, None, :]).astype(np.float32)
        feeds.append({"x": rnd.standard_normal((b, N, s, D)).astype(np.float32), "f": f, "g": f})
    return feeds


def test_angles_per_batch_one_cache_row_per_token():
    model = _model(batch_of_angles="b")
    opt, report = check_ort_pattern(model, _feeds_per_batch(), atol=1e-5)
    assert op_types(opt).count("RotaryEmbedding") == 1
    assert "Neg" not in op_types(opt)
    assert applied(report, "HalfRotaryToRotaryEmbedding") == 1


def test_angles_of_another_batch_refused():
    model = _model(batch_of_angles="c")  # a batch dimension unrelated to the input's
    opt, report = check_ort_pattern(model, _feeds_per_batch()[2:])
    assert "RotaryEmbedding" not in op_types(opt)
    assert any("neither one batch" in r for r in refused(report, "HalfRotaryToRotaryEmbedding"))


def test_cos_sin_of_different_angles_refused():
    opt, report = check_ort_pattern(_model(sin_angles="g"), _feeds())
    assert "RotaryEmbedding" not in op_types(opt)
    assert any("same angles" in r for r in refused(report, "HalfRotaryToRotaryEmbedding"))


def test_other_rotation_not_fused():
    # concat(-x1, x2) is not rotate_half
    opt, _ = check_ort_pattern(_model(swap_halves=True), _feeds())
    assert "RotaryEmbedding" not in op_types(opt)
