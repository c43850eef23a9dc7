"""The inputs ``multimodal.parts.VisionEncoder`` precomputes from the grid of patches
(``precomputed_vision_kwargs``) replace what the tower computes itself: eager features
equal to ``get_image_features``'s without them, and Kimi K2.5's vision part (its
temporal merge reads a data-dependent count since transformers 5.25) exported at two
image sizes against eager."""

import numpy as np
import pytest
import torch

from experimental_experiment.torch_models.multimodal.cases import build_model, make_vision_inputs
from experimental_experiment.torch_models.multimodal.export import export_part
from experimental_experiment.torch_models.multimodal.families import (
    features_tensor,
    image_features_function,
)
from experimental_experiment.torch_models.multimodal.parts import VisionEncoder
from experimental_experiment.torch_models.multimodal.run import session

pytestmark = pytest.mark.usefixtures("quiet_transformers")

_MODELS: dict = {}


def _model(model_type):
    if model_type not in _MODELS:
        _MODELS[model_type] = build_model(model_type)
    return _MODELS[model_type]


def _eager_features(model, inputs, constants):
    with torch.no_grad():
        return features_tensor(image_features_function(model)(**inputs, **constants))


@pytest.mark.parametrize(
    "model_type,keys",
    [
        # the merge size is written in the call (1), the tower has none; the pooling index
        ("kimi_k25", {"position_ids", "cu_seqlens", "temporal_merge_index"}),
        ("qwen3_vl", {"position_ids", "cu_seqlens"}),
    ],
)
def test_precomputed_inputs_are_the_towers(model_type, keys):
    model = _model(model_type)
    inputs, constants = make_vision_inputs(model)
    vision = VisionEncoder(model, **constants)
    with torch.no_grad():
        got = vision.features(*inputs.values())
    expected = _eager_features(model, inputs, constants)
    np.testing.assert_allclose(got.numpy(), expected.numpy(), atol=1e-6, rtol=0)
    assert set(vision.precomputed) == keys


@pytest.mark.parametrize("size", [(32, 32), (32, 64)])
def test_kimi_vision_part_at_two_sizes(size):
    """Every patch an image ``(patches, 3, patch, patch)``, the grid a constant."""
    model = _model("kimi_k25")
    patch = model.config.vision_config.patch_size
    gh, gw = size[0] // patch, size[1] // patch
    gen = torch.Generator().manual_seed(0)
    inputs = {"pixel_values": torch.randn(gh * gw, 3, patch, patch, generator=gen)}
    constants = {"image_grid_thw": torch.tensor([[1, gh, gw]], dtype=torch.int64)}
    sess = session(export_part(VisionEncoder(model, **constants), tuple(inputs.values())))
    feeds = dict(zip([i.name for i in sess.get_inputs()], [v.numpy() for v in inputs.values()]))
    got = np.asarray(sess.run(None, feeds)[0])
    expected = _eager_features(model, inputs, constants).numpy()
    assert got.shape == expected.shape == (size[0] * size[1] // 256, expected.shape[-1])
    np.testing.assert_allclose(got, expected, atol=1e-4)
