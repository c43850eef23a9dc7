"""Timesteps of a diffusers model that multiplies them by 1000 (Flux): fractions of the
schedule, on which its float32 sinusoidal embedding is well conditioned, so the ONNX
model matches eager on two batch sizes."""

import warnings

import numpy as np
import pytest
import torch

from experimental_experiment.bench.zoo_diffusers import diffusers_available

pytestmark = pytest.mark.skipif(not diffusers_available(), reason="diffusers is not installed")


def _timesteps(name: str, sizes: dict) -> torch.Tensor:
    from experimental_experiment.bench.diffusers_cases import tiny_model
    from experimental_experiment.bench.diffusers_inputs import make_inputs

    model = tiny_model(name)
    layout = "packed" if name.startswith("Flux") else "4d"
    channels = model.config["in_channels"]
    inputs, _, _ = make_inputs(model, "forward", layout, channels, sizes, "transformer-2d")
    return inputs["timestep"]


def test_scaled_timestep_detection():
    from diffusers.models import FluxTransformer2DModel, SD3Transformer2DModel

    from experimental_experiment.bench.diffusers_inputs import scaled_timestep

    assert scaled_timestep(FluxTransformer2DModel.__new__(FluxTransformer2DModel))
    assert not scaled_timestep(SD3Transformer2DModel.__new__(SD3Transformer2DModel))


class _TimeEmbedding(torch.nn.Module):
    """Flux's time and pooled text embedding, timestep scaled by 1000 as Flux does."""

    def __init__(self):
        from diffusers.models.embeddings import CombinedTimestepTextProjEmbeddings

        super().__init__()
        self.emb = CombinedTimestepTextProjEmbeddings(32, 16)

    def forward(self, timestep, pooled):
        return self.emb(timestep.to(pooled.dtype) * 1000, pooled)


def test_flux_time_embedding_matches_eager_on_the_bench_timesteps():
    import onnxruntime

    from experimental_experiment.bench.diffusers_inputs import CHECK_SIZES, EXPORT_SIZES
    from experimental_experiment.torch_interpreter import to_onnx

    torch.manual_seed(0)
    model = _TimeEmbedding().eval()
    export = _timesteps("FluxTransformer2DModel", EXPORT_SIZES)
    assert float(export.max()) < 1
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        onx = to_onnx(
            model,
            (export, torch.randn(export.shape[0], 16)),
            dynamic_shapes=({0: "batch"}, {0: "batch"}),
        )
    sess = onnxruntime.InferenceSession(onx.SerializeToString(), providers=["CPUExecutionProvider"])
    for sizes in (EXPORT_SIZES, CHECK_SIZES):
        t = _timesteps("FluxTransformer2DModel", sizes)
        pooled = torch.randn(t.shape[0], 16)
        got = sess.run(None, {"timestep": t.numpy(), "pooled": pooled.numpy()})[0]
        with torch.no_grad():
            expected = model(t, pooled).numpy()
        assert got.shape == expected.shape == (sizes["batch"], 32)
        assert np.abs(got - expected).max() < 1e-4
