"""VAEs of the diffusers zoo whose generic tiny configuration or inputs did not fit
(widths below the 32 groups of their norms, 1-D audio, frames as a Python int, an
image VAE in a 5-D layout, a fixed token grid) build and run eagerly on the export and
check sizes; the VAEs that cannot are skipped with their reason. No export here."""

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
        "AutoencoderKLTemporalDecoder.encode",
        "AutoencoderKLTemporalDecoder.decode",
        "AutoencoderKLMochi.encode",
        "AutoencoderKLMochi.decode",
        "VQModel.decode",
        "ConsistencyDecoderVAE.encode",
        "AutoencoderOobleck.encode",
        "AutoencoderOobleck.decode",
        "AutoencoderKLLTX2Video.encode",
        "AutoencoderKLLTX2Video.decode",
        "AutoencoderKLQwenImage21.encode",
        "AutoencoderKLQwenImage21.decode",
        "AutoencoderKLKVAEAudio.encode",
        "AutoencoderKLKVAEAudio.decode",
        "AutoencoderKLMiniMaxH3Audio.encode",
        "AutoencoderKLMiniMaxH3Audio.decode",
        "AutoencoderRAE.encode",
        "AutoencoderRAE.decode",
        "LongCatAudioDiTVae.encode",
        "MMAudioVAE.encode",
        "MMAudioVAE.decode",
    ],
)
def test_vae_builds_and_runs_on_both_sizes(case_name):
    data = _build(case_name)
    for key in ("inputs", "check_inputs"):
        outputs = _eager(data, key)
        assert outputs and all(torch.isfinite(o).all() for o in outputs)
    axes = set()
    for name, dims in data["dynamic_shapes"].items():
        export, check = data["inputs"][name], data["check_inputs"][name]
        assert all(a < export.dim() for a in dims)
        # every dynamic axis takes another size in the check
        assert all(export.shape[a] != check.shape[a] for a in dims)
        axes |= set(dims.values())
    assert "batch" in axes


@pytest.mark.parametrize(
    "case_name", ["AutoencoderOobleck.encode", "MMAudioVAE.encode", "AutoencoderKLKVAEAudio.decode"]
)
def test_audio_vae_length_is_dynamic(case_name):
    data = _build(case_name)
    (dims,) = data["dynamic_shapes"].values()
    assert dims[0] == "batch" and "length" in dims.values()


def test_temporal_decoder_frames_as_batch():
    from experimental_experiment.bench.diffusers_classes import STATIC_FRAMES

    data = _build("AutoencoderKLTemporalDecoder.decode")
    frames = data["model"].fixed["num_frames"]
    assert data["inputs"]["z"].shape[0] == 2 * frames
    assert data["check_inputs"]["z"].shape[0] == 3 * frames
    assert "frames static" in STATIC_FRAMES["AutoencoderKLTemporalDecoder.decode"]


def test_qwen_image21_one_static_frame():
    for case_name in ("AutoencoderKLQwenImage21.encode", "AutoencoderKLQwenImage21.decode"):
        data = _build(case_name)
        (name,) = data["inputs"]
        assert data["inputs"][name].shape[2] == data["check_inputs"][name].shape[2] == 1
        assert set(data["dynamic_shapes"][name].values()) == {"batch", "height", "width"}


def test_rae_latent_grid_is_static():
    data = _build("AutoencoderRAE.decode")
    assert data["dynamic_shapes"] == {"z": {0: "batch"}}
    assert data["inputs"]["z"].shape[2:] == data["check_inputs"]["z"].shape[2:]


def test_longcat_encoder_does_not_sample():
    data = _build("LongCatAudioDiTVae.encode")
    assert data["model"].fixed["sample_posterior"] is False


def test_mochi_and_ltx2_frame_counts():
    data = _build("AutoencoderKLMochi.encode")
    assert (data["inputs"]["x"].shape[2], data["check_inputs"]["x"].shape[2]) == (13, 19)
    data = _build("AutoencoderKLLTX2Video.decode")
    assert (data["inputs"]["z"].shape[2], data["check_inputs"]["z"].shape[2]) == (2, 3)


def test_random_and_unbuildable_vaes_are_skipped():
    from experimental_experiment.bench.diffusers_classes import DiffusersCaseError

    # the consistency decoder draws its starting noise inside decode
    with pytest.raises(DiffusersCaseError, match="random"):
        _build("ConsistencyDecoderVAE.decode")
    with pytest.raises(DiffusersCaseError, match="only tiled"):
        _build("AutoencoderKLAllegro.encode")
    with pytest.raises(DiffusersCaseError, match="protein"):
        _build("RFD4ProteinaAutoencoder.decode")
