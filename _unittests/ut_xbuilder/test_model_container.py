"""ModelContainer and save_model: external data written atomically, relative locations,
deterministic bytes, clear errors on truncated data."""

import os

import numpy as np
import onnx
import onnxruntime
import pytest
from onnx import TensorProto

from experimental_experiment.xbuilder import GraphBuilder
from experimental_experiment.xbuilder.model_container import (
    ExternalDataError,
    ModelContainer,
    builder_to_container,
    check_external_data,
    get_weights_metadata,
    save_model,
)


def _builder(seed=0):
    rng = np.random.default_rng(seed)
    g = GraphBuilder(18)
    x = g.make_tensor_input("x", TensorProto.FLOAT, ("batch", 64))
    w1 = g.make_initializer("w1", rng.standard_normal((64, 300)).astype(np.float32))
    b1 = g.make_initializer("b1", rng.standard_normal((300,)).astype(np.float32))
    w2 = g.make_initializer("w2", rng.standard_normal((300, 5)).astype(np.float32))
    h = g.op.Relu(g.op.Add(g.op.MatMul(x, w1), b1))
    g.make_tensor_output(g.op.MatMul(h, w2), output_name="y")
    weights = {k: g.get_constant(k) for k in ("w1", "b1", "w2")}
    return g, weights


def _data(path):
    """The data file a saved model refers to (named after its content)."""
    model = onnx.load(str(path), load_external_data=False)
    locs = {
        e.value for i in model.graph.initializer for e in i.external_data if e.key == "location"
    }
    assert len(locs) == 1, locs
    return path.parent / locs.pop()


def _expected(weights, x):
    h = np.maximum(x @ weights["w1"] + weights["b1"], 0)
    return h @ weights["w2"]


def test_container_roundtrip_other_folder(tmp_path, monkeypatch):
    g, weights = _builder()
    container = builder_to_container(g, threshold=1024)
    assert isinstance(container, ModelContainer)
    assert sorted(container.tensors) == ["b1", "w1", "w2"]  # 1200 bytes for b1
    path = tmp_path / "sub" / "model.onnx"
    container.save(str(path))
    data = _data(path)
    assert data.name.startswith("model.onnx.") and data.name.endswith(".data")
    assert sorted(os.listdir(path.parent)) == sorted(["model.onnx", data.name])
    monkeypatch.chdir(tmp_path)  # another working directory
    loaded = onnx.load(str(path))
    onnx.checker.check_model(loaded)
    for init in loaded.graph.initializer:
        loc = {e.key: e.value for e in init.external_data}.get("location")
        assert loc in (None, data.name)  # relative
    sess = onnxruntime.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    for batch in (2, 7):
        x = np.random.default_rng(batch).standard_normal((batch, 64)).astype(np.float32)
        got = sess.run(None, {"x": x})[0]
        np.testing.assert_allclose(got, _expected(weights, x), atol=1e-4, rtol=1e-4)


def test_deterministic_bytes(tmp_path):
    contents = []
    for i in range(2):
        g, _ = _builder()
        path = tmp_path / f"run{i}" / "model.onnx"
        builder_to_container(g, threshold=0).save(str(path))
        contents.append((path.read_bytes(), _data(path).read_bytes()))
    assert contents[0] == contents[1]


def test_one_file_per_tensor(tmp_path):
    g, weights = _builder()
    path = tmp_path / "model.onnx"
    builder_to_container(g, threshold=0).save(str(path), all_tensors_to_one_file=False)
    assert len([f for f in os.listdir(tmp_path) if ".data." in f]) == 3
    sess = onnxruntime.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    x = np.ones((3, 64), dtype=np.float32)
    np.testing.assert_allclose(
        sess.run(None, {"x": x})[0], _expected(weights, x), atol=1e-4, rtol=1e-4
    )


class _Failing:
    """A reference whose data cannot be written (a failure in the middle of saving)."""

    elem_type, shape, nbytes, has_data = TensorProto.FLOAT, (300, 5), 6000, True

    def write_to(self, f):
        f.write(b"\0" * 100)
        raise OSError("disk full")


def test_failure_leaves_nothing(tmp_path):
    g, _ = _builder()
    container = builder_to_container(g, threshold=0)
    container.tensors["w2"] = _Failing()
    with pytest.raises(OSError, match="disk full"):
        container.save(str(tmp_path / "model.onnx"))
    assert os.listdir(tmp_path) == []


def test_save_model_proto_external_keeps_model(tmp_path):
    g, weights = _builder()
    onx = g.to_onnx()
    before = onx.SerializeToString()
    save_model(onx, str(tmp_path / "m.onnx"), external_data=True)
    assert onx.SerializeToString() == before  # the user's model is unchanged
    assert os.path.getsize(_data(tmp_path / "m.onnx")) >= 64 * 300 * 4
    save_model(onx, str(tmp_path / "small.onnx"))  # under 2 GB: one file
    assert sorted(os.listdir(tmp_path)) == sorted(
        ["m.onnx", _data(tmp_path / "m.onnx").name, "small.onnx"]
    )  # small: no data file
    for name in ("m.onnx", "small.onnx"):
        sess = onnxruntime.InferenceSession(
            str(tmp_path / name), providers=["CPUExecutionProvider"]
        )
        x = np.ones((2, 64), dtype=np.float32)
        np.testing.assert_allclose(
            sess.run(None, {"x": x})[0], _expected(weights, x), atol=1e-4, rtol=1e-4
        )


class _NoData:
    elem_type, shape, nbytes, has_data, foldable = TensorProto.FLOAT, (64, 300), 76800, False, False


def test_unfilled_are_holes_and_recorded(tmp_path):
    g, _ = _builder()
    container = builder_to_container(g, threshold=0)
    container.tensors["w1"] = _NoData()
    path = tmp_path / "model.onnx"
    container.save(str(path))
    model = onnx.load(str(path), load_external_data=False)
    assert get_weights_metadata(model)["unfilled"] == ["w1"]
    sizes = check_external_data(model, str(tmp_path))
    assert sizes[_data(path).name] >= 64 * 300 * 4 + 300 * 4 + 300 * 5 * 4


def test_truncated_data_file(tmp_path):
    g, _ = _builder()
    path = tmp_path / "model.onnx"
    builder_to_container(g, threshold=0).save(str(path))
    data = _data(path)
    data.write_bytes(data.read_bytes()[:1000])
    model = onnx.load(str(path), load_external_data=False)
    with pytest.raises(ExternalDataError, match="truncated"):
        check_external_data(model, str(tmp_path))
    os.remove(data)
    with pytest.raises(ExternalDataError, match="does not exist"):
        check_external_data(model, str(tmp_path))


def test_location_must_be_relative(tmp_path):
    g, _ = _builder()
    with pytest.raises(ExternalDataError, match="relative"):
        builder_to_container(g).save(str(tmp_path / "m.onnx"), location="/tmp/x.data")


def test_files_are_not_private(tmp_path):
    g, _ = _builder()
    builder_to_container(g, threshold=0).save(str(tmp_path / "m.onnx"))
    mask = os.umask(0)
    os.umask(mask)
    # as open() makes them, not mkstemp's 0o600
    for name in ("m.onnx", _data(tmp_path / "m.onnx").name):
        assert os.stat(tmp_path / name).st_mode & 0o777 == 0o666 & ~mask
