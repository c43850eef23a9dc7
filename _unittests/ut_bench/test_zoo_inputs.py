"""Inputs of the zoo's cases: feature sizes read from the audio encoder's configuration,
sequences long enough for models that downsample them, and the input layouts of
codebook, patchified-image, image-text, composite encoder-decoder and text-to-speech
models; every batch dimension stays dynamic."""

import pytest
import torch

from experimental_experiment.bench.zoo_cases import EXPORT_SIZES, build_case, list_cases
from experimental_experiment.bench.zoo_configs import tiny_config
from experimental_experiment.bench.zoo_inputs import audio_feature_dim, seq_factor


@pytest.mark.parametrize(
    "model_type,dim",
    [
        ("canary", 128),  # encoder_config.num_mel_bins
        ("granite_speech5_ctc", 320),  # 80 mel bins, 4 frames stacked
        ("wav2vec2-bert", 160),  # feature_projection_input_dim
        ("fun_asr_nano", 560),  # audio_config: 80 mel bins, 7 frames stacked
        ("speech_to_text", 80),  # input_feat_per_channel * input_channels
    ],
)
def test_audio_feature_dim(model_type, dim):
    assert audio_feature_dim(tiny_config(model_type)) == dim


def test_seq_factor():
    assert seq_factor(tiny_config("canine")) == 4
    assert seq_factor(tiny_config("funnel")) == 2 ** (len(tiny_config("funnel").block_sizes) - 1)
    assert seq_factor(tiny_config("bert")) == 1


def _case(model_type):
    return build_case({c.model_type: c for c in list_cases()}[model_type])


def _batch_is_dynamic(data):
    for name, dims in data["dynamic_shapes"].items():
        if isinstance(data["inputs"][name], torch.Tensor):
            assert 0 in dims, name


def test_musicgen_has_one_row_per_codebook():
    data = _case("musicgen")
    ids, mask = data["inputs"]["input_ids"], data["inputs"]["attention_mask"]
    assert ids.shape[0] == mask.shape[0] * data["model"].config.num_codebooks
    _batch_is_dynamic(data)


def test_siglip2_gets_patches():
    data = _case("siglip2")
    inputs, config = data["inputs"], data["model"].config.vision_config
    b, n, d = inputs["pixel_values"].shape
    assert d == config.num_channels * config.patch_size**2
    assert int(inputs["spatial_shapes"].prod(dim=1)[0]) == n
    _batch_is_dynamic(data)


@pytest.mark.parametrize("model_type", ["canary", "encoder-decoder", "dia"])
def test_composite_inputs(model_type):
    data = _case(model_type)
    assert data["inputs"]["decoder_input_ids"].shape[:2] == (
        EXPORT_SIZES["batch"],
        EXPORT_SIZES["seq"],
    )
    _batch_is_dynamic(data)


def test_layout_models_get_boxes():
    data = _case("lilt")
    ids, bbox = data["inputs"]["input_ids"], data["inputs"]["bbox"]
    assert bbox.shape == (*ids.shape, 4) and int(bbox.max()) <= 1000
    assert bool((bbox[..., 2:] >= bbox[..., :2]).all())  # x1 >= x0, y1 >= y0
    assert data["dynamic_shapes"]["bbox"] == {0: "batch", 1: "seq"}


@pytest.mark.parametrize(
    "model_type",
    [
        "xlnet",
        "xmod",
        "zamba",
        "zamba2",
        "mistral4",
        "xlstm",
        "textnet",
        "qwen4_exp_text",
        "qwen4_exp",
        "voxtral_realtime",
        "videoprism_vision_model",
    ],
)
def test_config_and_eager_run(model_type):
    # build_case runs eager on the export and check inputs
    data = _case(model_type)
    _batch_is_dynamic(data)


def test_video_only_forward_gets_videos():
    data = _case("videoprism_vision_model")
    videos = data["inputs"]["pixel_values_videos"]
    config = data["model"].config
    assert videos.shape == (
        EXPORT_SIZES["batch"],
        config.num_frames,
        3,
        config.image_size,
        config.image_size,
    )


def test_audio_frames_follow_the_tokens():
    # voxtral_realtime adds one audio embedding (8 frames) to every token embedding
    data = _case("voxtral_realtime")
    for inputs in (data["inputs"], data["check_inputs"]):
        assert inputs["input_features"].shape[2] == 8 * inputs["input_ids"].shape[1]
    assert data["dynamic_shapes"]["input_features"] == {0: "batch", 2: "frames"}


def test_masking_models_get_their_noise():
    # ViT-MAE draws the masked patches with torch.rand unless given `noise`
    data = _case("vit_mae")
    config = data["model"].config
    patches = (config.image_size // config.patch_size) ** 2
    assert data["inputs"]["noise"].shape == (EXPORT_SIZES["batch"], patches)
    assert data["dynamic_shapes"]["noise"] == {0: "batch"}
    with torch.no_grad():
        a = data["model"](**data["inputs"]).last_hidden_state
        b = data["model"](**data["inputs"]).last_hidden_state
    torch.testing.assert_close(a, b)  # the same patches are masked


def test_stateful_decoder_runs_without_cache():
    # RecurrentGemma keeps its recurrent state in its modules when given a cache:
    # two eager runs differ, the case falls back to no cache
    data = _case("recurrent_gemma")
    assert data["cache"] == 0
    assert _case("llama")["cache"] == 1
