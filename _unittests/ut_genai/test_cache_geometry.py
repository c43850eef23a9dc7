"""onnxruntime-genai packages of decoders whose cache tensors differ in geometry: a
multi-head latent attention (DeepSeek V3, MiniCPM3) caches a compressed latent as its
keys and the rotary part of the keys as its values, one head each, two sizes; a sparse
attention (DeepSeek V3.2) caches the keys of its token indexer too. The package packs
the indexer keys with the values and pads every cache tensor to one geometry
(genai_config.json has one head size); genai then generates the tokens of eager
``generate`` and onnxruntime computes the eager logits whatever the padded columns
hold."""

import json
import os
from typing import Any

import numpy as np
import onnx
import pytest
import torch
import transformers

from experimental_experiment.genai import package_model
from experimental_experiment.genai.cache_geometry import (
    LayerCache,
    common_geometry,
    pad_cache_geometry,
)
from experimental_experiment.genai.generate import eager_greedy_sequence, greedy_sequence
from experimental_experiment.torch_models.causal_lm import perturb_norm_weights

og = pytest.importorskip("onnxruntime_genai")

NEW_TOKENS = 16
VOCAB = 1000
_LATENT: dict[str, Any] = dict(
    vocab_size=VOCAB,
    hidden_size=64,
    intermediate_size=96,
    num_hidden_layers=2,
    num_attention_heads=4,
    num_key_value_heads=4,
    kv_lora_rank=32,
    q_lora_rank=32,
    qk_rope_head_dim=16,
    qk_nope_head_dim=16,
    v_head_dim=16,
    max_position_embeddings=128,
    bos_token_id=0,
    eos_token_id=1,
    pad_token_id=0,
)


def latent_decoder(arch: str, seed: int = 0):
    """A tiny decoder with a latent attention (keys of size 32, values of size 16),
    for deepseek_v32 with a token indexer keeping 4 tokens (keys of size 24)."""
    if arch == "deepseek_v32":
        config = transformers.DeepseekV32Config(
            **_LATENT,
            moe_intermediate_size=32,
            n_routed_experts=4,
            num_experts_per_tok=2,
            n_group=1,
            topk_group=1,
            first_k_dense_replace=1,
            index_topk=4,  # fewer than the prompts: the attention is sparse
            index_head_dim=24,  # values and indexer keys: 16 + 24 > 32
            index_n_heads=8,  # 2 heads: relu scores tie at 0, topk picks either
        )
    elif arch == "deepseek_v3":
        config = transformers.DeepseekV3Config(
            **_LATENT,
            moe_intermediate_size=32,
            n_routed_experts=4,
            num_experts_per_tok=2,
            n_group=1,
            topk_group=1,
            first_k_dense_replace=1,  # layer 0 dense, layer 1 a mixture of experts
        )
    else:
        config = transformers.MiniCPM3Config(**_LATENT)
    torch.manual_seed(seed)
    model = transformers.AutoModelForCausalLM.from_config(config, attn_implementation="sdpa")
    return perturb_norm_weights(model.eval(), seed + 1)


def eager_tokens(model, ids: torch.Tensor) -> list[int]:
    return eager_greedy_sequence(model, ids, NEW_TOKENS)


def _prompt(length: int) -> torch.Tensor:
    return torch.randint(3, VOCAB, (1, length), generator=torch.Generator().manual_seed(length))


@pytest.fixture(scope="module")
def deepseek_package(tmp_path_factory):
    import logging
    import warnings

    logger = logging.getLogger("transformers")
    level = logger.level
    logger.setLevel(logging.ERROR)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model = latent_decoder("deepseek_v3")
        out = str(tmp_path_factory.mktemp("mla") / "pkg")
        report = package_model(model, out, progress=False)
    logger.setLevel(level)
    return model, out, report


@pytest.mark.parametrize("arch", ["deepseek_v3", "minicpm3", "deepseek_v32"])
def test_latent_attention_generates_eager_tokens(arch, tmp_path, quiet_transformers):
    model = latent_decoder(arch)
    out = str(tmp_path / "pkg")
    package_model(model, out, progress=False)
    for length in (5, 11):
        ids = _prompt(length)
        expected = eager_tokens(model, ids)
        assert len(expected) == length + NEW_TOKENS  # no end of sequence on the way
        assert greedy_sequence(out, ids[0].tolist(), NEW_TOKENS) == expected, (arch, length)


def test_latent_attention_config(deepseek_package):
    _, out, report = deepseek_package
    with open(os.path.join(out, "genai_config.json")) as f:
        cfg = json.load(f)
    dec = cfg["model"]["decoder"]
    # the cache: one head, keys (the latent) of size 32 and values (rotary keys) of 16
    assert (dec["num_key_value_heads"], dec["head_size"], dec["num_hidden_layers"]) == (1, 32, 2)
    # the values are padded, genai cannot write them in place
    assert cfg["search"]["past_present_share_buffer"] is False
    assert report.op_types.get("Pad") == 2 and report.op_types.get("Slice", 0) >= 2
    onx = onnx.load(os.path.join(out, "model.onnx"), load_external_data=False)
    for value in list(onx.graph.input)[3:] + list(onx.graph.output)[1:]:
        dims = value.type.tensor_type.shape.dim
        assert (dims[1].dim_value, dims[3].dim_value) == (1, 32), value


@pytest.mark.parametrize(("past", "seq"), [(0, 7), (6, 3)])
def test_latent_attention_logits_match_eager(deepseek_package, past, seq):
    """onnxruntime on the packaged model (padded cache, garbage in the padded columns)
    gives the eager logits and the eager cache, padded with zeros."""
    import onnxruntime as ort
    from transformers.cache_utils import DynamicCache

    model, out, _ = deepseek_package
    ids = _prompt(past + seq)
    gen = torch.Generator().manual_seed(past)
    with torch.no_grad():
        cache = DynamicCache()
        if past:
            model(input_ids=ids[:, :past], past_key_values=cache, use_cache=True)
        feeds = {}
        layers: list[Any] = list(cache.layers) if past else []
        for i, layer in enumerate(layers):
            for kind, tensor in (("key", layer.keys), ("value", layer.values)):
                padded = torch.randn(1, 1, past, 32, generator=gen)
                padded[..., : tensor.shape[-1]] = tensor
                feeds[f"past_key_values.{i}.{kind}"] = padded.numpy()
        expected = model(
            input_ids=ids[:, past:],
            attention_mask=torch.ones_like(ids),
            position_ids=torch.arange(past, past + seq)[None],
            past_key_values=cache,
            use_cache=True,
        )
    for i in range(2):
        for kind in ("key", "value"):
            feeds.setdefault(f"past_key_values.{i}.{kind}", np.zeros((1, 1, 0, 32), np.float32))
    feeds.update(
        input_ids=ids[:, past:].numpy(),
        attention_mask=np.ones((1, past + seq), np.int64),
        position_ids=np.arange(past, past + seq, dtype=np.int64)[None],
    )
    sess = ort.InferenceSession(os.path.join(out, "model.onnx"), providers=["CPUExecutionProvider"])
    names = [o.name for o in sess.get_outputs()]
    got = {n: np.asarray(v) for n, v in zip(names, sess.run(None, feeds))}
    np.testing.assert_allclose(got["logits"], expected.logits.numpy(), atol=1e-4, rtol=1e-4)
    layers = list(expected.past_key_values.layers)
    for i, layer in enumerate(layers):
        for kind, tensor in (("key", layer.keys), ("value", layer.values)):
            present = got[f"present.{i}.{kind}"]
            assert present.shape == (1, 1, past + seq, 32)
            size = tensor.shape[-1]
            np.testing.assert_allclose(present[..., :size], tensor.numpy(), atol=1e-5)
            assert not present[..., size:].any()  # zeros in the padded columns


def test_pad_cache_geometry_layers():
    """Layers of different heads and sizes: every cache tensor takes the largest."""
    import onnxruntime as ort
    from onnx import TensorProto, helper

    def info(name, heads, size):
        return helper.make_tensor_value_info(name, TensorProto.FLOAT, ["b", heads, "p", size])

    shapes = [LayerCache((2, 8), (2, 8)), LayerCache((4, 4), (1, 8))]
    inputs, outputs, nodes = [], [], []
    for i, layer in enumerate(shapes):
        for kind, (h, s) in zip(("key", "value"), layer.slots()):
            past, present = f"past_key_values.{i}.{kind}", f"present.{i}.{kind}"
            inputs.append(info(past, h, s))
            outputs.append(info(present, h, s))
            nodes.append(helper.make_node("Neg", [past], [present]))
    onx = helper.make_model(
        helper.make_graph(nodes, "g", inputs, outputs),
        opset_imports=[helper.make_opsetid("", 18)],
    )
    assert common_geometry(shapes) == (4, 8)
    # layer 0: keys and values padded in heads, layer 1: keys in size, values in heads
    assert pad_cache_geometry(onx, shapes) == 4
    onnx.checker.check_model(onx)
    sess = ort.InferenceSession(onx.SerializeToString(), providers=["CPUExecutionProvider"])
    rng = np.random.default_rng(0)
    feeds = {i.name: rng.standard_normal((1, 4, 3, 8)).astype(np.float32) for i in inputs}
    names = [o.name for o in sess.get_outputs()]
    got = {n: np.asarray(v) for n, v in zip(names, sess.run(None, feeds))}
    for i, layer in enumerate(shapes):
        for kind, (h, s) in zip(("key", "value"), layer.slots()):
            present = got[f"present.{i}.{kind}"]
            past = feeds[f"past_key_values.{i}.{kind}"]
            np.testing.assert_array_equal(present[:, :h, :, :s], -past[:, :h, :, :s])
            assert present.shape == (1, 4, 3, 8)
            assert not present[:, h:].any() and not present[..., s:].any()
    assert pad_cache_geometry(onx, [LayerCache((4, 8), (4, 8))] * 2) == 0  # nothing to pad


def test_sparse_attention_packs_indexer_keys(tmp_path, quiet_transformers):
    """The indexer keys (batch, length, 24) travel in the value slot after the values
    (size 16 + 24 = 40, the keys of size 32 are padded to 40); onnxruntime gives the
    eager logits."""
    import onnxruntime as ort
    from transformers.cache_utils import DynamicCache

    from experimental_experiment.genai.export import probe_cache

    model = latent_decoder("deepseek_v32")
    assert probe_cache(model) == [LayerCache((1, 32), (1, 16), 24)] * 2
    out = str(tmp_path / "pkg")
    package_model(model, out, progress=False)
    sess = ort.InferenceSession(os.path.join(out, "model.onnx"), providers=["CPUExecutionProvider"])
    assert [i.name for i in sess.get_inputs()][3:] == [
        "past_key_values.0.key",
        "past_key_values.1.key",
        "past_key_values.0.value",
        "past_key_values.1.value",
    ]
    past, seq = 6, 3
    ids = _prompt(past + seq)
    with torch.no_grad():
        cache = DynamicCache(config=model.config)
        model(input_ids=ids[:, :past], past_key_values=cache, use_cache=True)
        feeds = {}
        layers: list[Any] = list(cache.layers)
        for i, layer in enumerate(layers):
            key = torch.zeros(1, 1, past, 40)
            key[..., :32] = layer.keys
            feeds[f"past_key_values.{i}.key"] = key.numpy()
            value = torch.zeros(1, 1, past, 40)
            value[..., :16] = layer.values
            value[..., 16:] = layer.indexer_keys[:, None]
            feeds[f"past_key_values.{i}.value"] = value.numpy()
        expected = model(
            input_ids=ids[:, past:],
            attention_mask=torch.ones_like(ids),
            past_key_values=cache,
            use_cache=True,
        )
    feeds.update(
        input_ids=ids[:, past:].numpy(),
        attention_mask=np.ones((1, past + seq), np.int64),
        position_ids=np.arange(past, past + seq, dtype=np.int64)[None],
    )
    names = [o.name for o in sess.get_outputs()]
    got = {n: np.asarray(v) for n, v in zip(names, sess.run(None, feeds))}
    np.testing.assert_allclose(got["logits"], expected.logits.numpy(), atol=1e-4, rtol=1e-4)
    layers = list(expected.past_key_values.layers)
    for i, layer in enumerate(layers):
        key, value = got[f"present.{i}.key"], got[f"present.{i}.value"]
        assert key.shape == value.shape == (1, 1, past + seq, 40)
        np.testing.assert_allclose(key[..., :32], layer.keys.numpy(), atol=1e-5)
        assert not key[..., 32:].any()
        np.testing.assert_allclose(value[..., :16], layer.values.numpy(), atol=1e-5)
        np.testing.assert_allclose(value[0, 0, :, 16:], layer.indexer_keys[0].numpy(), atol=1e-5)
