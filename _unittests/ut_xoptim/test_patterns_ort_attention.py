"""onnxruntime pattern: GroupQueryAttention for the attention with a cache transformers
exports; applied only when the mask is proven inside the causal mask of the attention's
cache and query lengths, checked against eager and the unfused model with onnxruntime
(batch 1 and 2, several query and cache lengths, left and right padding)."""

import collections

import numpy as np
import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

from experimental_experiment.torch_interpreter import to_onnx  # noqa: E402
from experimental_experiment.xoptim import optimize  # noqa: E402
from experimental_experiment.xoptim.testing import applied, refused, run_ort  # noqa: E402

NAME = "CausalAttentionToGroupQueryAttention"
H, KV, D = 4, 2, 8


class CachedAttention(torch.nn.Module):
    """sdpa over concat(cache, new) with repeated kv heads and a boolean mask:
    ``causal`` and ``offset`` choose the mask (kv <= past + q when both are True)."""

    def __init__(self, causal=True, offset=True):
        super().__init__()
        self.causal, self.offset = causal, offset

    def forward(self, q, k, v, past_k, past_v, mask):
        key, value = torch.cat([past_k, k], 2), torch.cat([past_v, v], 2)
        b, s, p = q.shape[0], q.shape[2], past_k.shape[2]
        pad = mask.bool()[:, None, None, :]
        if self.causal:
            kv_pos = torch.arange(p + s)
            q_pos = torch.arange(s) + (p if self.offset else 0)
            pad = (kv_pos[None, None, None, :] <= q_pos[None, None, :, None]) & pad
        rep = H // KV
        kr = key[:, :, None].expand(b, KV, rep, p + s, D).reshape(b, H, p + s, D)
        vr = value[:, :, None].expand(b, KV, rep, p + s, D).reshape(b, H, p + s, D)
        y = torch.nn.functional.scaled_dot_product_attention(q, kr, vr, attn_mask=pad)
        return y, key, value


def _inputs(batch, seq, past, padding=None, seed=0):
    gen = torch.Generator().manual_seed(seed)
    r = lambda *shape: torch.randn(*shape, generator=gen)  # noqa: E731
    mask = torch.ones((batch, past + seq), dtype=torch.int64)
    if padding == "left":
        mask[0, :3] = 0  # the first rows of batch 0 are fully masked when past == 0
    elif padding == "right":
        mask[-1, -2:] = 0
    return (
        r(batch, H, seq, D),
        r(batch, KV, seq, D),
        r(batch, KV, seq, D),
        r(batch, KV, past, D),
        r(batch, KV, past, D),
        mask,
    )


def _export(model):
    dims = {0: "batch", 2: "seq"}
    cache = {0: "batch", 2: "past"}
    ds = (dims, dims, dims, cache, cache, {0: "batch", 1: "total"})
    return to_onnx(model, _inputs(2, 3, 5), dynamic_shapes=ds, optimize=False)


SIZES = [
    (1, 1, 6, None),
    (2, 1, 9, None),
    (2, 3, 5, None),
    (1, 7, 0, None),
    (2, 4, 6, "left"),
    (2, 5, 0, "left"),
    (2, 3, 4, "right"),
    (2, 1, 6, "left"),
]


def test_causal_attention_is_fused_and_exact():
    model = CachedAttention()
    raw = _export(model)
    res = optimize(raw, patterns="default+onnxruntime")
    opt, report = res.model, res.report
    assert applied(report, NAME) == 1
    ops = collections.Counter(n.op_type for n in opt.graph.node)
    assert ops["GroupQueryAttention"] == 1 and ops["Softmax"] == 0 and ops["Concat"] == 0
    for i, (batch, seq, past, padding) in enumerate(SIZES):
        inputs = _inputs(batch, seq, past, padding, seed=i)
        feeds = {n.name: t.numpy() for n, t in zip(raw.graph.input, inputs)}
        with torch.no_grad():
            expected = [t.numpy() for t in model(*inputs)]
        unfused, got = run_ort(raw, feeds), run_ort(opt, feeds)
        for e, u, g in zip(expected, unfused, got):
            assert not np.isnan(g).any(), (batch, seq, past, padding)
            np.testing.assert_allclose(g, e, atol=1e-5)
            np.testing.assert_allclose(g, u, atol=1e-5)


@pytest.mark.parametrize(
    "causal,offset,reason",
    [
        (False, True, "no operand proven causal"),
        (True, False, "not built on the cache length and the query length"),
    ],
)
def test_mask_not_proven_is_refused(causal, offset, reason):
    raw = _export(CachedAttention(causal=causal, offset=offset))
    res = optimize(raw, patterns="default+onnxruntime")
    opt, report = res.model, res.report
    assert applied(report, NAME) == 0
    assert any(reason in r for r in refused(report, NAME)), refused(report, NAME)
    assert "GroupQueryAttention" not in {n.op_type for n in opt.graph.node}


def test_tiny_llama_with_cache_matches_eager():
    from experimental_experiment.bench.llm_exporters import (
        eager_inputs,
        export_to_onnx,
        make_feeds,
        make_llama,
        session_feeds,
    )

    config, model = make_llama("tiny")
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        path, _ = export_to_onnx(model, config, "default+onnxruntime", f"{tmp}/m.onnx")
        import onnx
        import onnxruntime

        onx = onnx.load(path)
        sess = onnxruntime.InferenceSession(path, providers=["CPUExecutionProvider"])
    ops = collections.Counter(n.op_type for n in onx.graph.node)
    assert ops["GroupQueryAttention"] == config.num_hidden_layers
    # the padding mask read through index grids is a Slice, the guard of the fully
    # masked rows and the sizes are computed once for every layer
    assert ops["GatherND"] == 0 and ops["Slice"] == 1, ops
    assert ops["ReduceMax"] == 1 and ops["Where"] == 1 + config.num_hidden_layers, ops
    names = [i.name for i in onx.graph.input]
    for batch, seq, past in [(1, 1, 17), (2, 5, 0), (2, 3, 4), (1, 9, 6)]:
        feeds = make_feeds(config, batch, seq, past, seed=batch + seq + past)
        if batch == 2:
            feeds["attention_mask"][0, :2] = 0  # left padding
        with torch.no_grad():
            out = model(**eager_inputs(feeds, config, model))
        got = sess.run(None, session_feeds(names, feeds, config.num_hidden_layers))
        np.testing.assert_allclose(got[0], out.logits.numpy(), atol=1e-4)
        cache = getattr(out, "past_key_values", None) or out.cache
        np.testing.assert_allclose(got[1], cache.layers[0].keys.numpy(), atol=1e-5)
