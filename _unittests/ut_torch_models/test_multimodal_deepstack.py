"""Models adding vision features to the hidden states of their first decoder layers at
the image tokens (deepstack: Qwen3-VL): the vision part returns them, the decoder part
takes them with the image positions, and the chained ONNX parts generate the tokens of
eager ``generate`` on two prompt lengths. The tiny tower keeps the deepstack layers
within its depth, so the check is not vacuous."""

import onnx
import pytest
import torch

from experimental_experiment.torch_interpreter.patches.patch_models import _deepstack_by_gather
from experimental_experiment.torch_models.multimodal.cases import build_model
from experimental_experiment.torch_models.multimodal.families import (
    DEEPSTACK_INPUTS,
    deepstack_language_model,
)

pytestmark = pytest.mark.usefixtures("quiet_transformers")


def test_gather_places_features_as_the_boolean_index_does():
    torch.manual_seed(0)
    hidden = torch.randn(2, 5, 4)
    mask = torch.tensor([[True, False, True, False, False], [False, True, True, True, False]])
    embeds = torch.randn(int(mask.sum()), 4)
    expected = hidden.clone()
    expected[mask, :] = hidden[mask, :] + embeds  # transformers' eager code
    got = _deepstack_by_gather(None)(None, hidden, mask, embeds)
    torch.testing.assert_close(got, expected, atol=0, rtol=0)
    # no image position (a decode step): unchanged
    none = torch.zeros_like(mask)
    torch.testing.assert_close(_deepstack_by_gather(None)(None, hidden, none, embeds[:1]), hidden)


def test_tiny_tower_adds_deepstack_features():
    model = build_model("qwen3_vl")
    vc = model.config.vision_config
    assert vc.deepstack_visual_indexes and max(vc.deepstack_visual_indexes) < vc.depth
    lm = deepstack_language_model(model)
    assert lm is not None
    # the features change what the decoder computes: a part forgetting them is wrong
    torch.manual_seed(0)
    hidden = model.config.text_config.hidden_size
    embeds = torch.randn(1, 4, hidden)
    mask = torch.tensor([[True, True, False, False]])
    features = [torch.randn(2, hidden) for _ in vc.deepstack_visual_indexes]
    with torch.no_grad():
        plain = lm(inputs_embeds=embeds).last_hidden_state
        added = lm(
            inputs_embeds=embeds, visual_pos_masks=mask, deepstack_visual_embeds=features
        ).last_hidden_state
    assert (plain - added).abs().max() > 1e-2


@pytest.mark.parametrize("prompt", [(3, 4), (6, 2)])
def test_qwen3_vl_generates_eager_tokens(prompt, eager_tokens_check):
    model, parts = eager_tokens_check("qwen3_vl", prompt)
    vision = parts.models["vision"]
    assert len(vision.graph.output) == 2  # features and deepstack features
    decoder_inputs = [i.name for i in parts.models["decoder"].graph.input]
    assert set(DEEPSTACK_INPUTS) <= set(decoder_inputs)
    onnx.checker.check_model(parts.models["decoder"])
