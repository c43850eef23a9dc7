"""Multimodal models exported part by part (vision or audio encoder, embedding merge,
decoder with a cache) generate, chained in onnxruntime, the 8 greedy tokens eager
``generate`` gives: a Qwen2.5-VL-like model on two image sizes and two prompts, Whisper
on two prompts and batch sizes."""

from types import SimpleNamespace

import numpy as np
import pytest
import torch

from experimental_experiment.errors import ExportError
from experimental_experiment.torch_models.multimodal.cases import (
    build_model,
    build_multimodal,
)
from experimental_experiment.torch_models.multimodal.errors import MultimodalPartsError
from experimental_experiment.torch_models.multimodal.export import export_parts
from experimental_experiment.torch_models.multimodal.parts import EmbeddingMerge, VisionEncoder
from experimental_experiment.torch_models.multimodal.run import (
    check_generation,
    mrope_positions,
)
from experimental_experiment.torch_models.multimodal.speech import (
    build_speech,
    build_speech_model,
    check_speech_generation,
    export_speech_parts,
)


@pytest.fixture(scope="module")
def qwen():
    """The model, its merge and decoder graphs (valid for every image size)."""
    model = build_model("qwen2_5_vl")
    case = build_multimodal("qwen2_5_vl", model=model)
    return model, export_parts(case, parts=("merge", "decoder"))


@pytest.mark.parametrize("image_size,prompt", [((32, 32), (3, 4)), ((32, 64), (5, 2))])
def test_qwen2_5_vl_generates_eager_tokens(qwen, image_size, prompt):
    model, shared = qwen
    case = build_multimodal("qwen2_5_vl", image_size=image_size, prompt=prompt, model=model)
    parts = export_parts(case, parts=("vision",))  # the grid of patches is a constant
    parts.models.update(shared.models)
    report = check_generation(case, parts, steps=8)
    assert report["margin"] > 100 * report["max_abs_diff"], report["margin"]
    assert report["equal_tokens"] == 8, (report["eager_tokens"], report["onnx_tokens"])


def test_mrope_positions_match_transformers():
    model = build_model("qwen2_5_vl")
    case = build_multimodal("qwen2_5_vl", image_size=(32, 64), prompt=(2, 3), model=model)
    expected, delta = model.model.get_rope_index(
        case.input_ids,
        mm_token_type_ids=case.generate_kwargs["mm_token_type_ids"],
        image_grid_thw=case.constants["image_grid_thw"],
    )
    got, got_delta = mrope_positions(
        case.input_ids.numpy(),
        model.config.image_token_id,
        [(1, 4, 8)],
        model.config.vision_config.spatial_merge_size,
    )
    np.testing.assert_array_equal(expected.numpy(), got)
    np.testing.assert_array_equal(delta.numpy().ravel(), got_delta)


def test_merge_places_features_at_image_tokens():
    model = build_model("llava")
    merge = EmbeddingMerge(model)
    token = model.config.image_token_id
    ids = torch.tensor([[5, token, token, 7], [token, 3, 4, token]])
    features = torch.arange(4 * 64, dtype=torch.float32).reshape(4, 64)
    out = merge(ids, features)
    torch.testing.assert_close(out[0, 1], features[0])
    torch.testing.assert_close(out[1, 3], features[3])
    torch.testing.assert_close(out[0, 0], model.get_input_embeddings()(ids)[0, 0])


def test_missing_parts_raise_typed_error():
    with pytest.raises(MultimodalPartsError, match="get_image_features"):
        VisionEncoder(torch.nn.Linear(2, 2))
    assert issubclass(MultimodalPartsError, ExportError)
    with pytest.raises(MultimodalPartsError, match="not an image-text-to-text"):
        build_model("llama")


def test_per_layer_embeddings_are_refused_before_export():
    # Gemma 4 E2B/E4B look up per-layer embeddings from the token ids: a decoder part
    # taking embeddings cannot, the error says so before any capture
    from transformers import Gemma4ForConditionalGeneration

    from experimental_experiment.torch_models.multimodal.parts import Decoder
    from experimental_experiment.torch_models.multimodal.tiny_configs import (
        tiny_multimodal_config,
    )

    config = tiny_multimodal_config("gemma4")
    config.get_text_config(decoder=True).hidden_size_per_layer_input = 8
    model = Gemma4ForConditionalGeneration(config).eval()
    with pytest.raises(MultimodalPartsError, match="per-layer embeddings"):
        Decoder(model)


@pytest.fixture(scope="module")
def whisper():
    """The model and its parts (dynamic batch, prompt and cache length)."""
    model = build_speech_model("whisper")
    return model, export_speech_parts(build_speech("whisper", model=model))


@pytest.mark.parametrize("prompt,batch", [(1, 1), (3, 2)])
def test_whisper_generates_eager_tokens(whisper, prompt, batch):
    model, parts = whisper
    case = build_speech("whisper", prompt=prompt, batch=batch, model=model, seed=prompt)
    report = check_speech_generation(case, parts, steps=8)
    assert report["margin"] > 100 * report["max_abs_diff"], report["margin"]
    assert report["equal_tokens"] == 8, (report["eager_tokens"], report["onnx_tokens"])


class _NewNames(torch.nn.Module):  # transformers >= 5.24
    def forward(
        self, inputs_embeds, attention_mask=None, position_ids=None, cache=None, use_cache=None
    ):
        return SimpleNamespace(logits=inputs_embeds + 1, cache=cache)


class _OldNames(torch.nn.Module):  # transformers < 5.24
    def forward(
        self,
        inputs_embeds,
        attention_mask=None,
        position_ids=None,
        past_key_values=None,
        use_cache=None,
    ):
        return SimpleNamespace(logits=inputs_embeds + 1, past_key_values=past_key_values)


@pytest.mark.parametrize("cls", [_NewNames, _OldNames])
def test_decoder_finds_the_cache_argument_by_role(cls):
    from experimental_experiment.torch_models.multimodal.parts import Decoder

    x = torch.zeros(1, 2, 3)
    logits, cache = Decoder(cls())(x, None, None, "the cache")
    assert cache == "the cache"
    assert torch.equal(logits, x + 1)
