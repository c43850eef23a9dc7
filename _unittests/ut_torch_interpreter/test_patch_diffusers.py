"""Patches of diffusers models writing a tensor in a Python loop over a number of rows
computed from the input sizes: in eager mode the patched code computes bit for bit what
the original computes; exported with dynamic frames, height and width, onnxruntime
matches the eager (unpatched) model at two sizes."""

import numpy as np
import onnxruntime
import pytest
import torch

from experimental_experiment.torch_interpreter import to_onnx
from experimental_experiment.torch_interpreter.onnx_export_errors import (
    bypass_export_some_errors,
)
from experimental_experiment.torch_interpreter.patches import active_patches
from experimental_experiment.torch_interpreter.patches.patch_diffusers import (
    causal_frame_mask,
    get_diffusers_patches,
)

hunyuan15 = pytest.importorskip("diffusers.models.autoencoders.autoencoder_kl_hunyuanvideo15")
ORIGINAL = hunyuan15.HunyuanVideo15AttnBlock.prepare_causal_attention_mask
PATCH_NAME = "HunyuanVideo15AttnBlock.prepare_causal_attention_mask"
DS = {"x": {2: "frames", 3: "height", 4: "width"}}


def _bits(t: torch.Tensor) -> torch.Tensor:
    """The bytes of a tensor (``0.0`` and ``-0.0`` differ)."""
    return t.contiguous().view(torch.uint8)


@pytest.mark.parametrize(
    "n_frame,n_hw,batch",
    [(1, 1, None), (2, 3, None), (3, 4, 2), (5, 1, 1), (2, 16, None), (4, 6, 3)],
)
@pytest.mark.parametrize("dtype", [torch.float32, torch.float16])
def test_mask_is_bit_identical(n_frame, n_hw, batch, dtype):
    expected = ORIGINAL(n_frame, n_hw, dtype, torch.device("cpu"), batch_size=batch)
    got = causal_frame_mask(n_frame, n_hw, dtype, torch.device("cpu"), batch_size=batch)
    assert got.shape == expected.shape and got.dtype == expected.dtype
    assert torch.equal(_bits(got), _bits(expected))


def test_patch_only_when_imported_and_restored():
    assert [p.attribute for p in get_diffusers_patches()] == ["prepare_causal_attention_mask"]
    block = hunyuan15.HunyuanVideo15AttnBlock
    with bypass_export_some_errors(patch_transformers=True):
        assert any(PATCH_NAME in name for name in active_patches()), active_patches()
        mask = block(4).prepare_causal_attention_mask(2, 3, torch.float32, "cpu", batch_size=1)
        assert torch.equal(mask, ORIGINAL(2, 3, torch.float32, "cpu", batch_size=1))
    assert block.prepare_causal_attention_mask is ORIGINAL
    assert isinstance(vars(block)["prepare_causal_attention_mask"], staticmethod)


class _Wrapped(torch.nn.Module):
    def __init__(self, model):
        super().__init__()
        self.model = model

    def forward(self, x):
        return self.model(x)


def _export_and_check(model, shapes, atol):
    """Exports ``model(x)`` at ``shapes[0]`` with dynamic frames, height and width
    under the patches, then compares onnxruntime with the unpatched eager model at
    every shape."""
    model = model.eval()
    torch.manual_seed(0)
    x = torch.randn(*shapes[0])
    with torch.no_grad(), bypass_export_some_errors(patch_transformers=True):
        onx = to_onnx(model, (x,), dynamic_shapes=DS)
    sess = onnxruntime.InferenceSession(onx.SerializeToString(), providers=["CPUExecutionProvider"])
    assert hunyuan15.HunyuanVideo15AttnBlock.prepare_causal_attention_mask is ORIGINAL
    for shape in shapes:
        x = torch.randn(*shape)
        with torch.no_grad():
            expected = model(x).numpy()
        got = np.asarray(sess.run(None, {sess.get_inputs()[0].name: x.numpy()})[0])
        assert got.shape == expected.shape, (shape, got.shape, expected.shape)
        diff = float(np.abs(got - expected).max())
        assert diff < atol, f"max absolute difference {diff} at {shape}"


def test_attention_block_dynamic_frames_height_width():
    torch.manual_seed(0)
    block = hunyuan15.HunyuanVideo15AttnBlock(8)
    _export_and_check(_Wrapped(block), [(1, 8, 2, 3, 4), (1, 8, 3, 5, 2), (1, 8, 1, 4, 4)], 1e-4)


def test_vae_encode_dynamic_frames_height_width():
    torch.manual_seed(0)
    vae = hunyuan15.AutoencoderKLHunyuanVideo15(
        latent_channels=8, block_out_channels=(16, 32, 32, 32, 32), layers_per_block=1
    )

    class Encode(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.vae = vae

        def forward(self, x):
            return self.vae.encode(x).latent_dist.mode()

    _export_and_check(Encode(), [(1, 3, 5, 32, 32), (1, 3, 9, 48, 64)], 1e-3)
