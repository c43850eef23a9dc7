"""Image-text-to-text models without the LLaVA layout (image features at image tokens of
a decoder-only model), one per family, exported part by part and chained in
onnxruntime against eager ``generate`` (8 greedy tokens) on two prompt lengths:

* an image encoder-decoder (VisionEncoderDecoder) on Whisper's encoder + decoder path;
* a Q-Former model (InstructBLIP): an image token and the Q-Former prompt added;
* a language model with cross-attention layers (Mllama);
* a model merging the image in its forward (GIT): a prompt graph and a one-token graph.
"""

import pytest
import torch

from experimental_experiment.torch_models.multimodal.cases import build_model, build_multimodal
from experimental_experiment.torch_models.multimodal.export import export_parts
from experimental_experiment.torch_models.multimodal.families import (
    is_cross_attention_lm,
    is_image_seq2seq,
    is_prefill_merging,
)
from experimental_experiment.torch_models.multimodal.prefix import (
    build_prefill,
    check_prefill_generation,
    export_prefill_parts,
)
from experimental_experiment.torch_models.multimodal.run import check_generation
from experimental_experiment.torch_models.multimodal.seq2seq import (
    build_cross_attention,
    build_image_seq2seq,
    check_cross_attention_generation,
    export_cross_attention_parts,
)
from experimental_experiment.torch_models.multimodal.speech import (
    check_speech_generation,
    export_speech_parts,
)

pytestmark = pytest.mark.usefixtures("quiet_transformers")

_EXPORTED: dict = {}


def _check(report):
    assert report["max_abs_diff"] < 1e-3, report["max_abs_diff"]
    assert report["equal_tokens"] == 8, (report["eager_tokens"], report["onnx_tokens"])


def test_families_are_recognized():
    assert is_image_seq2seq("vision-encoder-decoder") and is_image_seq2seq("pix2struct")
    assert not is_image_seq2seq("llava")
    assert is_cross_attention_lm("mllama") and not is_cross_attention_lm("llava")
    assert is_prefill_merging("git") and is_prefill_merging("kosmos-2")
    assert not is_prefill_merging("llava") and not is_prefill_merging("blip-2")


@pytest.mark.parametrize("prompt", [1, 3])
def test_vision_encoder_decoder(prompt):
    if "ved" not in _EXPORTED:
        case = build_image_seq2seq("vision-encoder-decoder")
        _EXPORTED["ved"] = case.model, export_speech_parts(case)
    model, parts = _EXPORTED["ved"]
    assert set(parts.models) == {"encoder", "decoder"}
    case = build_image_seq2seq("vision-encoder-decoder", prompt=prompt, model=model, seed=prompt)
    _check(check_speech_generation(case, parts, steps=8))


@pytest.mark.parametrize("prompt", [1, 3])
def test_blip_text_prompt(prompt):
    # BLIP's generate reads input_ids (the text prompt) besides the pixels
    if "blip" not in _EXPORTED:
        case = build_image_seq2seq("blip")
        _EXPORTED["blip"] = case.model, export_speech_parts(case)
    model, parts = _EXPORTED["blip"]
    case = build_image_seq2seq("blip", prompt=prompt, model=model, seed=prompt)
    assert "input_ids" in case.generate_inputs()
    _check(check_speech_generation(case, parts, steps=8))


@pytest.mark.parametrize("prompt", [1, 3])
def test_t5gemma2_encoder_reads_image_tokens(prompt):
    # T5Gemma 2: the image token is image_token_index, the vision configuration is the
    # encoder's (config.encoder.vision_config); the encoder merges the image features at
    # the image tokens of its prompt
    if "t5gemma2" not in _EXPORTED:
        case = build_image_seq2seq("t5gemma2")
        _EXPORTED["t5gemma2"] = case.model, export_speech_parts(case)
    model, parts = _EXPORTED["t5gemma2"]
    case = build_image_seq2seq("t5gemma2", prompt=prompt, model=model, seed=prompt)
    ids = case.encoder_inputs["input_ids"]
    assert int((ids == model.config.encoder.image_token_index).sum()) > 0
    _check(check_speech_generation(case, parts, steps=8))


@pytest.mark.parametrize("prompt", [(3, 4), (6, 2)])
def test_instructblip(prompt):
    if "iblip" not in _EXPORTED:
        model = build_model("instructblip")
        _EXPORTED["iblip"] = model, export_parts(build_multimodal("instructblip", model=model))
    model, parts = _EXPORTED["iblip"]
    case = build_multimodal("instructblip", prompt=prompt, model=model)
    assert "qformer_input_ids" in case.constants
    assert int((case.input_ids == model.config.image_token_index).sum()) == 32
    _check(check_generation(case, parts, steps=8))


@pytest.mark.parametrize("prompt", [(3, 4), (6, 2)])
def test_mllama_cross_attention(prompt):
    if "mllama" not in _EXPORTED:
        case = build_cross_attention("mllama")
        _EXPORTED["mllama"] = case.model, export_cross_attention_parts(case)
    model, parts = _EXPORTED["mllama"]
    case = build_cross_attention("mllama", prompt=prompt, model=model)
    _check(check_cross_attention_generation(case, parts, steps=8))
    # the tiny model has a cross-attention layer: the image changes the logits
    with torch.no_grad():
        inputs = dict(case.vision_inputs)
        first = model(input_ids=case.input_ids, **inputs).logits
        inputs["pixel_values"] = inputs["pixel_values"] * 2 + 1
        other = model(input_ids=case.input_ids, **inputs).logits
    assert (first - other).abs().max() > 1e-3


@pytest.mark.parametrize("prompt", [(3, 4), (6, 2)])
def test_git_prefill_and_step(prompt):
    if "git" not in _EXPORTED:
        case = build_prefill("git")
        _EXPORTED["git"] = case.model, export_prefill_parts(case)
    model, parts = _EXPORTED["git"]
    assert set(parts.models) == {"prefill", "step"}
    case = build_prefill("git", prompt=prompt, model=model)
    _check(check_prefill_generation(case, parts, steps=8))
