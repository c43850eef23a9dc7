"""Models and checkpoints naming files outside their folder: fill_weights, the loaders
and the command line refuse them before reading or writing any byte."""

import json
import os

import onnx
import pytest
import torch

from experimental_experiment._command_lines import main
from experimental_experiment.large import fill_weights, read_checkpoints
from experimental_experiment.torch_interpreter import to_onnx
from experimental_experiment.xbuilder.safe_paths import (
    OutputPathError,
    UnsafeLocationError,
    UnsafePathError,
)


class Net(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = torch.nn.Linear(32, 32)

    def forward(self, x):
        return self.fc(x)


def _relocate(path, location):
    """Points every external initializer of the model at ``location``."""
    model = onnx.load(str(path), load_external_data=False)
    for init in model.graph.initializer:
        for e in init.external_data:
            if e.key == "location":
                e.value = location
    path.write_bytes(model.SerializeToString())


def _snapshot(root):
    return {
        os.path.join(d, f): open(os.path.join(d, f), "rb").read()
        for d, _, files in os.walk(root)
        for f in files
    }


@pytest.fixture
def hostile(tmp_path):
    """A weight-free model three folders down, its data location leading to a victim
    file outside, a checkpoint matching it."""
    folder = tmp_path / "a" / "b" / "c"
    with torch.device("meta"):
        meta = Net()
    to_onnx(meta, (torch.randn(2, 32),), filename=str(folder / "m.onnx"))
    victim = tmp_path / "outside" / "victim.bin"
    victim.parent.mkdir()
    victim.write_bytes(b"precious" * 1000)
    torch.save(Net().state_dict(), str(tmp_path / "w.pt"))
    return folder / "m.onnx", victim, tmp_path / "w.pt"


def test_fill_weights_relative_escape(hostile, tmp_path):
    """Used to overwrite outside/victim.bin."""
    path, victim, ckpt = hostile
    _relocate(path, "../../../outside/victim.bin")
    before = _snapshot(tmp_path)
    with pytest.raises(UnsafeLocationError, match=r"'\.\./\.\./\.\./outside/victim.bin'"):
        fill_weights(str(path), [str(ckpt)])
    assert _snapshot(tmp_path) == before


def test_fill_weights_absolute_location_read(hostile, tmp_path):
    """Used to copy the bytes of any file into the new data file."""
    path, victim, ckpt = hostile
    _relocate(path, str(victim))
    out = tmp_path / "out" / "o.onnx"
    with pytest.raises(UnsafeLocationError, match="absolute path"):
        fill_weights(str(path), [str(ckpt)], output=str(out))
    assert not out.parent.exists()


def test_fill_weights_symlink_out(hostile, tmp_path):
    path, victim, ckpt = hostile
    os.symlink(victim, path.parent / "link.data")
    _relocate(path, "link.data")
    before = _snapshot(tmp_path)
    with pytest.raises(UnsafeLocationError, match="symbolic link"):
        fill_weights(str(path), [str(ckpt)])
    assert _snapshot(tmp_path) == before


@pytest.mark.parametrize("location", ["../../../outside/victim.bin", "/etc/passwd"])
def test_cli_refuses_escaping_locations(hostile, tmp_path, capsys, location):
    path, victim, ckpt = hostile
    _relocate(path, location)
    before = _snapshot(tmp_path)
    for argv in (
        ["fill-weights", str(path), str(ckpt)],
        ["stats", str(path)],
        ["print", str(path)],
        ["run", str(path)],
        ["optimize", str(path), str(tmp_path / "opt.onnx")],
        ["lighten", str(path), str(tmp_path / "light.onnx")],
    ):
        rc = main(argv)
        out, err = capsys.readouterr()
        assert rc == 2, (argv, out, err)
        assert "Traceback" not in err and len(err.strip().splitlines()) == 1, err
        assert "outside" in err or "absolute" in err, err
        assert str(os.path.getsize("/etc/passwd")) not in out
    assert _snapshot(tmp_path) == before


def test_shard_outside_checkpoint_folder(tmp_path):
    import safetensors.torch

    (tmp_path / "outside").mkdir()
    safetensors.torch.save_file({"w": torch.zeros(3)}, str(tmp_path / "outside" / "s.safetensors"))
    ckpt = tmp_path / "ckpt"
    ckpt.mkdir()
    index = ckpt / "model.safetensors.index.json"
    for shard in ("../outside/s.safetensors", str(tmp_path / "outside" / "s.safetensors")):
        index.write_text(json.dumps({"weight_map": {"w": shard}}))
        with pytest.raises(UnsafePathError, match="shard of"):
            read_checkpoints([str(index)])
        with pytest.raises(UnsafePathError):
            read_checkpoints([str(ckpt)])  # the folder gives the index
    # the Hugging Face cache: snapshots/<rev>/model.safetensors -> ../../blobs/<hash>,
    # a symbolic link the user's own cache made, followed (files only read)
    os.remove(index)
    os.symlink("../outside/s.safetensors", ckpt / "model.safetensors")
    assert list(read_checkpoints([str(ckpt)])) == ["w"]


def test_cli_shard_escape_exit_code(hostile, tmp_path, capsys):
    path, _, _ = hostile
    ckpt = tmp_path / "ckpt"
    ckpt.mkdir()
    (ckpt / "model.safetensors.index.json").write_text(
        json.dumps({"weight_map": {"fc.weight": "../w.pt"}})
    )
    assert main(["fill-weights", str(path), str(ckpt)]) == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err and "'../w.pt'" in err


def test_output_checked_before_export(tmp_path, monkeypatch, capsys):
    """A folder given as output used to fail after the whole export with an OSError
    naming a temporary file."""

    def no_export(*args, **kwargs):
        raise AssertionError("the export started")

    monkeypatch.setattr(torch.export, "export", no_export)
    (tmp_path / "dir.onnx").mkdir()
    (tmp_path / "file").write_text("")
    for target, match in (
        (tmp_path / "dir.onnx", "is a folder"),
        (tmp_path / "file" / "m.onnx", "not a folder"),
    ):
        with pytest.raises(OutputPathError, match=match):
            to_onnx(Net(), (torch.randn(2, 32),), filename=str(target))
        rc = main(["export", "experimental_experiment.large:Net", "-o", str(target)])
        err = capsys.readouterr().err
        assert rc == 2 and "Traceback" not in err and match in err, err
    assert os.listdir(tmp_path / "dir.onnx") == []


def test_cli_outputs_checked_first(hostile, tmp_path, capsys):
    path, _, ckpt = hostile
    (tmp_path / "d").mkdir()
    before = _snapshot(tmp_path)
    for argv in (
        ["optimize", str(path), str(tmp_path / "d")],
        ["fill-weights", str(path), str(ckpt), "-o", str(tmp_path / "d")],
        ["lighten", str(path), str(tmp_path / "l.onnx"), "--weights", str(tmp_path / "d")],
        ["unlighten", str(path), str(tmp_path / "d"), "--random"],
    ):
        rc = main(argv)
        err = capsys.readouterr().err
        assert rc == 2 and "is a folder" in err and "Traceback" not in err, (argv, err)
    assert _snapshot(tmp_path) == before


def test_report_path_checked_before_export(tmp_path, monkeypatch):
    """report= naming a folder used to fail after the whole export, when the report
    was written."""

    def no_export(*args, **kwargs):
        raise AssertionError("the export started")

    monkeypatch.setattr(torch.export, "export", no_export)
    (tmp_path / "r.json").mkdir()
    (tmp_path / "file").write_text("")
    for target, match in (
        (tmp_path / "r.json", "is a folder"),
        (tmp_path / "file" / "r.json", "not a folder"),
    ):
        with pytest.raises(OutputPathError, match=f"report .*{match}"):
            to_onnx(Net(), (torch.randn(2, 32),), report=str(target))
    assert os.listdir(tmp_path / "r.json") == []
