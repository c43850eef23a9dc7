"""Multimodal types the part-by-part export used to fail on, exported with their tiny
configuration and chained in onnxruntime against eager ``generate`` (8 greedy tokens)
on two prompt lengths, and the Pixtral vision tower on two image sizes."""

import numpy as np
import pytest
import torch

from experimental_experiment.torch_models.multimodal.cases import build_model, build_multimodal
from experimental_experiment.torch_models.multimodal.export import (
    cache_layout,
    export_part,
    export_parts,
)
from experimental_experiment.torch_models.multimodal.parts import VisionEncoder, features_tensor
from experimental_experiment.torch_models.multimodal.run import check_generation, session

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
}

_EXPORTED: dict = {}


def _exported(model_type):
    if model_type not in _EXPORTED:
        model = build_model(model_type)
        _EXPORTED[model_type] = model, export_parts(build_multimodal(model_type, model=model))
    return _EXPORTED[model_type]


@pytest.mark.parametrize("prompt", [(3, 4), (6, 2)])
@pytest.mark.parametrize("model_type", sorted(TYPES))
def test_generates_eager_tokens(model_type, prompt):
    model, parts = _exported(model_type)
    assert cache_layout(model) == TYPES[model_type]
    assert ("decoder_step" in parts.models) == (TYPES[model_type] == "hybrid")
    case = build_multimodal(model_type, prompt=prompt, model=model, seed=0)
    report = check_generation(case, parts, steps=8)
    assert report["max_abs_diff"] < 1e-3, report["max_abs_diff"]
    assert report["equal_tokens"] == 8, (report["eager_tokens"], report["onnx_tokens"])


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
