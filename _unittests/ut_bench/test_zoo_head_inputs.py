"""A transducer's forward is one decoding step: one token per utterance, the audio
length and the batch dynamic; the ONNX model matches eager on a second size. The tiny
configurations and inputs of the heads run eagerly on both input sets."""

import warnings

import pytest

from experimental_experiment.bench.zoo import run_case_inline
from experimental_experiment.bench.zoo_cases import CHECK_SIZES, EXPORT_SIZES, build_case
from experimental_experiment.bench.zoo_heads import ZooCase


def test_transducer_step_matches_eager_on_another_size():
    # with decoder_input_ids of 3 tokens, the capture specialized their count (failure)
    case = ZooCase("nemotron3_5_asr", "rnnt")
    data = build_case(case)
    ids, check = data["inputs"]["decoder_input_ids"], data["check_inputs"]["decoder_input_ids"]
    assert ids.shape == (EXPORT_SIZES["batch"], 1) and check.shape == (CHECK_SIZES["batch"], 1)
    assert data["dynamic_shapes"]["decoder_input_ids"] == {0: "batch"}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        row = run_case_inline(case, "to_onnx", build=lambda _case: data)
    assert row["status"] == "pass", row
    assert float(row["max_diff"]) <= 1e-3


@pytest.mark.parametrize(
    "model_type,head",
    [
        ("owlvit", "zero-shot-object-detection"),  # projection of the queries
        ("pp_ocrv6_tiny_rec", "text-recognition"),  # images tall enough for the pooling
        ("swinv2", "masked-image-modeling"),  # stages of the decoder
        ("sam2", "mask-generation"),  # Hiera backbone and feature sizes
        ("sapiens2", "pose-estimation"),  # a head with upsampling blocks
        ("vjepa2", "video-classification"),  # clips of frames_per_clip frames
        ("timesfm2_5", "time-series-prediction"),  # one series per row
        ("colmodernvbert", "retrieval"),  # the images of every prompt
    ],
)
def test_tiny_case_runs_eagerly(model_type, head):
    # build_case runs eager on the export and the check inputs (two sizes)
    data = build_case(ZooCase(model_type, head))
    assert data["dynamic_shapes"]


def test_blip2_prompts_place_the_query_features():
    data = build_case(ZooCase("blip-2", "zero-shot-image-classification"))
    config, ids = data["model"].config, data["inputs"]["input_ids"]
    queries = config.num_query_tokens
    assert (ids[:, :queries] == config.image_token_index).all()
    assert not (ids[:, queries:] == config.image_token_index).any()
    data = build_case(ZooCase("blip-2", "image-text-to-text"))
    ids = data["inputs"]["input_ids"]
    assert int((ids[0] == config.image_token_index).sum()) == queries


def test_musicgen_decoder_codes_per_codebook():
    data = build_case(ZooCase("musicgen", "text-to-waveform"))
    k = data["model"].config.decoder.num_codebooks
    ids = data["inputs"]["decoder_input_ids"]
    assert ids.shape == (EXPORT_SIZES["batch"] * k, EXPORT_SIZES["seq"])
    assert data["check_inputs"]["decoder_input_ids"].shape[0] == CHECK_SIZES["batch"] * k


def test_text_recognition_matches_eager_on_another_batch():
    case = ZooCase("pp_ocrv6_tiny_rec", "text-recognition")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        row = run_case_inline(case, "to_onnx")
    assert row["status"] == "pass", row
    assert float(row["max_diff"]) <= 1e-3
