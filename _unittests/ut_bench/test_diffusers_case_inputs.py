"""The diffusers cases whose inputs or tiny configurations the builder could not make
(inputs the generic builder does not know, 5-D video latents, constructors without
defaults, a mask broadcasting over the batch) build and run eagerly on the export and
check sizes. No export here: only the inputs, the configurations and one eager run."""

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
        "AceStepTransformer1DModel",
        "AnimaTextConditioner",
        "AnyFlowTransformer3DModel",
        "AnyFlowFARTransformer3DModel",
        "AutoencoderKLHunyuanImage.encode",
        "AutoencoderKLHunyuanImage.decode",
        "AutoencoderKLHunyuanImageRefiner.encode",
        "AutoencoderKLHunyuanVideo15.encode",
        "AutoencoderKLHunyuanVideo15.decode",
        "AsymmetricAutoencoderKL.encode",
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


def test_ace_step_latents_and_context_fill_the_patch_embedding():
    data = _build("AceStepTransformer1DModel")
    config = data["model"].model.config
    inputs = data["inputs"]
    assert inputs["hidden_states"].shape[-1] == config["audio_acoustic_hidden_dim"]
    assert (
        inputs["hidden_states"].shape[-1] + inputs["context_latents"].shape[-1]
        == config["in_channels"]
    )
    assert data["dynamic_shapes"]["context_latents"] == {0: "batch", 1: "length"}
    (out,) = _eager(data, "check_inputs")
    assert out.shape == data["check_inputs"]["hidden_states"].shape


def test_anima_text_conditioner_inputs():
    data = _build("AnimaTextConditioner")
    ids = data["check_inputs"]["target_input_ids"]
    assert ids.dtype == torch.int64
    assert int(ids.max()) < data["model"].model.config["target_vocab_size"]
    (out,) = _eager(data, "check_inputs")
    assert out.shape[0] == ids.shape[0]


def test_anyflow_timesteps_are_per_frame():
    data = _build("AnyFlowTransformer3DModel")
    assert data["layout"] == "5d-fc"
    for key in ("inputs", "check_inputs"):
        b, f = data[key]["hidden_states"].shape[:2]
        assert data[key]["timestep"].shape == data[key]["r_timestep"].shape == (b, f)
    assert data["dynamic_shapes"]["timestep"] == {0: "batch", 1: "frames"}


def test_anyflow_far_chunk_partition_fixes_the_frames():
    from experimental_experiment.bench.diffusers_classes import STATIC_FRAMES

    data = _build("AnyFlowFARTransformer3DModel")
    partition = data["model"].fixed["chunk_partition"]
    frames = data["inputs"]["hidden_states"].shape[1]
    assert sum(partition) == frames == data["check_inputs"]["hidden_states"].shape[1]
    # more chunks than full_chunk_limit: the compressed branch runs too
    assert len(partition) > data["model"].model.config["full_chunk_limit"]
    assert "AnyFlowFARTransformer3DModel" in STATIC_FRAMES
    assert all("frames" not in axes.values() for axes in data["dynamic_shapes"].values())


def test_hunyuan_video15_batch_static():
    from experimental_experiment.bench.diffusers_zoo import to_row

    data = _build("AutoencoderKLHunyuanVideo15.decode")
    assert data["inputs"]["z"].dim() == 5
    assert data["inputs"]["z"].shape[0] == data["check_inputs"]["z"].shape[0] == 1
    assert data["dynamic_shapes"]["z"] == {2: "frames", 3: "height", 4: "width"}
    row = to_row(
        dict(model_type="AutoencoderKLHunyuanVideo15.decode", head="vae-decoder", status="pass")
    )
    assert row["cause"].startswith("batch static")


def test_hunyuan_image_tiny_configuration():
    from experimental_experiment.bench.diffusers_classes import diffusers_model_classes
    from experimental_experiment.bench.diffusers_configs import tiny_kwargs

    cls = diffusers_model_classes()["AutoencoderKLHunyuanImage"]
    model = cls(**tiny_kwargs(cls)).eval()
    assert sum(p.numel() for p in model.parameters()) < 2_000_000
    with torch.no_grad():
        (dist,) = model.encode(torch.randn(2, 3, 32, 32), return_dict=False)
        z = dist.mode()
        (x,) = model.decode(z, return_dict=False)
    assert z.shape == (2, 8, 4, 4)
    assert x.shape == (2, 3, 32, 32)


def test_ace_step_timesteps_are_fractions():
    """ACE-Step's time embedding multiplies the timestep by 1000: it takes fractions
    of the schedule (1000 times 900 would make the float32 sinusoids meaningless)."""
    data = _build("AceStepTransformer1DModel")
    for key in ("inputs", "check_inputs"):
        for name in ("timestep", "timestep_r"):
            t = data[key][name]
            assert t.shape == (data[key]["hidden_states"].shape[0],)
            assert 0 < float(t.min()) and float(t.max()) < 1


def test_known_failure_cause_is_written(monkeypatch):
    from experimental_experiment.bench import diffusers_zoo
    from experimental_experiment.bench.diffusers_zoo import to_row

    monkeypatch.setitem(
        diffusers_zoo.FAIL_CAUSES, "AutoencoderKLHunyuanVideo15.encode", "the causal mask"
    )
    row = to_row(
        dict(
            model_type="AutoencoderKLHunyuanVideo15.encode",
            head="vae-encoder",
            status="fail",
            stage="mismatch",
            cause="numerical mismatch",
        )
    )
    assert row["cause"].startswith("numerical mismatch: the causal mask")
