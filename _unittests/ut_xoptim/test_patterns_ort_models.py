"""onnxruntime patterns on a tiny LlamaModel exported by to_onnx: same results as the
unoptimized model, fewer nodes."""

import collections

import numpy as np
import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

from experimental_experiment.torch_interpreter import to_onnx  # noqa: E402
from experimental_experiment.xbuilder import OptimizationOptions  # noqa: E402
from experimental_experiment.xoptim import optimize_model  # noqa: E402
from experimental_experiment.xoptim.testing import run_ort  # noqa: E402

DS = {"input_ids": {0: "batch", 1: "seq"}, "attention_mask": {0: "batch", 1: "seq"}}


@pytest.fixture(scope="module")
def llama():
    config = transformers.LlamaConfig(
        hidden_size=32,
        num_hidden_layers=2,
        vocab_size=256,
        intermediate_size=64,
        max_position_embeddings=128,
        num_attention_heads=4,
        num_key_value_heads=2,
    )
    config._attn_implementation = "sdpa"
    config.use_cache = False
    torch.manual_seed(0)
    model = transformers.LlamaModel(config).eval()
    with torch.no_grad():  # normalization weights different from one
        for p in model.parameters():
            p.add_(torch.randn(p.shape) * 0.05)
    return model


def _inputs(batch, seq):
    gen = torch.Generator().manual_seed(batch * 100 + seq)
    return (
        torch.randint(0, 256, (batch, seq), generator=gen),
        torch.ones((batch, seq), dtype=torch.int64),
    )


def _export(model, **kw):
    ids, mask = _inputs(2, 8)
    with torch.no_grad():
        return to_onnx(model, (ids,), dict(attention_mask=mask), dynamic_shapes=DS, **kw)


def _check_same(model, reference, optimized):
    for batch, seq in [(2, 8), (3, 13)]:
        ids, mask = _inputs(batch, seq)
        feeds = {"input_ids": ids.numpy(), "attention_mask": mask.numpy()}
        expected, got = run_ort(reference, feeds), run_ort(optimized, feeds)
        np.testing.assert_allclose(got[0], expected[0], atol=1e-4, rtol=1e-4)
        with torch.no_grad():
            eager = model(ids, attention_mask=mask).last_hidden_state.numpy()
        np.testing.assert_allclose(got[0], eager, atol=1e-4, rtol=1e-4)


def test_llama_optimize_model(llama):
    raw = _export(llama, optimize=False)
    opt = optimize_model(raw, patterns="default+onnxruntime")
    default = optimize_model(raw, patterns="default")
    _check_same(llama, raw, opt)
    counts = collections.Counter(n.op_type for n in opt.graph.node)
    assert counts["SimplifiedLayerNormalization"] == 5  # 2 per layer + the final norm
    assert counts["FusedMatMul"] == 2  # q @ k^T * scale, one per layer
    assert len(opt.graph.node) < len(default.graph.node) < len(raw.graph.node)


def test_llama_to_onnx_with_ort_patterns(llama):
    """Inside to_onnx the shapes are symbolic (batch, seq): the rotary embedding can be
    proved to take positions 0..seq-1 and is fused too."""
    raw = _export(llama, optimize=False)
    opt = _export(llama, options=OptimizationOptions(patterns="default+onnxruntime"))
    _check_same(llama, raw, opt)
    counts = collections.Counter(n.op_type for n in opt.graph.node)
    assert counts["RotaryEmbedding"] == 4  # q and k in each layer
    assert counts["SimplifiedLayerNormalization"] == 5
    assert "ReduceMean" not in counts and "Neg" not in counts
