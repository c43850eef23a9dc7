"""``len(tensor)`` kept symbolic in D-FINE and DEIMv2: the model exported with a
dynamic batch and image size matches the eager (unpatched) model in onnxruntime on two
input sizes."""

import numpy as np
import onnxruntime
import pytest
import torch

from experimental_experiment.torch_interpreter import to_onnx
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


def _run_ort(onx, pixels):
    sess = onnxruntime.InferenceSession(onx.SerializeToString(), providers=["CPUExecutionProvider"])
    return sess.run(None, {sess.get_inputs()[0].name: pixels.numpy()})


@pytest.mark.parametrize("model_type", ["d_fine", "deimv2"])
def test_detector_exports_a_dynamic_batch_and_image_size(model_type):
    model = _detector(model_type)
    pixels = torch.randn(2, 3, 128, 128)
    with torch.no_grad():
        expected = model(pixel_values=pixels).logits
        with apply_patches(get_batch_size_patches()) as active:
            assert any(name.endswith(".len") for name in active), active
            got = model(pixel_values=pixels).logits
    torch.testing.assert_close(got, expected, rtol=0, atol=0)
    ds = {"pixel_values": {0: "batch", 2: "height", 3: "width"}}
    with torch.no_grad(), bypass_export_some_errors(patch_transformers=True):
        assert f"modeling_{model_type}.len" in " ".join(active_patches())
        onx = to_onnx(model, (), {"pixel_values": pixels}, dynamic_shapes=ds)
    for batch, size in ((3, 128), (1, 160)):
        pixels = torch.randn(batch, 3, size, size)
        with torch.no_grad():
            expected = model(pixel_values=pixels)
        # logits and pred_boxes come first
        logits, boxes = _run_ort(onx, pixels)[:2]
        assert logits.shape == tuple(expected.logits.shape), (logits.shape, expected.logits.shape)
        np.testing.assert_allclose(logits, expected.logits.numpy(), atol=1e-4, rtol=1e-4)
        np.testing.assert_allclose(boxes, expected.pred_boxes.numpy(), atol=1e-4, rtol=1e-4)


def test_builtin_of_a_module_is_overridden_then_removed():
    import types

    from experimental_experiment.torch_interpreter.patches import Patch

    module = types.ModuleType("fake_modeling")
    exec("def size(x):\n    return len(x)\n", vars(module))
    patch = Patch(module, "len", _len_of_symbolic_batch, "")
    with apply_patches([patch]) as active:
        assert active == ["fake_modeling.len"]
        assert vars(module)["len"].__wrapped__ is len
        assert module.size(torch.zeros((5, 2))) == 5
    assert "len" not in vars(module)
    assert module.size([1, 2]) == 2
