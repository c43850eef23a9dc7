"""Per-class inputs and cases of the diffusers zoo that the generic builder cannot make:
a sequence packing text and image (Ideogram 4), a text of the length the model was
built for (Hunyuan-DiT), square latents (DiT), a class skipped with its reason."""

import pytest
import torch

from experimental_experiment.bench.zoo_diffusers import diffusers_available

pytestmark = pytest.mark.skipif(not diffusers_available(), reason="diffusers is not installed")


def test_packed_sequence_text_then_image():
    from experimental_experiment.bench.diffusers_inputs import (
        CHECK_SIZES,
        INPUT_OVERRIDES,
    )

    config = dict(in_channels=8, llm_features_dim=12)
    gen = torch.Generator().manual_seed(0)
    made = {
        k: f(config, CHECK_SIZES, gen)
        for k, f in INPUT_OVERRIDES["Ideogram4Transformer2DModel"].items()
    }
    seq, tokens = CHECK_SIZES["seq"], CHECK_SIZES["height"] * CHECK_SIZES["width"] // 4
    hidden, ds = made["hidden_states"]
    assert hidden.shape == (CHECK_SIZES["batch"], seq + tokens, 8)
    assert ds == {0: "batch", 1: "tokens"}
    indicator = made["indicator"][0]
    assert (indicator[:, :seq] == 3).all() and (indicator[:, seq:] == 2).all()
    positions = made["position_ids"][0]
    assert positions.shape == (CHECK_SIZES["batch"], seq + tokens, 3)
    # the last image token sits at the last row and column of the 2x2 patch grid
    last = positions[0, -1].tolist()
    assert last == [seq, CHECK_SIZES["height"] // 2 - 1, CHECK_SIZES["width"] // 2 - 1]


def test_static_text_length_and_square_latents():
    from experimental_experiment.bench.diffusers_cases import build_class_case
    from experimental_experiment.bench.zoo_cases import ZooCase

    data = build_class_case(ZooCase("HunyuanDiT2DModel", "transformer-2d"))
    text, check = data["inputs"]["encoder_hidden_states"], data["check_inputs"]
    # the learned padding has text_len tokens: the length is the same on both sizes
    assert text.shape[1] == check["encoder_hidden_states"].shape[1] == 4
    assert data["dynamic_shapes"]["encoder_hidden_states"] == {0: "batch"}
    assert check["hidden_states"].shape[0] != text.shape[0]

    data = build_class_case(ZooCase("DiTTransformer2DModel", "transformer-2d"))
    sample = data["check_inputs"]["hidden_states"]
    assert sample.shape[2] == sample.shape[3] != data["inputs"]["hidden_states"].shape[2]


def test_skipped_class_gives_its_reason():
    from experimental_experiment.bench.diffusers_cases import build_class_case
    from experimental_experiment.bench.diffusers_classes import DiffusersCaseError
    from experimental_experiment.bench.zoo_cases import ZooCase

    with pytest.raises(DiffusersCaseError, match="torchvision"):
        build_class_case(ZooCase("CosmosControlNetModel", "controlnet"))
