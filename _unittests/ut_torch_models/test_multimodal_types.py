"""Multimodal types the part-by-part export used to fail on, exported with their tiny
configuration and chained in onnxruntime against eager ``generate`` (8 greedy tokens)
on two prompt lengths, and the Pixtral vision tower on two image sizes."""

import numpy as np
import pytest
import torch

from experimental_experiment.torch_models.multimodal.cases import build_model
from experimental_experiment.torch_models.multimodal.export import (
    cache_layout,
    export_part,
)
from experimental_experiment.torch_models.multimodal.families import features_tensor
from experimental_experiment.torch_models.multimodal.parts import VisionEncoder
from experimental_experiment.torch_models.multimodal.run import session

pytestmark = pytest.mark.usefixtures("quiet_transformers")

#: type -> what used to fail
TYPES = {
    # the 3D positions are HunYuan-VL's (the model's get_rope_index), not Qwen-VL's
    "hunyuan_vl": "plain",
    # latent attention and an indexer: the cache has the layers of a prefill; the tiny
    # model ranks the end-of-sequence token first where generate(min_new_tokens) skips it
    "mistral_large4": "probed",
    # latent attention and an indexer, a vision attention with query/key norms
    "dots3_note": "probed",
    # convolution states: a decoder for the prompt, another one for one token
    "lfm3_vl": "hybrid",
    # the prompt kept apart from a sliding window (reference sliding-window attention):
    # prefill keys and values in the cache, a decoder for the prompt, another one after
    "unlimited_ocr": "reference",
}

#: layouts exported as two decoders, for the prompt and for one new token
TWO_DECODERS = ("hybrid", "reference")


@pytest.mark.parametrize("prompt", [(3, 4), (6, 2)])
@pytest.mark.parametrize("model_type", sorted(TYPES))
def test_generates_eager_tokens(model_type, prompt, eager_tokens_check):
    model, parts = eager_tokens_check(model_type, prompt)
    assert cache_layout(model) == TYPES[model_type]
    assert ("decoder_step" in parts.models) == (TYPES[model_type] in TWO_DECODERS)


@pytest.mark.parametrize("size", [(32, 32), (48, 32)])
def test_pixtral_vision_tower_at_two_image_sizes(size):
    """Mistral3's Pixtral tower reads the image size from ``image_sizes``: given as
    python integers (``python_constants``), it no longer becomes a data-dependent
    symbol torch.export cannot guard on."""
    model = build_model("mistral3")
    height, width = size
    pixels = torch.randn(1, 3, height, width)
    sizes = torch.tensor([[height, width]], dtype=torch.int64)
    vision = VisionEncoder(model, image_sizes=sizes)
    onx = export_part(vision, (pixels,))
    with torch.no_grad():
        expected = features_tensor(model.model.get_image_features(pixels, image_sizes=sizes))
    sess = session(onx)
    got = np.asarray(sess.run(None, {sess.get_inputs()[0].name: pixels.numpy()})[0])
    assert got.shape == tuple(expected.shape)
    np.testing.assert_allclose(got, expected.numpy(), atol=1e-4)
