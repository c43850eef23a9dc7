"""Tiny transformers models (random weights, 2 layers) exported with to_onnx with and
without a DynamicCache, checked with onnxruntime against eager on a second batch,
sequence and cache length; multi-step greedy decoding fed by the ONNX model's own
cache. Run with ``-n 2`` (about 2 minutes on 2 cores)."""

import copy

import onnx
import pytest
import torch

from experimental_experiment.torch_models.decoding_check import check_greedy_decoding
from experimental_experiment.torch_models.llm_helper import (
    TINY_ARCHITECTURES,
    cache_argument_name,
    get_tiny_llm,
    make_llm_inputs,
    make_seq2seq_inputs,
)
from experimental_experiment.torch_models.llm_models import (
    CHECK_SIZES,
    EXPORT_SIZES,
    check_onnx,
    export_model,
)

DECODERS = [a for a, kind in TINY_ARCHITECTURES.items() if kind == "decoder"]


pytestmark = pytest.mark.usefixtures("quiet_transformers")


def _export_and_check(arch, with_cache, config_kwargs=None, check_sizes=CHECK_SIZES):
    data = get_tiny_llm(arch, with_cache=with_cache, config_kwargs=config_kwargs, **EXPORT_SIZES)
    other = get_tiny_llm(
        arch, with_cache=with_cache, config_kwargs=config_kwargs, seed=1, **check_sizes
    )
    onx = export_model(
        data["model"], copy.deepcopy(data["inputs"]), data["dynamic_shapes"], "to_onnx"
    )
    check_onnx(data["model"], onx, other["inputs"], atol=1e-4)
    return onx


def _dims(value_info):
    return [d.dim_param or d.dim_value for d in value_info.type.tensor_type.shape.dim]


@pytest.mark.parametrize("with_cache", [False, True])
@pytest.mark.parametrize("arch", DECODERS)
def test_decoder(arch, with_cache):
    onx = _export_and_check(arch, with_cache)
    inputs = {i.name: _dims(i) for i in onx.graph.input}
    assert inputs["input_ids"] == ["batch", "seq"]
    if with_cache:
        assert _dims(onx.graph.input[-1])[0] == "batch"
        key = inputs["past_key_values_key_0"]
        assert key[0] == "batch" and key[2] == "past", key
        assert "past_key_values_value_1" in inputs
        # logits then the present keys and values, their length is past + seq
        assert len(onx.graph.output) == 5
        assert _dims(onx.graph.output[1])[2] in ("past+seq", "seq+past")


@pytest.mark.parametrize("arch", ["mistral", "gemma2", "gemma3"])
def test_sliding_window_smaller_than_cache(arch):
    """The window (6) is shorter than the checked total length (9 + 4): the mask applies
    it, the cache is not specialized to the window."""
    _export_and_check(
        arch, True, config_kwargs=dict(sliding_window=6), check_sizes=dict(batch=3, seq=4, past=9)
    )


@pytest.mark.parametrize("arch", ["bert", "vit"])
def test_encoder(arch):
    onx = _export_and_check(arch, False)
    assert _dims(onx.graph.input[0])[0] == "batch"


def test_t5_with_cache():
    onx = _export_and_check("t5", True)
    names = [i.name for i in onx.graph.input]
    assert "past_key_values_self_attention_cache_key_0" in names
    assert "past_key_values_cross_attention_cache_value_1" in names


@pytest.mark.parametrize("arch", ["llama", "qwen2", "gpt2"])
def test_greedy_decoding(arch):
    data = get_tiny_llm(arch, **EXPORT_SIZES)
    onx = export_model(
        data["model"], copy.deepcopy(data["inputs"]), data["dynamic_shapes"], "to_onnx"
    )
    input_ids = torch.randint(0, 1000, (2, 5), generator=torch.Generator().manual_seed(3))
    report = check_greedy_decoding(data["model"], onx, input_ids, steps=8)
    assert report["same_tokens"], report
    assert len(report["diffs"]) == 8
    assert report["max_abs_diff"] < 1e-4, report
    assert report["ok"]


def test_greedy_decoding_detects_a_wrong_cache():
    """The check fails when the model returns a wrong cache (values of the last layer
    zeroed): the first step matches, the next ones do not."""
    data = get_tiny_llm("llama", **EXPORT_SIZES)
    onx = export_model(
        data["model"], copy.deepcopy(data["inputs"]), data["dynamic_shapes"], "to_onnx"
    )
    last = onx.graph.output[-1].name
    onx.graph.node.append(onnx.helper.make_node("Mul", [last, "zero_bad"], ["bad_present"]))
    onx.graph.initializer.append(onnx.numpy_helper.from_array(torch.zeros(()).numpy(), "zero_bad"))
    onx.graph.output[-1].name = "bad_present"
    input_ids = torch.randint(0, 1000, (2, 5), generator=torch.Generator().manual_seed(3))
    report = check_greedy_decoding(data["model"], onx, input_ids, steps=3)
    assert report["diffs"][0] < 1e-4
    assert report["diffs"][1] > 1e-4
    assert not report["ok"]


def test_make_llm_inputs():
    data = get_tiny_llm("qwen2", batch=2, seq=3, past=5)
    inputs, ds = make_llm_inputs(data["config"], 3, 4, 7, model=data["model"])
    assert inputs["input_ids"].shape == (3, 4)
    assert inputs["attention_mask"].shape == (3, 11)
    assert inputs["position_ids"].tolist()[0] == [7, 8, 9, 10]
    name = cache_argument_name(data["model"])  # cache or past_key_values
    assert inputs[name].layers[1].keys.shape == (3, 2, 7, 8)
    assert len(ds[name]) == 4
    inputs, ds = make_llm_inputs(data["config"], 3, 4, with_cache=False)
    assert name not in inputs and inputs["attention_mask"].shape == (3, 4)
    with pytest.raises(ValueError, match="unknown architecture"):
        get_tiny_llm("unknown")


def test_make_seq2seq_inputs():
    data = get_tiny_llm("t5", batch=2, seq=3, past=5)
    model = data["model"]
    inputs, ds = make_seq2seq_inputs(data["config"], 3, 4, 6, model=model)
    assert inputs["input_ids"].shape == (3, 6)  # encoder sequence: seq + 2
    assert inputs["decoder_input_ids"].shape == (3, 4)
    name = cache_argument_name(model)
    cache = inputs[name]
    assert cache.self_attention_cache.layers[0].keys.shape[2] == 6  # past
    assert cache.cross_attention_cache.layers[0].keys.shape[2] == 6  # encoder length
    assert ds["input_ids"] == {0: "batch", 1: "encoder_seq"} and len(ds[name]) == 2
    with torch.no_grad():
        out = model(**inputs)
    assert out.logits.shape[:2] == (3, 4)
    inputs, ds = make_seq2seq_inputs(data["config"], 2, 3, with_cache=False, model=model)
    assert name not in inputs and name not in ds


def test_dynamic_rope():
    """rope_type="dynamic" rescales the frequencies beyond max_position_embeddings (8)
    with a data-dependent test: exported with 8 positions, checked with 9 + 4."""
    kw = dict(
        rope_parameters=dict(rope_type="dynamic", factor=2.0, rope_theta=10000.0),
        max_position_embeddings=8,
    )
    _export_and_check("llama", True, config_kwargs=kw, check_sizes=dict(batch=3, seq=4, past=9))


def test_greedy_decoding_beyond_the_sliding_window():
    """Gemma 2 alternates sliding (window 6) and full layers: 5 + 8 tokens go past the
    window, the exported model (full caches, windowed mask) matches ``generate``
    (cropped sliding caches)."""
    data = get_tiny_llm("gemma2", config_kwargs=dict(sliding_window=6), **EXPORT_SIZES)
    onx = export_model(
        data["model"], copy.deepcopy(data["inputs"]), data["dynamic_shapes"], "to_onnx"
    )
    input_ids = torch.randint(0, 1000, (2, 5), generator=torch.Generator().manual_seed(3))
    report = check_greedy_decoding(data["model"], onx, input_ids, steps=8)
    assert report["ok"], report


def test_mixture_of_experts():
    """Mixtral: the experts run through transformers' ``grouped_mm`` custom op unless
    the patch maps it to ``batched_mm``."""
    import transformers

    config = transformers.AutoConfig.for_model(
        "mixtral",
        hidden_size=32,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        head_dim=8,
        vocab_size=1000,
        intermediate_size=32,
        num_local_experts=4,
        num_experts_per_tok=2,
    )
    torch.manual_seed(0)
    model = transformers.AutoModelForCausalLM.from_config(config).eval()
    inputs, ds = make_llm_inputs(config, **EXPORT_SIZES, model=model)
    onx = export_model(model, copy.deepcopy(inputs), ds, "to_onnx")
    other, _ = make_llm_inputs(config, **CHECK_SIZES, model=model)
    check_onnx(model, onx, other)


def test_padding_and_single_token():
    """Exported with batch 2 and 3 tokens: runs with left padding, and with a batch of
    one and a single token (the decoding step)."""
    data = get_tiny_llm("llama", **EXPORT_SIZES)
    onx = export_model(
        data["model"], copy.deepcopy(data["inputs"]), data["dynamic_shapes"], "to_onnx"
    )
    other = get_tiny_llm("llama", seed=1, **CHECK_SIZES)["inputs"]
    other["attention_mask"][0, :3] = 0
    check_onnx(data["model"], onx, other)
    check_onnx(data["model"], onx, get_tiny_llm("llama", batch=1, seq=1, past=7)["inputs"])
