"""torch patches: a module converting a sub-module to its own dtype in its forward
(SwitchTransformers' router) exports, onnxruntime matches eager on two sizes; a real
conversion still converts."""

import numpy as np
import onnxruntime
import pytest
import torch

from experimental_experiment.torch_interpreter import to_onnx
from experimental_experiment.torch_interpreter.onnx_export_errors import (
    bypass_export_some_errors,
)


class Router(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.classifier = torch.nn.Linear(8, 4)

    def forward(self, x):
        self.classifier = self.classifier.to(torch.float32)
        return torch.softmax(self.classifier(x), dim=-1)


def _export():
    return to_onnx(Router(), (torch.randn(2, 3, 8),), dynamic_shapes=({0: "b", 1: "s"},))


def test_module_to_same_dtype_exports():
    torch.manual_seed(0)
    with pytest.raises(Exception, match="swap"):
        _export()  # without the patch
    model = Router()
    with bypass_export_some_errors():
        onx = to_onnx(model, (torch.randn(2, 3, 8),), dynamic_shapes=({0: "b", 1: "s"},))
    sess = onnxruntime.InferenceSession(onx.SerializeToString(), providers=["CPUExecutionProvider"])
    for shape in [(2, 3, 8), (3, 5, 8)]:
        x = torch.randn(*shape)
        got = sess.run(None, {sess.get_inputs()[0].name: x.numpy()})[0]
        np.testing.assert_allclose(got, model(x).detach().numpy(), atol=1e-6)


def test_module_to_still_converts():
    with bypass_export_some_errors():
        lin = torch.nn.Linear(2, 2).to(torch.float64)
        assert lin.weight.dtype == torch.float64
        assert lin.to(torch.float64) is lin
