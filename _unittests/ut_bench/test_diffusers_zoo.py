"""Every diffusers model class: listing, tiny configurations, inputs, one export per
kind checked with onnxruntime on a second size, the CSV and its page section."""

import pytest

from experimental_experiment.bench.zoo_diffusers import diffusers_available

pytestmark = pytest.mark.skipif(not diffusers_available(), reason="diffusers is not installed")


def test_list_cases_kinds():
    from experimental_experiment.bench.diffusers_classes import class_kind, list_diffusers_cases

    cases = {c.model_type: c.head for c in list_diffusers_cases()}
    assert cases["AutoencoderKL.encode"] == "vae-encoder"
    assert cases["AutoencoderKL.decode"] == "vae-decoder"
    assert cases["SD3Transformer2DModel"] == "transformer-2d"
    assert cases["WanTransformer3DModel"] == "transformer-3d"
    assert cases["ControlNetModel"] == "controlnet"
    assert cases["UNet2DConditionModel"] == "unet"
    assert class_kind("SD3MultiControlNetModel") == "container"
    assert len(cases) > 100


def test_tiny_kwargs_rules():
    from diffusers.models import FluxTransformer2DModel, UNet2DModel

    from experimental_experiment.bench.diffusers_configs import rescale_axes, tiny_kwargs

    assert rescale_axes((16, 56, 56), 16) == (2, 6, 8)
    flux = tiny_kwargs(FluxTransformer2DModel)
    assert flux["num_attention_heads"] * flux["attention_head_dim"] == 32
    assert sum(flux["axes_dims_rope"]) == flux["attention_head_dim"]
    assert flux["num_single_layers"] == 1 and flux["joint_attention_dim"] == 32
    unet = tiny_kwargs(UNet2DModel)
    assert unet["block_out_channels"] == (16, 32, 32, 32) and unet["norm_num_groups"] == 8


def test_skip_row_and_render(tmp_path):
    from experimental_experiment.bench.diffusers_zoo import (
        render_diffusers,
        summary,
        to_row,
        write_rows,
    )

    skip = to_row(
        dict(
            model_type="X",
            head="other",
            status="fail",
            stage="config",
            error="DiffusersCaseError: needs 'y' <- KeyError: 'y'",
        )
    )
    assert skip["status"] == "skip" and skip["cause"] == "needs 'y'"
    ok = to_row(dict(model_type="Y", head="unet", status="pass", stage="", nodes=5))
    fail = to_row(
        dict(
            model_type="Z",
            head="unet",
            status="fail",
            stage="conversion",
            cause="conversion of aten.foo",
        )
    )
    odd = to_row(dict(model_type="W", head="unet", status="fail", stage="runtime", cause="a*b `c`"))
    assert summary([skip, ok, fail])["rate"] == 0.5
    path = str(tmp_path / "d.csv")
    write_rows(path, [skip, ok, fail, odd])
    text = render_diffusers(path)
    assert "**1 / 3**" in text and "a\\*b 'c'" in text and "``Z``" in text
    assert "conversion of aten.foo" in text
    assert "needs 'y'" in text


@pytest.mark.parametrize(
    "name,kind",
    [
        ("SD3Transformer2DModel", "transformer-2d"),
        ("UNet2DConditionModel", "unet"),
        ("AutoencoderKL.encode", "vae-encoder"),
        ("ControlNetModel", "controlnet"),
    ],
)
def test_export_one_per_kind(name, kind):
    from experimental_experiment.bench.diffusers_cases import build_class_case
    from experimental_experiment.bench.zoo import run_case_inline
    from experimental_experiment.bench.zoo_cases import ZooCase

    case = ZooCase(name, kind)
    data = build_class_case(case)
    # export and check sizes differ on every dynamic dimension the inputs have
    for key, axes in data["dynamic_shapes"].items():
        for axis in axes:
            assert data["inputs"][key].shape[axis] != data["check_inputs"][key].shape[axis]
    row = run_case_inline(case, "to_onnx", build=build_class_case)
    assert row["status"] == "pass", row
    assert float(row["max_diff"]) <= 1e-3
