"""Fixtures shared by the tests of the model patches."""

import numpy as np
import onnxruntime
import pytest
import torch

from experimental_experiment.torch_interpreter import to_onnx
from experimental_experiment.torch_interpreter.onnx_export_errors import (
    bypass_export_some_errors,
)
from experimental_experiment.torch_interpreter.patches import active_patches, apply_patches

IMAGE_DS = ({0: "batch", 2: "height", 3: "width"},)


def _check_image_sizes(
    model, names, shapes, output, patches, scaled_atol: bool = False, seed: int | None = None
):
    """Exports ``model(pixel_values)`` at ``shapes[0]`` with a dynamic batch, height and
    width, checks that the patches named ``names`` (among ``patches``) are applied, that
    the model patched by them gives the same outputs in eager mode (bit for bit), then
    compares onnxruntime with the unpatched eager model on every shape. ``scaled_atol``:
    the absolute tolerance grows with the outputs' largest value (float32 rounding of
    values far from 1)."""
    if seed is not None:
        torch.manual_seed(seed)
    x = torch.randn(*shapes[0])
    with torch.no_grad():
        expected = output(model(x))
    with torch.no_grad(), apply_patches(patches) as active:
        assert all(any(a.endswith(n) for a in active) for n in names), active
        torch.testing.assert_close(output(model(x)), expected, rtol=0, atol=0)
    with torch.no_grad(), bypass_export_some_errors(patch_transformers=True):
        active = active_patches()
        assert all(any(a.endswith(n) for a in active) for n in names), active
        onx = to_onnx(model, (x,), dynamic_shapes=IMAGE_DS)
    dims = [d.dim_param for d in onx.graph.input[0].type.tensor_type.shape.dim]
    assert dims[0] == "batch" and dims[2:] == ["height", "width"], dims
    sess = onnxruntime.InferenceSession(onx.SerializeToString(), providers=["CPUExecutionProvider"])
    for shape in shapes:
        x = torch.randn(*shape)
        with torch.no_grad():
            expected = output(model(x))
        got = sess.run(None, {sess.get_inputs()[0].name: x.numpy()})[: len(expected)]
        for e, g in zip(expected, got):
            assert g.shape == e.shape, (shape, g.shape, e.shape)
            atol = 1e-4 * (max(1.0, float(e.abs().max())) if scaled_atol else 1.0)
            np.testing.assert_allclose(g, e.numpy(), atol=atol, rtol=1e-4, err_msg=str(shape))


@pytest.fixture
def check_image_sizes():
    """The check of a patched vision model exported with a dynamic image size."""
    return _check_image_sizes
