"""Scaled dot-product attention converters against onnxruntime and eager torch."""

import pytest
import torch
import torch.nn.functional as F

from experimental_experiment.ext_test_case import OpModule, check_export
from experimental_experiment.torch_interpreter import ExportOptions

DS = {0: "batch", 2: "seq"}


def _qkv(dtype=torch.float32, heads=(4, 4), seqs=((5, 5), (7, 7)), e=8):
    sets = []
    for b, (lq, lk) in zip((2, 3), seqs):
        q = torch.randn(b, heads[0], lq, e).to(dtype)
        k = torch.randn(b, heads[1], lk, e).to(dtype)
        v = torch.randn(b, heads[1], lk, e).to(dtype)
        sets.append((q, k, v))
    return sets


def _tol(dtype):
    return dict(atol=1e-2, rtol=1e-2) if dtype != torch.float32 else {}


SDPA = {
    "plain": lambda q, k, v: F.scaled_dot_product_attention(q, k, v),
    "causal": lambda q, k, v: F.scaled_dot_product_attention(q, k, v, is_causal=True),
    "scale": lambda q, k, v: F.scaled_dot_product_attention(q, k, v, scale=0.3),
    "dropout_eval": lambda q, k, v: F.scaled_dot_product_attention(q, k, v, dropout_p=0.0),
}


@pytest.mark.parametrize("name", sorted(SDPA))
@pytest.mark.parametrize("dtype", [torch.float32, torch.float16])
def test_sdpa(name, dtype):
    check_export(OpModule(SDPA[name]), _qkv(dtype), dynamic_shapes=(DS, DS, DS), **_tol(dtype))


def test_sdpa_bfloat16():
    check_export(
        OpModule(SDPA["causal"]),
        _qkv(torch.bfloat16),
        dynamic_shapes=(DS, DS, DS),
        atol=2e-2,
        rtol=2e-2,
        use_reference=True,
    )


def test_sdpa_causal_different_lengths_static():
    # top-left aligned causal mask when L != S
    sets = _qkv(seqs=((3, 6), (3, 6)))
    check_export(OpModule(SDPA["causal"]), sets, dynamic_shapes=({0: "batch"},) * 3)


def test_sdpa_causal_different_lengths_dynamic():
    sets = _qkv(seqs=((3, 6), (5, 4)))
    ds = ({0: "batch", 2: "lq"}, {0: "batch", 2: "lk"}, {0: "batch", 2: "lk"})
    check_export(OpModule(SDPA["causal"]), sets, dynamic_shapes=ds)


@pytest.mark.parametrize("kind", ["bool", "float", "bool_4d"])
def test_sdpa_mask(kind):
    def fn(q, k, v, m):
        return F.scaled_dot_product_attention(q, k, v, attn_mask=m)

    sets = []
    for q, k, v in _qkv():
        lq, lk = q.shape[-2], k.shape[-2]
        if kind == "bool":
            m = torch.rand(lq, lk) > 0.3
            m[:, 0] = True  # no fully masked row
        elif kind == "float":
            m = torch.randn(lq, lk)
        else:
            m = torch.rand(q.shape[0], 1, lq, lk) > 0.3
            m[..., 0] = True
        sets.append((q, k, v, m))
    mds = {0: "seq", 1: "seq"} if kind != "bool_4d" else {0: "batch", 2: "seq", 3: "seq"}
    check_export(OpModule(fn), sets, dynamic_shapes=(DS, DS, DS, mds))


@pytest.mark.parametrize("kind", ["bool", "float"])
def test_sdpa_fully_masked_rows(kind):
    # torch returns zeros for a query row whose keys are all masked (not NaN)
    def fn(q, k, v, m):
        out = F.scaled_dot_product_attention(q, k, v, attn_mask=m)
        lse = torch.ops.aten._scaled_dot_product_flash_attention_for_cpu(
            q, k, v, attn_mask=m if kind == "float" else None
        )[1]
        return out, lse

    sets = []
    for q, k, v in _qkv():
        m = torch.rand(q.shape[-2], k.shape[-2]) > 0.3
        m[:, 0] = True
        m[1] = False
        if kind == "float":
            m = torch.zeros(m.shape).masked_fill(~m, -float("inf"))
        sets.append((q, k, v, m))
    check_export(OpModule(fn), sets, dynamic_shapes=(DS, DS, DS, {0: "seq", 1: "seq"}))


def test_sdpa_gqa():
    fn = OpModule(
        lambda q, k, v: F.scaled_dot_product_attention(q, k, v, enable_gqa=True, is_causal=True)
    )
    check_export(fn, _qkv(heads=(6, 2)), dynamic_shapes=(DS, DS, DS))


def test_sdpa_3d_dynamic_head_dim():
    fn = OpModule(lambda q, k, v: F.scaled_dot_product_attention(q, k, v))
    sets = [
        (torch.randn(2, 5, 8), torch.randn(2, 6, 8), torch.randn(2, 6, 3)),
        (torch.randn(3, 4, 6), torch.randn(3, 7, 6), torch.randn(3, 7, 5)),
    ]
    ds = ({0: "b", 1: "l", 2: "e"}, {0: "b", 1: "s", 2: "e"}, {0: "b", 1: "s", 2: "ev"})
    check_export(fn, sets, dynamic_shapes=ds)


@pytest.mark.parametrize("causal", [False, True])
def test_flash_attention_for_cpu(causal):
    def fn(q, k, v):
        return torch.ops.aten._scaled_dot_product_flash_attention_for_cpu(q, k, v, 0.0, causal)

    check_export(OpModule(fn), _qkv(), dynamic_shapes=(DS, DS, DS))


def test_flash_attention_for_cpu_mask_scale():
    def fn(q, k, v, m):
        return torch.ops.aten._scaled_dot_product_flash_attention_for_cpu(
            q, k, v, attn_mask=m, scale=0.2
        )

    sets = [(q, k, v, torch.randn(q.shape[0], 1, q.shape[2], k.shape[2])) for q, k, v in _qkv()]
    check_export(OpModule(fn), sets, dynamic_shapes=(DS, DS, DS, {0: "batch", 2: "seq", 3: "seq"}))


def test_attention_math():
    def fn(q, k, v):
        return torch.ops.aten._scaled_dot_product_attention_math(q, k, v, is_causal=True)

    check_export(OpModule(fn), _qkv(), dynamic_shapes=(DS, DS, DS))


def test_transformer_encoder_layer():
    layer = torch.nn.TransformerEncoderLayer(16, 4, 32, batch_first=True).eval()
    sets = [(torch.randn(2, 5, 16),), (torch.randn(3, 7, 16),)]
    check_export(layer, sets, dynamic_shapes=({0: "batch", 1: "seq"},))


def test_sdpa_decomposed():
    check_export(
        OpModule(SDPA["causal"]),
        _qkv(),
        dynamic_shapes=(DS, DS, DS),
        export_options=ExportOptions(decomposition_table="default"),
    )


def _kept_fraction(onx, sets):
    """Runs the model on q = k = 0, v = 1 (uniform probabilities 1 / S): every output is
    (kept keys) * 2 / S with p = 0.5, so out * S / 2 counts the kept keys."""
    from experimental_experiment.ext_test_case import run_onnx

    for q, k, v in sets:
        s = k.shape[-2]
        (out,) = run_onnx(onx, [torch.zeros_like(q), torch.zeros_like(k), torch.ones_like(v)])
        kept = torch.from_numpy(out) * s / 2
        torch.testing.assert_close(kept, kept.round(), atol=1e-4, rtol=0)
        assert 0.25 < kept.mean() / s < 0.75, kept.mean() / s


@pytest.mark.parametrize("kind", ["sdpa", "flash_cpu"])
def test_sdpa_dropout_is_random(kind):
    # torch applies dropout whenever dropout_p > 0 (no eval mode for sdpa): the
    # converter used to ignore it and silently return the result without dropout
    def fn(q, k, v):
        if kind == "sdpa":
            return F.scaled_dot_product_attention(q, k, v, dropout_p=0.5)
        return torch.ops.aten._scaled_dot_product_flash_attention_for_cpu(q, k, v, 0.5)[0]

    from experimental_experiment.torch_interpreter import to_onnx

    sets = _qkv(seqs=((5, 40), (7, 60)))
    dsk = {0: "batch", 2: "keys"}
    onx = to_onnx(OpModule(fn), sets[0], dynamic_shapes=(DS, dsk, dsk))
    assert "Dropout" in [n.op_type for n in onx.graph.node]
    _kept_fraction(onx, sets)


def test_attention_math_dropout_mask():
    def fn(q, k, v, m):
        return torch.ops.aten._scaled_dot_product_attention_math(
            q, k, v, dropout_p=0.3, dropout_mask=m
        )

    sets = [
        (q, k, v, torch.rand(q.shape[0], q.shape[1], q.shape[2], k.shape[2]) > 0.3)
        for q, k, v in _qkv()
    ]
    check_export(OpModule(fn), sets, dynamic_shapes=(DS, DS, DS, {0: "batch", 2: "seq", 3: "seq"}))


def _masks(kind, sets, fully_masked_row=False):
    out = []
    for q, k, v in sets:
        m = torch.rand(q.shape[0], 1, q.shape[-2], k.shape[-2]) > 0.3
        m[..., 0] = True
        if fully_masked_row:
            m[:, :, 1] = False
        if kind == "float":
            m = torch.zeros(m.shape).masked_fill(~m, -float("inf")) + torch.randn(m.shape)
        out.append((q, k, v, m))
    return out


@pytest.mark.parametrize(
    "case",
    ["plain", "causal", "scale", "gqa", "bool", "float", "bool_fully_masked", "float_fully_masked"],
)
@pytest.mark.parametrize("dtype", [torch.float32, torch.float16])
def test_sdpa_opset23_is_one_attention_node(case, dtype):
    """At opset 23 sdpa is ONNX Attention; rows whose keys are all masked stay 0 as in
    torch (a guard computed on the mask)."""
    if case in SDPA:
        fn, sets, ds = OpModule(SDPA[case]), _qkv(dtype), (DS, DS, DS)
    elif case == "gqa":
        fn = OpModule(lambda q, k, v: F.scaled_dot_product_attention(q, k, v, enable_gqa=True))
        sets, ds = _qkv(dtype, heads=(6, 2)), (DS, DS, DS)
    else:
        kind = case.split("_")[0]
        fn = OpModule(lambda q, k, v, m: F.scaled_dot_product_attention(q, k, v, attn_mask=m))
        sets = _masks(kind, _qkv(dtype), "fully" in case)
        sets = [(q, k, v, m if m.dtype == torch.bool else m.to(dtype)) for q, k, v, m in sets]
        ds = (DS, DS, DS, {0: "batch", 2: "seq", 3: "seq"})
    onx = check_export(fn, sets, dynamic_shapes=ds, target_opset=23, **_tol(dtype))
    ops = [n.op_type for n in onx.graph.node]
    assert ops.count("Attention") == 1 and "Softmax" not in ops and "MatMul" not in ops, ops


def test_sdpa_opset23_causal_with_mask_stays_decomposed():
    """The aten op accepts a mask and the causal flag together; both can empty a row
    (row 0 keeps only key 0, which the mask drops): the decomposed form handles it."""

    def fn(q, k, v, m):
        return torch.ops.aten.scaled_dot_product_attention(q, k, v, m, 0.0, True)

    sets = []
    for q, k, v in _qkv():
        m = torch.ones(q.shape[-2], k.shape[-2], dtype=torch.bool)
        m[0, 0] = False
        sets.append((q, k, v, m))
    onx = check_export(
        OpModule(fn), sets, dynamic_shapes=(DS, DS, DS, {0: "seq", 1: "seq"}), target_opset=23
    )
    assert "Attention" not in [n.op_type for n in onx.graph.node]
