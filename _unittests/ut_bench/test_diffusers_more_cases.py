"""Diffusers classes given a tiny configuration or the inputs their forward needs
(spatial and temporal transformers, video UNets and ControlNets, Qwen-Image, LTX-Video,
Stable Cascade, Stable Audio 3...): they build and run eagerly on the export and check
sizes; the static dimensions and the skipped classes carry their reason. No export
here."""

import warnings

import pytest
import torch

from experimental_experiment.bench.zoo_diffusers import diffusers_available

pytestmark = pytest.mark.skipif(not diffusers_available(), reason="diffusers is not installed")


def _build(case_name: str) -> dict:
    from experimental_experiment.bench.diffusers_cases import build_class_case
    from experimental_experiment.bench.diffusers_classes import list_diffusers_cases

    (case,) = list_diffusers_cases([case_name])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return build_class_case(case)


def _eager(data: dict, key: str) -> list[torch.Tensor]:
    with torch.no_grad():
        return list(data["model"](**data[key]))


@pytest.mark.parametrize(
    "case_name",
    [
        "Transformer2DModel",
        "UNetSpatioTemporalConditionModel",
        "UNetMotionModel",
        "QwenImageTransformer2DModel",
        "LTXVideoTransformer3DModel",
        "Lumina2Transformer2DModel",
        "LatteTransformer3DModel",
        "UNet1DModel",
        "TransformerTemporalModel",
        "StableCascadeUNet",
        "StableAudio3DiTModel",
        "UNetControlNetXSModel",
        "SparseControlNetModel",
        "QwenImageControlNetModel",
        "WanVACETransformer3DModel",
        "LuminaNextDiT2DModel",
        "UVit2DModel",
        "MMAudioVocoder",
        "LongCatAudioDiTTransformer",
        "PRXTransformer2DModel",
        "Krea2Transformer2DModel",
        "NucleusMoEImageTransformer2DModel",
        "MiniMaxMusic3ConditionEncoder",
        "MiniMaxMusic3RVQDepthDecoder",
        "MiniMaxMusic3Transformer1DModel",
        "QwenImage21Transformer2DModel",
        "OmniGenTransformer2DModel",
        "WanAnimateTransformer3DModel",
    ],
)
def test_case_builds_and_runs_on_both_sizes(case_name):
    data = _build(case_name)
    for key in ("inputs", "check_inputs"):
        outputs = _eager(data, key)
        assert outputs and all(torch.isfinite(o).all() for o in outputs)
    # every dynamic axis names a dimension of its input
    for name, axes in data["dynamic_shapes"].items():
        assert all(a < data["inputs"][name].dim() for a in axes)
    # the model is small: a tiny configuration, not the default one
    assert sum(p.numel() for p in data["model"].parameters()) < 3_000_000


def test_motion_unet_text_is_repeated_for_each_frame():
    data = _build("UNetMotionModel")
    for key in ("inputs", "check_inputs"):
        sample, text = data[key]["sample"], data[key]["encoder_hidden_states"]
        assert text.shape[0] == sample.shape[0] * sample.shape[2]
    assert data["dynamic_shapes"]["encoder_hidden_states"][0] == "batch_frames"


def test_temporal_transformer_and_latte_keep_the_frames_static():
    from experimental_experiment.bench.diffusers_classes import STATIC_FRAMES

    data = _build("TransformerTemporalModel")
    assert "TransformerTemporalModel" in STATIC_FRAMES
    frames = data["model"].fixed["num_frames"]
    for key in ("inputs", "check_inputs"):
        assert data[key]["hidden_states"].shape[0] % frames == 0
    data = _build("LatteTransformer3DModel")
    assert (
        data["inputs"]["hidden_states"].shape[2] == data["check_inputs"]["hidden_states"].shape[2]
    )
    assert "frames" not in data["dynamic_shapes"]["hidden_states"].values()


def test_qwen_image_size_is_static_and_timestep_a_fraction():
    from experimental_experiment.bench.diffusers_classes import STATIC_SIZE

    assert "QwenImageTransformer2DModel" in STATIC_SIZE
    data = _build("QwenImageTransformer2DModel")
    export, check = data["inputs"], data["check_inputs"]
    # same tokens (the size of img_shapes), another batch
    assert export["hidden_states"].shape[1] == check["hidden_states"].shape[1]
    assert export["hidden_states"].shape[0] != check["hidden_states"].shape[0]
    assert data["dynamic_shapes"]["hidden_states"] == {0: "batch"}
    (frames, h, w) = data["model"].fixed["img_shapes"][0]
    assert frames * h * w == export["hidden_states"].shape[1]
    assert float(export["timestep"].max()) < 1


def test_ltx_video_coordinates_follow_the_tokens():
    data = _build("LTXVideoTransformer3DModel")
    for key in ("inputs", "check_inputs"):
        coords = data[key]["video_coords"]
        assert coords.shape == (
            data[key]["hidden_states"].shape[0],
            3,
            data[key]["hidden_states"].shape[1],
        )
    assert data["dynamic_shapes"]["video_coords"] == {0: "batch", 2: "tokens"}


@pytest.mark.parametrize(
    "case_name",
    [
        "ZImageTransformer2DModel",
        "ZImageControlNetModel",
        "T5FilmDecoder",
        "WanAnimate2Transformer3DModel",
    ],
)
def test_list_inputs_are_skipped_with_their_reason(case_name):
    from experimental_experiment.bench.diffusers_classes import DiffusersCaseError

    with pytest.raises(DiffusersCaseError, match="Python list"):
        _build(case_name)
