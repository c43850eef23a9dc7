"""Diffusion models of the zoo, from tiny diffusers configurations with random weights:
the ``UNet2DConditionModel`` of Stable Diffusion (noise prediction conditioned on text
embeddings) and the decoder of ``AutoencoderKL`` (latents to pixels). Listed only when
diffusers is installed.

.. code-block:: python

    from experimental_experiment.bench.zoo_diffusers import build_diffusers_case

    data = build_diffusers_case("unet2d-condition", sizes=dict(batch=2, seq=3))
"""

from __future__ import annotations

import importlib.util
from typing import Any

import torch

#: model type -> head of the diffusers cases
DIFFUSERS_TYPES = {
    "diffusers-unet2d-condition": "diffusion-unet",
    "diffusers-autoencoder-kl-decoder": "vae-decoder",
}


def diffusers_available() -> bool:
    """True when diffusers can be imported."""
    return importlib.util.find_spec("diffusers") is not None


class UNetNoise(torch.nn.Module):
    """The predicted noise of a ``UNet2DConditionModel`` as a tensor (no output class)."""

    def __init__(self, unet):
        super().__init__()
        self.unet = unet

    def forward(self, sample, timestep, encoder_hidden_states):
        return self.unet(sample, timestep, encoder_hidden_states, return_dict=False)[0]


class VaeDecoder(torch.nn.Module):
    """``AutoencoderKL.decode`` as a module returning the image tensor."""

    def __init__(self, vae):
        super().__init__()
        self.vae = vae

    def forward(self, latents):
        return self.vae.decode(latents, return_dict=False)[0]


def _tiny_unet():
    from diffusers import UNet2DConditionModel

    return UNet2DConditionModel(
        sample_size=8,
        in_channels=4,
        out_channels=4,
        layers_per_block=1,
        block_out_channels=(16, 32),
        norm_num_groups=8,
        cross_attention_dim=32,
        attention_head_dim=8,
        down_block_types=("CrossAttnDownBlock2D", "DownBlock2D"),
        up_block_types=("UpBlock2D", "CrossAttnUpBlock2D"),
    )


def _tiny_vae():
    from diffusers import AutoencoderKL

    return AutoencoderKL(
        in_channels=3,
        out_channels=3,
        latent_channels=4,
        layers_per_block=1,
        block_out_channels=(16, 32),
        norm_num_groups=8,
        sample_size=32,
        down_block_types=("DownEncoderBlock2D",) * 2,
        up_block_types=("UpDecoderBlock2D",) * 2,
    )


def _unet_inputs(sizes: dict, generator) -> tuple[dict, dict]:
    b, s = sizes["batch"], sizes["seq"]
    inputs = dict(
        sample=torch.randn(b, 4, 8, 8, generator=generator),
        timestep=torch.randint(1, 1000, (b,), generator=generator),
        encoder_hidden_states=torch.randn(b, s, 32, generator=generator),
    )
    ds = dict(
        sample={0: "batch"}, timestep={0: "batch"}, encoder_hidden_states={0: "batch", 1: "seq"}
    )
    return inputs, ds


def _vae_inputs(sizes: dict, generator) -> tuple[dict, dict]:
    # latents of dynamic height and width: 2 * seq + 2 pixels (8 then 10)
    side = 2 * sizes["seq"] + 2
    inputs = dict(latents=torch.randn(sizes["batch"], 4, side, side - 2, generator=generator))
    return inputs, dict(latents={0: "batch", 2: "height", 3: "width"})


def build_diffusers_case(
    model_type: str, export_sizes: dict, check_sizes: dict, seed: int = 0
) -> dict[str, Any]:
    """The tiny model of ``model_type`` (:data:`DIFFUSERS_TYPES`) with export and check
    inputs, in the format of :func:`experimental_experiment.bench.zoo_cases.build_case`."""
    if model_type not in DIFFUSERS_TYPES:
        raise ValueError(
            f"unknown diffusers case {model_type!r}, expected one of {sorted(DIFFUSERS_TYPES)}"
        )
    torch.manual_seed(seed)
    if DIFFUSERS_TYPES[model_type] == "diffusion-unet":
        model, make = UNetNoise(_tiny_unet()), _unet_inputs
        name = "UNet2DConditionModel"
    else:
        model, make = VaeDecoder(_tiny_vae()), _vae_inputs
        name = "AutoencoderKL.decode"
    model = model.eval()
    inputs, ds = make(export_sizes, torch.Generator().manual_seed(seed))
    check, _ = make(check_sizes, torch.Generator().manual_seed(seed + 1))
    with torch.no_grad():
        model(**inputs)
        model(**check)
    return dict(
        model=model, inputs=inputs, check_inputs=check, dynamic_shapes=ds, cache=0, model_class=name
    )


def diffusers_class_cases():
    """Opt-in: one case per diffusers model class (every class ``diffusers.models``
    exports, a VAE's encoder and decoder apart), built by
    ``experimental_experiment.bench.diffusers_cases.build_class_case`` and run by
    ``python -m experimental_experiment.bench.diffusers_zoo``; the zoo itself keeps the
    two cases of ``DIFFUSERS_TYPES``."""
    from .diffusers_classes import list_diffusers_cases

    return list_diffusers_cases()
