"""to_onnx(large_model=True): a container with external data, models without weights
(meta device, fake tensors), filename= switching to external data."""

import os

import numpy as np
import onnx
import onnxruntime
import pytest
import torch
from torch._subclasses.fake_tensor import FakeTensorMode

from experimental_experiment.large import fill_weights
from experimental_experiment.torch_interpreter import to_onnx
from experimental_experiment.torch_interpreter.errors import InvalidArgumentError
from experimental_experiment.xbuilder.model_container import (
    ModelContainer,
    get_weights_metadata,
)


class MLP(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = torch.nn.Linear(16, 64)
        self.norm = torch.nn.LayerNorm(64)
        self.fc2 = torch.nn.Linear(64, 4)

    def forward(self, x):
        return self.fc2(torch.relu(self.norm(self.fc1(x))))


DS = ({0: "batch"},)


def _real_model():
    torch.manual_seed(0)
    return MLP().eval()


def _check(path, model, tmp_path, monkeypatch):
    """Runs the saved model from another folder on two batch sizes, against eager."""
    other = tmp_path / "elsewhere"
    other.mkdir(exist_ok=True)
    monkeypatch.chdir(other)
    sess = onnxruntime.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    for batch in (2, 5):
        x = torch.randn(batch, 16)
        expected = model(x).detach().numpy()
        got = sess.run(None, {sess.get_inputs()[0].name: x.numpy()})[0]
        np.testing.assert_allclose(got, expected, atol=1e-5, rtol=1e-4)


def test_container_with_weights(tmp_path, monkeypatch):
    model = _real_model()
    container = to_onnx(model, (torch.randn(3, 16),), dynamic_shapes=DS, large_model=True)
    assert isinstance(container, ModelContainer)
    # every weight of 1024 bytes or more, under its state dict name, not folded
    assert sorted(container.tensors) == ["fc1.weight", "fc2.weight"]
    assert container.unfilled == []
    assert container.tensors["fc1.weight"].tensor is model.fc1.weight.detach() or (
        container.tensors["fc1.weight"].tensor.data_ptr() == model.fc1.weight.data_ptr()
    )
    container.save(str(tmp_path / "m.onnx"))
    _check(tmp_path / "m.onnx", model, tmp_path, monkeypatch)


def test_meta_model_then_filled(tmp_path, monkeypatch):
    import safetensors.torch

    with torch.device("meta"):
        meta = MLP().eval()
    container = to_onnx(meta, (torch.randn(3, 16),), dynamic_shapes=DS, large_model=True)
    assert sorted(container.unfilled) == sorted(meta.state_dict())
    path = tmp_path / "m.onnx"
    container.save(str(path))
    info = get_weights_metadata(onnx.load(str(path), load_external_data=False))
    assert info["unfilled"] == sorted(meta.state_dict())
    model = _real_model()
    safetensors.torch.save_file(model.state_dict(), str(tmp_path / "w.safetensors"))
    report = fill_weights(str(path), [str(tmp_path / "w.safetensors")])
    assert report.unfilled == [] and report.unused == []
    assert report.rules() == {"source": 6}
    _check(path, model, tmp_path, monkeypatch)


def test_fake_mode_model_then_filled(tmp_path, monkeypatch):
    with FakeTensorMode():
        fake = MLP().eval()
    path = tmp_path / "m.onnx"
    onx = to_onnx(fake, (torch.randn(3, 16),), dynamic_shapes=DS, filename=str(path))
    assert isinstance(onx, onnx.ModelProto)  # refers to its data file
    assert all(
        i.data_location == onnx.TensorProto.EXTERNAL
        for i in onx.graph.initializer
        if i.name in fake.state_dict()
    )
    model = _real_model()
    torch.save(model.state_dict(), str(tmp_path / "w.pt"))
    report = fill_weights(str(path), str(tmp_path / "w.pt"))
    assert len(report.matched) == 6 and report.unfilled == []
    _check(path, model, tmp_path, monkeypatch)


def test_meta_model_needs_large_model():
    with torch.device("meta"):
        meta = MLP()
    with pytest.raises(InvalidArgumentError, match="large_model=True"):
        to_onnx(meta, (torch.randn(3, 16),))


def test_filename_small_model_single_file(tmp_path):
    onx = to_onnx(_real_model(), (torch.randn(3, 16),), filename=str(tmp_path / "m.onnx"))
    assert os.listdir(tmp_path) == ["m.onnx"]
    assert onnx.load(str(tmp_path / "m.onnx")) == onx


def test_filename_switches_to_external_data(tmp_path, monkeypatch):
    """Past the protobuf limit (lowered here, 2 GB in the bench), filename= writes the
    weights to external data by itself."""
    import experimental_experiment.torch_interpreter.result.large_model as lm

    monkeypatch.setattr(lm, "PROTOBUF_LIMIT", 4096)
    model = _real_model()
    path = tmp_path / "m.onnx"
    onx = to_onnx(model, (torch.randn(3, 16),), dynamic_shapes=DS, filename=str(path))
    data = sorted(os.listdir(tmp_path))
    assert len(data) == 2 and data[0] == "m.onnx" and data[1].startswith("m.onnx.")
    assert data[1].endswith(".data")
    external = [
        i.name for i in onx.graph.initializer if i.data_location == onnx.TensorProto.EXTERNAL
    ]
    assert sorted(external) == ["fc1.weight", "fc2.weight"]
    _check(path, model, tmp_path, monkeypatch)
