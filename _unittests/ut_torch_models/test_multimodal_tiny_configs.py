"""Multimodal types whose tiny configuration the zoo's generic shrinking breaks,
repaired by ``multimodal.tiny_configs``: one type per repair, exported part by part and
chained in onnxruntime against eager ``generate`` (8 greedy tokens) on two prompt
lengths; the types without a generation path fail early with their reason."""

import numpy as np
import pytest
import torch

from experimental_experiment.torch_models.multimodal.cases import build_model, build_multimodal
from experimental_experiment.torch_models.multimodal.errors import MultimodalPartsError
from experimental_experiment.torch_models.multimodal.export import (
    cache_layout,
    export_part,
)
from experimental_experiment.torch_models.multimodal.parts import VisionEncoder
from experimental_experiment.torch_models.multimodal.run import session
from experimental_experiment.torch_models.multimodal.tiny_configs import (
    tiny_multimodal_config,
)

pytestmark = pytest.mark.usefixtures("quiet_transformers")

#: type -> what the repair is
TYPES = {
    # no vision configuration by default, patches with (x, y) positions, no per-layer
    # embeddings
    "gemma4": "vision_config",
    # pixel-shuffle adapter of the shrunk sizes, the projector in the vision part
    "llama4": "pixel_shuffle",
    # flattened patches into a linear layer
    "fuyu": "linear_patches",
    # a VQ-VAE codebook mapped to the vocabulary
    "chameleon": "vq_vocabulary",
    # patches as images (patches, channels, patch, patch) with their grid
    "kimi_k25": "conv_patches",
    # pooled crops, features added to the image token embeddings
    "molmo2": "pooled_crops",
    # rotary parameters per layer type the default leaves empty
    "cohere_compass": "rope_per_layer_type",
    # per-stage lists, merged projector sizes, grid parameter names
    "muse_spark": "stage_lists",
}


@pytest.mark.parametrize("prompt", [(3, 4), (6, 2)])
@pytest.mark.parametrize("model_type", sorted(TYPES))
def test_generates_eager_tokens(model_type, prompt, eager_tokens_check):
    # logits multiplied by 100 (sharpen_logits): every type within 1e-4
    eager_tokens_check(model_type, prompt)


def test_token_block_vision_inputs():
    """Inkling 2 takes one block of ``patch * merge`` pixels per language model token
    (channels last) and a grid counted in tokens; its vision part exported (its hybrid
    decoder takes a minute to export) matches eager."""
    case = build_multimodal("inkling2")
    pixels = case.vision_inputs["pixel_values"]
    vc = case.model.config.vision_config
    block = vc.patch_size * vc.spatial_merge_size
    assert tuple(pixels.shape) == (4, block, block, vc.num_channels)
    assert case.constants["image_grid_thw"].tolist() == [[1, 2, 2]]
    vision = VisionEncoder(case.model, **case.constants)
    with torch.no_grad():
        expected = vision(pixels)
    sess = session(export_part(vision, (pixels,)))
    got = np.asarray(sess.run(None, {sess.get_inputs()[0].name: pixels.numpy()})[0])
    assert got.shape == (4, case.model.config.get_text_config(decoder=True).hidden_size)
    np.testing.assert_allclose(got, expected.numpy(), atol=1e-4)


def test_dictionary_repairs_before_validation():
    """The configuration classes validate these fields: the shrinking left them
    inconsistent (a ValueError before any repair)."""
    cosmos = tiny_multimodal_config("cosmos3_edge")
    rope = cosmos.get_text_config(decoder=True).rope_parameters
    assert sum(rope["mrope_section"]) == cosmos.get_text_config(decoder=True).head_dim // 2
    molmo = tiny_multimodal_config("molmo2")
    n = molmo.vision_config.num_hidden_layers
    assert all(-n <= i < n for i in molmo.adapter_config.vision_feature_layer)
    assert len(set(molmo.adapter_config.vision_feature_layer)) == 2
    assert molmo.image_token_id < molmo.get_text_config(decoder=True).vocab_size
    spark = tiny_multimodal_config("muse_spark").audio_config
    assert len(spark.hidden_sizes) == spark.num_hidden_layers


def test_routing_and_windows_left_unset():
    ocr = tiny_multimodal_config("deepseek_ocr2").get_text_config(decoder=True)
    assert ocr.num_experts_per_tok == 2
    assert ocr.mlp_layer_types == ["dense"] + ["sparse"] * (ocr.num_hidden_layers - 1)
    step = tiny_multimodal_config("step3p7").get_text_config(decoder=True)
    assert step.sliding_window == step.max_position_embeddings


@pytest.mark.parametrize(
    "model_type,reason",
    [
        ("pi0", "generates no text"),
        ("diffusion_gemma", "takes no image"),  # refused first for reading text only
    ],
)
def test_no_token_generation(model_type, reason):
    with pytest.raises(MultimodalPartsError, match=reason):
        build_model(model_type)


def test_encoder_decoder_is_refused_with_its_reason():
    """T5Gemma 2 builds and generates in eager mode (its image size comes from the
    vision configuration of its encoder), the decoder part refuses it."""
    case = build_multimodal("t5gemma2")
    assert tuple(case.vision_inputs["pixel_values"].shape[-2:]) == (32, 32)
    with torch.no_grad(), pytest.raises(MultimodalPartsError, match="encoder-decoder"):
        cache_layout(case.model)
