"""The capture's settings: fake tensors dispatch without torch's cache."""

import numpy as np
import onnxruntime
import torch
from torch._subclasses.fake_tensor import FakeTensorMode

from experimental_experiment.torch_interpreter import to_onnx


class _Attention(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.proj = torch.nn.Linear(16, 48)

    def forward(self, x):
        q, k, v = self.proj(x).reshape(x.shape[0], x.shape[1], 3, 2, 8).unbind(2)
        y = torch.nn.functional.scaled_dot_product_attention(
            q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2), is_causal=True
        )
        return y.transpose(1, 2).reshape(x.shape[0], x.shape[1], 16)


def test_capture_does_not_use_the_fake_tensor_cache():
    model = _Attention().eval()
    FakeTensorMode.cache_clear()
    onx = to_onnx(model, (torch.randn(2, 5, 16),), dynamic_shapes=({0: "batch", 1: "seq"},))
    info = FakeTensorMode.cache_info()
    assert info.hits == 0 and info.misses == 0, info
    sess = onnxruntime.InferenceSession(onx.SerializeToString(), providers=["CPUExecutionProvider"])
    for shape in [(2, 5, 16), (3, 11, 16)]:
        x = torch.randn(*shape)
        (got,) = sess.run(None, {sess.get_inputs()[0].name: x.numpy()})
        np.testing.assert_allclose(got, model(x).detach().numpy(), atol=1e-5)


def test_the_cache_setting_is_restored():
    import torch._dynamo.config

    before = torch._dynamo.config.fake_tensor_cache_enabled
    to_onnx(_Attention().eval(), (torch.randn(2, 5, 16),), dynamic_shapes=({0: "batch"},))
    assert torch._dynamo.config.fake_tensor_cache_enabled == before
