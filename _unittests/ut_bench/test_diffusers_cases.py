"""Video VAEs that loop in Python over the frames are exported with a static frame
count (the loop is unrolled by the capture) and checked with onnxruntime against eager
on other batch, height and width; the CSV row says why the frames are static."""

import warnings

import pytest

from experimental_experiment.bench.zoo_diffusers import diffusers_available

pytestmark = pytest.mark.skipif(not diffusers_available(), reason="diffusers is not installed")


def _case(name):
    from experimental_experiment.bench.zoo_cases import ZooCase

    return ZooCase(name, "vae-decoder" if name.endswith(".decode") else "vae-encoder")


@pytest.mark.parametrize(
    "name", ["AutoencoderKLWan.encode", "AutoencoderKLWan.decode", "AutoencoderKLCogVideoX.decode"]
)
def test_frame_loop_keeps_frames_static(name):
    from experimental_experiment.bench.diffusers_cases import build_class_case

    data = build_class_case(_case(name))
    axes = [d for v in data["dynamic_shapes"].values() for d in v.values()]
    assert "frames" not in axes and {"batch", "height", "width"} <= set(axes)
    for key, dims in data["dynamic_shapes"].items():
        export, check = data["inputs"][key], data["check_inputs"][key]
        assert export.shape[2] == check.shape[2]  # frames
        assert all(export.shape[a] != check.shape[a] for a in dims)


def test_static_frames_reason_in_the_row():
    from experimental_experiment.bench.diffusers_classes import STATIC_FRAMES
    from experimental_experiment.bench.diffusers_zoo import to_row

    row = to_row(dict(model_type="AutoencoderKLWan.decode", head="vae-decoder", status="pass"))
    assert row["cause"] == STATIC_FRAMES["AutoencoderKLWan.decode"]
    row = to_row(dict(model_type="AutoencoderKL.decode", head="vae-decoder", status="pass"))
    assert row["cause"] == ""


def test_cogvideox_decode_matches_eager_on_other_sizes():
    # with dynamic frames the check video gave 17 frames instead of 33 (loop unrolled)
    from experimental_experiment.bench.diffusers_cases import build_class_case
    from experimental_experiment.bench.zoo import run_case_inline

    case = _case("AutoencoderKLCogVideoX.decode")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        row = run_case_inline(case, "to_onnx", build=build_class_case)
    assert row["status"] == "pass", row
    assert float(row["max_diff"]) <= 1e-3


def test_cosmos_encoder_exports_more_frames():
    from experimental_experiment.bench.diffusers_cases import build_class_case

    data = build_class_case(_case("AutoencoderKLCosmos.encode"))
    (export,), (check,) = data["inputs"].values(), data["check_inputs"].values()
    assert (export.shape[2], check.shape[2]) == (9, 17)
    assert data["dynamic_shapes"]["x"][2] == "frames"


def test_cosmos_encoder_matches_eager_on_other_sizes():
    # with 5 frames the latent frame dimension is 1 at export: specialized, the ONNX
    # model fails to broadcast on the check video
    from experimental_experiment.bench.diffusers_cases import build_class_case
    from experimental_experiment.bench.zoo import run_case_inline

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        row = run_case_inline(
            _case("AutoencoderKLCosmos.encode"), "to_onnx", build=build_class_case
        )
    assert row["status"] == "pass", row
    assert float(row["max_diff"]) <= 1e-3
