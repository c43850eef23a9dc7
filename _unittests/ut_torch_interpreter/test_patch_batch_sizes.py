"""``len(tensor)`` kept symbolic in D-FINE and DEIMv2: the capture keeps the batch
dynamic and the captured program matches the eager (unpatched) model on two batch
sizes."""

import pytest
import torch

from experimental_experiment.torch_interpreter.onnx_export_errors import (
    bypass_export_some_errors,
)
from experimental_experiment.torch_interpreter.patches import active_patches, apply_patches
from experimental_experiment.torch_interpreter.patches.patch_batch_sizes import (
    _len_of_symbolic_batch,
    get_batch_size_patches,
)

pytestmark = pytest.mark.usefixtures("quiet_transformers")


def test_len_is_the_builtin_but_for_tensors():
    len_ = _len_of_symbolic_batch(len)
    assert len_([1, 2, 3]) == 3
    assert len_(torch.zeros((4, 2))) == 4
    with pytest.raises(TypeError):
        len_(torch.tensor(1.0))


def _detector(model_type):
    from experimental_experiment.bench.zoo_cases import _model_class
    from experimental_experiment.bench.zoo_configs import tiny_config
    from experimental_experiment.bench.zoo_heads import ZooCase

    cls = _model_class(ZooCase(model_type, "object-detection"))
    torch.manual_seed(0)
    return cls._from_config(tiny_config(model_type)).eval()


@pytest.mark.parametrize("model_type", ["d_fine", "deimv2"])
def test_detector_captured_with_a_dynamic_batch(model_type):
    model = _detector(model_type)
    pixels = torch.randn(2, 3, 128, 128)
    with torch.no_grad():
        expected = model(pixel_values=pixels).logits
        with apply_patches(get_batch_size_patches()) as active:
            assert any(name.endswith(".len") for name in active), active
            got = model(pixel_values=pixels).logits
    torch.testing.assert_close(got, expected, rtol=0, atol=0)
    batch = torch.export.Dim("batch")
    with torch.no_grad(), bypass_export_some_errors(patch_transformers=True):
        assert f"modeling_{model_type}.len" in " ".join(active_patches())
        ep = torch.export.export(
            model, (), {"pixel_values": pixels}, dynamic_shapes={"pixel_values": {0: batch}}
        )
    for n in (3, 1):
        pixels = torch.randn(n, 3, 128, 128)
        with torch.no_grad():
            expected = model(pixel_values=pixels)
            got = ep.module()(pixel_values=pixels)
        for name in ("logits", "pred_boxes"):
            torch.testing.assert_close(got[name], expected[name], rtol=1e-4, atol=1e-4)
