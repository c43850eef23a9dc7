"""Image inputs of the families whose ``get_image_features`` needs more than the pixels
of one image (``multimodal/image_inputs.py``): one type per family exported part by
part and chained in onnxruntime against eager ``generate`` (8 greedy tokens) on two
prompt lengths; the vision parts reading the image size as data (``ConstantTensor``)
exported at two image sizes."""

import numpy as np
import pytest
import torch

from experimental_experiment.torch_models.multimodal.cases import build_model
from experimental_experiment.torch_models.multimodal.errors import MultimodalPartsError
from experimental_experiment.torch_models.multimodal.export import export_part
from experimental_experiment.torch_models.multimodal.families import (
    features_tensor,
    image_features_function,
)
from experimental_experiment.torch_models.multimodal.parts import VisionEncoder
from experimental_experiment.torch_models.multimodal.run import session

pytestmark = pytest.mark.usefixtures("quiet_transformers")

#: type -> the inputs it needed
TYPES = {
    # tiles of any resolution: grid pinpoints scaled to the tiny tower, image_sizes
    "llava_next": "pixel_values (1, tiles, c, h, w), image_sizes",
    # a thinker's get_rope_index finds the image after vision_start_token_id
    "qwen2_5_omni_thinker": "vision start/end ids, no mm_token_type_ids",
    # SigLIP2 any size: flattened patches, spatial_shapes, pixel_attention_mask
    "lfm2_vl": "spatial_shapes, pixel_attention_mask",
    # a grid of patches given as small images
    "paddleocr_vl": "pixel_values (patches, c, p, p), image_grid_thw",
    # two resolutions, SAM global attention layers inside the shrunk tower
    "deepseek_vl_hybrid": "high_res_pixel_values",
    # tiles selected with a boolean mask (a ConstantTensor index)
    "granite_docling": "pixel_values (1, tiles, c, h, w), pixel_attention_mask (1, tiles)",
    # the projector concatenates vision layers past the shrunk tower
    "vipllava": "vision_feature_layer inside the tower",
    # paired rotary sections, a resampler reading the grid (ConstantTensor)
    "ernie4_5_vl_moe": "mrope_section h == w, image_grid_thw constant",
}


@pytest.mark.parametrize("prompt", [(3, 4), (6, 2)])
@pytest.mark.parametrize("model_type", sorted(TYPES))
def test_generates_eager_tokens(model_type, prompt, eager_tokens_check):
    eager_tokens_check(model_type, prompt)


_MODELS: dict = {}


def _vision_at(model_type, size):
    """The vision part of ``model_type`` exported for an image of ``size`` and its
    features, with eager ``get_image_features``'s."""
    from experimental_experiment.torch_models.multimodal.cases import make_vision_inputs

    if model_type not in _MODELS:
        _MODELS[model_type] = build_model(model_type)
    model = _MODELS[model_type]
    inputs, constants = make_vision_inputs(model, image_size=size)
    onx = export_part(VisionEncoder(model, **constants), tuple(inputs.values()))
    fct = image_features_function(model)
    with torch.no_grad():
        expected = features_tensor(fct(**inputs, **constants))
    sess = session(onx)
    feeds = dict(zip([i.name for i in sess.get_inputs()], [v.numpy() for v in inputs.values()]))
    return np.asarray(sess.run(None, feeds)[0]), expected.numpy()


@pytest.mark.parametrize("size", [(64, 64), (64, 128)])
@pytest.mark.parametrize("model_type", ["minicpmv4_6", "nemotron_h_omni"])
def test_vision_reading_image_size_as_data(model_type, size):
    """MiniCPM-V 4.6 (window merger, target_sizes) and Nemotron-H-Omni (RADIO pixel
    shuffle, image_grid_hw) compute sizes from their size tensors: as
    ``ConstantTensor`` they are integers while exported, no data-dependent symbol."""
    got, expected = _vision_at(model_type, size)
    assert got.shape == expected.shape
    np.testing.assert_allclose(got, expected, atol=1e-4)


def test_layer_injection_is_refused():
    """Granite-4-Vision's image features go into decoder layers: refused with the cause."""
    with pytest.raises(MultimodalPartsError, match="injected into decoder layers"):
        build_model("granite4_vision")
