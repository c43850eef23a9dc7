"""The path guard: external data locations and shard names stay inside their folder
(relative, no '..', no symbolic link out), offsets and lengths are non-negative and
inside the file, outputs are writable files; typed errors name the entry."""

import os

import numpy as np
import onnx
import pytest
from onnx import TensorProto
from onnx import helper as oh

from experimental_experiment.xbuilder.model_container import (
    ExternalDataError,
    ModelContainer,
    check_external_data,
)
from experimental_experiment.xbuilder.safe_paths import (
    OutputPathError,
    UnsafeLocationError,
    UnsafePathError,
    check_output_path,
    resolve_inside,
)


def external_model(location: str, offset: str = "0", length: str = "16") -> onnx.ModelProto:
    """y = Identity(w), w (4 floats) stored externally at ``location``."""
    w = TensorProto()
    w.name, w.data_type = "w", TensorProto.FLOAT
    w.dims.append(4)
    w.data_location = TensorProto.EXTERNAL
    for key, value in (("location", location), ("offset", offset), ("length", length)):
        entry = w.external_data.add()
        entry.key, entry.value = key, value
    graph = oh.make_graph(
        [oh.make_node("Identity", ["w"], ["y"])],
        "g",
        [],
        [oh.make_tensor_value_info("y", TensorProto.FLOAT, [4])],
        [w],
    )
    return oh.make_model(graph, opset_imports=[oh.make_opsetid("", 18)])


@pytest.mark.parametrize(
    "name",
    [
        "../x.data",
        "a/../../x.data",
        "..\\x.data",
        "/etc/passwd",
        "C:\\x.data",
        "\\\\server\\x",
        "",
        "a\x00b",
    ],
)
def test_resolve_inside_refuses(tmp_path, name):
    with pytest.raises(UnsafePathError) as e:
        resolve_inside(str(tmp_path), name, what="entry 'w'")
    assert "entry 'w'" in str(e.value)


def test_resolve_inside_accepts_subfolders(tmp_path):
    assert resolve_inside(str(tmp_path), "sub/x.data", what="w") == os.path.join(
        os.path.realpath(tmp_path), "sub", "x.data"
    )


def test_symlink_leaving_the_folder(tmp_path):
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret.bin").write_bytes(b"s" * 64)
    folder = tmp_path / "model"
    folder.mkdir()
    os.symlink(outside / "secret.bin", folder / "w.data")
    os.symlink(outside, folder / "sub")
    for name in ("w.data", "sub/secret.bin"):
        with pytest.raises(UnsafePathError, match="symbolic link"):
            resolve_inside(str(folder), name, what="w")
    with pytest.raises(UnsafeLocationError, match="initializer 'w'"):
        check_external_data(external_model("w.data"), str(folder))


def test_absolute_location_refused_before_reading(tmp_path):
    """check_external_data used to accept /etc/passwd and return its size."""
    secret = tmp_path / "secret.bin"
    secret.write_bytes(b"x" * 100)
    folder = tmp_path / "m"
    folder.mkdir()
    for loc in (str(secret), "/etc/passwd", "../secret.bin"):
        with pytest.raises(UnsafeLocationError, match="initializer 'w'") as e:
            check_external_data(external_model(loc), str(folder))
        assert isinstance(e.value, ExternalDataError)  # older handlers still catch it


@pytest.mark.parametrize(
    "offset, length, match",
    [
        ("-4", "16", "offset '-4'"),
        ("0", "-16", "length '-16'"),
        ("x", "16", "offset 'x'"),
        ("96", "16", "ends at byte 112"),
        ("200", "0", "ends at byte 200"),
    ],
)
def test_offsets_and_lengths(tmp_path, offset, length, match):
    (tmp_path / "w.data").write_bytes(b"\0" * 100)
    with pytest.raises(ExternalDataError, match=match):
        check_external_data(external_model("w.data", offset, length), str(tmp_path))


def test_container_location_must_stay_inside(tmp_path):
    container = ModelContainer(external_model("x"), {"w": np.zeros(4, dtype=np.float32)})
    for loc in ("../x.data", str(tmp_path / "x.data")):
        with pytest.raises(UnsafeLocationError):
            container.save(str(tmp_path / "m" / "m.onnx"), location=loc)
    assert os.listdir(tmp_path) == []


def test_output_paths(tmp_path):
    (tmp_path / "folder").mkdir()
    (tmp_path / "file").write_bytes(b"")
    with pytest.raises(OutputPathError, match="is a folder"):
        check_output_path(str(tmp_path / "folder"))
    with pytest.raises(OutputPathError, match="is a file, not a folder"):
        check_output_path(str(tmp_path / "file" / "m.onnx"))
    with pytest.raises(OutputPathError, match="empty"):
        check_output_path("")
    assert check_output_path(str(tmp_path / "new" / "sub" / "m.onnx")).endswith("m.onnx")
    assert sorted(os.listdir(tmp_path)) == ["file", "folder"]  # nothing created


@pytest.mark.skipif(
    os.name != "posix" or os.geteuid() == 0, reason="root writes in read-only folders"
)
def test_read_only_folder(tmp_path):
    folder = tmp_path / "ro"
    folder.mkdir()
    folder.chmod(0o555)
    try:
        with pytest.raises(OutputPathError, match="read-only"):
            check_output_path(str(folder / "m.onnx"))
    finally:
        folder.chmod(0o755)


def test_read_only_folder_probed(tmp_path, monkeypatch):
    """The folder is probed by creating a file (root bypasses permissions)."""
    import tempfile

    def refuse(*args, **kwargs):
        raise PermissionError(13, "Permission denied")

    monkeypatch.setattr(tempfile, "TemporaryFile", refuse)
    with pytest.raises(OutputPathError, match="read-only folder or no permission"):
        check_output_path(str(tmp_path / "m.onnx"))
