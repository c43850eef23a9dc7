"""unlighten checks the shapes a light model or a weights file records before it
allocates anything: a forged 7 TiB shape raises LightenError naming the initializer."""

import io
import zipfile

import numpy as np
import onnx
import pytest
from onnx import TensorProto
from onnx import helper as oh
from onnx import numpy_helper as onh

from experimental_experiment._command_lines import main
from experimental_experiment.errors import ExportError
from experimental_experiment.helpers import lighten as lighten_module
from experimental_experiment.helpers.lighten import (
    LightenError,
    lighten_model,
    load_weights,
    unlighten_model,
)

HUGE = [1024, 1024, 1024, 1792]  # float32: 7 TiB


def _light():
    graph = oh.make_graph(
        [oh.make_node("Add", ["x", "w"], ["y"])],
        "g",
        [oh.make_tensor_value_info("x", TensorProto.FLOAT, [16, 16])],
        [oh.make_tensor_value_info("y", TensorProto.FLOAT, [16, 16])],
        [onh.from_array(np.arange(256, dtype=np.float32).reshape(16, 16), "w")],
    )
    model = oh.make_model(graph, opset_imports=[oh.make_opsetid("", 18)], ir_version=9)
    return lighten_model(model, threshold=8)


def _forge_shape(light, shape, dims=None):
    init = light.graph.initializer[0]
    init.doc_string = init.doc_string.replace("[16, 16]", str(list(shape)))
    del init.dims[:]
    init.dims.extend(shape if dims is None else dims)
    return light


def _npy(shape, dtype, payload: bytes) -> bytes:
    buf = io.BytesIO()
    np.lib.format.write_array_header_1_0(
        buf,
        {
            "descr": np.lib.format.dtype_to_descr(np.dtype(dtype)),
            "fortran_order": False,
            "shape": tuple(shape),
        },
    )
    return buf.getvalue() + payload


@pytest.fixture
def no_random(monkeypatch):
    def refuse(*args, **kwargs):
        raise AssertionError("random weights drawn")

    monkeypatch.setattr(lighten_module, "_random", refuse)


def test_random_huge_recorded_shape(no_random):
    light = _forge_shape(_light()[0], HUGE)
    with pytest.raises(LightenError, match="initializer 'w'.*7,696,581,394,432 bytes"):
        unlighten_model(light, None)


def test_recorded_shape_differs_from_dims(no_random):
    light = _forge_shape(_light()[0], HUGE, dims=[16, 16])
    with pytest.raises(LightenError, match="initializer 'w': recorded shape"):
        unlighten_model(light, None)


def test_recorded_dtype_and_damaged_stats(no_random):
    light, _ = _light()
    light.graph.initializer[0].doc_string = light.graph.initializer[0].doc_string.replace(
        '"float32"', '"float64"'
    )
    with pytest.raises(LightenError, match="recorded dtype 'float64'"):
        unlighten_model(light, None)
    light.graph.initializer[0].doc_string = "lightened {not json"
    with pytest.raises(LightenError, match="initializer 'w'.*damaged"):
        unlighten_model(light, None)


def test_max_bytes_budget():
    light, _ = _light()
    with pytest.raises(LightenError, match="1,024 bytes, more than the 1,000"):
        unlighten_model(light, None, max_bytes=1000)
    assert len(unlighten_model(light, None, max_bytes=1024).graph.initializer[0].raw_data) == 1024
    assert issubclass(LightenError, ExportError) and issubclass(LightenError, ValueError)


def test_load_weights_round_trip(tmp_path):
    arrays = {
        "a": np.arange(12, dtype=np.float32).reshape(3, 4),
        "f": np.asfortranarray(np.arange(6, dtype=np.int64).reshape(2, 3)),
        "s": np.array(3.5),
    }
    for save in (np.savez, np.savez_compressed):
        save(tmp_path / "w.npz", **arrays)
        got = load_weights(str(tmp_path / "w.npz"))
        assert set(got) == set(arrays)
        for k, v in arrays.items():
            assert got[k].dtype == v.dtype and got[k].shape == v.shape
            np.testing.assert_array_equal(got[k], v)


def test_load_weights_forged_header(tmp_path):
    """A member announcing 7 TiB with 24 bytes of data: refused from its header."""
    path = tmp_path / "forged.npz"
    with zipfile.ZipFile(path, "w") as z:
        z.writestr("w.npy", _npy(HUGE, np.float32, b"\x00" * 24))
    with pytest.raises(LightenError, match="array 'w': float32 .* needs 7,696,581,394,432"):
        load_weights(str(path))


def test_load_weights_short_member(tmp_path):
    path = tmp_path / "short.npz"
    with zipfile.ZipFile(path, "w") as z:
        z.writestr("w.npy", _npy([4, 4], np.float32, b"\x00" * 60))
    with pytest.raises(LightenError, match="array 'w'.*needs 64 bytes"):
        load_weights(str(path))


def test_cli_unlighten_forged(tmp_path, capsys, no_random):
    light, _ = _light()
    onnx.save(light, str(tmp_path / "light.onnx"))
    with zipfile.ZipFile(tmp_path / "forged.npz", "w") as z:
        z.writestr("w.npy", _npy(HUGE, np.float32, b"\x00" * 24))
    rc = main(
        [
            "unlighten",
            str(tmp_path / "light.onnx"),
            str(tmp_path / "o.onnx"),
            "--weights",
            str(tmp_path / "forged.npz"),
        ]
    )
    err = capsys.readouterr().err
    assert rc == 2 and "array 'w'" in err and len(err.strip().splitlines()) == 1, err
    onnx.save(_forge_shape(light, HUGE), str(tmp_path / "huge.onnx"))
    rc = main(["unlighten", str(tmp_path / "huge.onnx"), str(tmp_path / "o.onnx"), "--random"])
    err = capsys.readouterr().err
    assert rc == 2 and "initializer 'w'" in err and len(err.strip().splitlines()) == 1, err
    assert not (tmp_path / "o.onnx").exists()
