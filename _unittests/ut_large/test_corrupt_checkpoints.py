"""Truncated or forged checkpoints raise CheckpointError naming the file and the
tensor, from the header alone, before any tensor is mapped or allocated."""

import json
import struct

import pytest
import torch
from safetensors.torch import save_file

from experimental_experiment._command_lines import main
from experimental_experiment.large import CheckpointError, read_checkpoints
from experimental_experiment.large.checkpoint_checks import check_safetensors
from experimental_experiment.torch_interpreter.errors import InvalidArgumentError


@pytest.fixture
def good(tmp_path):
    path = tmp_path / "good.safetensors"
    save_file({"a": torch.randn(4, 4), "b": torch.randn(8)}, str(path))
    return path


def _split(path):
    data = path.read_bytes()
    (length,) = struct.unpack("<Q", data[:8])
    return json.loads(data[8 : 8 + length]), data[8 + length :]


def _forge(path, header, body):
    raw = json.dumps(header).encode()
    raw += b" " * (-len(raw) % 8)
    path.write_bytes(struct.pack("<Q", len(raw)) + raw + body)
    return path


def _refused(path, *words):
    with pytest.raises(CheckpointError) as info:
        read_checkpoints([str(path)])
    message = str(info.value)
    assert str(path) in message, message
    for word in words:
        assert word in message, message
    assert isinstance(info.value, InvalidArgumentError)
    return info.value


def test_good_file_reads(good):
    tensors = read_checkpoints([str(good)])
    assert tensors["a"].shape == (4, 4) and tensors["a"].load().shape == (4, 4)
    assert set(check_safetensors(str(good))) == {"a", "b"}


def test_truncated_safetensors(good, tmp_path):
    path = tmp_path / "cut.safetensors"
    path.write_bytes(good.read_bytes()[:-20])
    assert _refused(path, "'b'", "past the").tensor == "b"


def test_shorter_than_a_header(tmp_path):
    for data in (b"", b"\x10\x00"):
        path = tmp_path / "tiny.safetensors"
        path.write_bytes(data)
        _refused(path, "too short")


def test_huge_header_length(good, tmp_path, monkeypatch):
    """2**40 bytes of header announced in a 200-byte file: refused from its first
    8 bytes, the JSON parser never runs."""
    path = tmp_path / "huge.safetensors"
    path.write_bytes(struct.pack("<Q", 2**40) + good.read_bytes()[8:])

    def no_parse(*args, **kwargs):
        raise AssertionError("the header was parsed")

    monkeypatch.setattr(json, "loads", no_parse)
    _refused(path, "header length 1099511627776", "exceeds the file size")


def test_offsets_past_the_end(good, tmp_path):
    header, body = _split(good)
    header["a"]["data_offsets"] = [0, 10**12]
    _refused(_forge(tmp_path / "off.safetensors", header, body), "'a'", "past the")


@pytest.mark.parametrize(
    "field, value, words",
    [
        ("data_offsets", [8, 4], "increasing"),
        ("data_offsets", [0, 60], "needs 64 bytes"),
        ("shape", [4, -4], "non-negative"),
        ("dtype", "Q99", "unknown dtype"),
    ],
)
def test_inconsistent_entries(good, tmp_path, field, value, words):
    header, body = _split(good)
    header["a"][field] = value
    _refused(_forge(tmp_path / "bad.safetensors", header, body), "'a'", words)


def test_header_not_json(good, tmp_path):
    _, body = _split(good)
    raw = b"{not json" + b" " * 7
    path = tmp_path / "nojson.safetensors"
    path.write_bytes(struct.pack("<Q", len(raw)) + raw + body)
    _refused(path, "not valid JSON")


def test_truncated_torch_file(tmp_path):
    path = tmp_path / "cut.pt"
    torch.save({"w": torch.randn(16, 16)}, str(path))
    path.write_bytes(path.read_bytes()[:300])
    _refused(path, "torch.load", "truncated")


def test_cli_fill_weights_one_line(tmp_path, good, capsys):
    """The command line reports each corrupt checkpoint in one line, exit code 2."""
    with torch.device("meta"):
        meta = torch.nn.Linear(4, 4)
    from experimental_experiment.torch_interpreter import to_onnx

    model = tmp_path / "m.onnx"
    to_onnx(meta, (torch.randn(2, 4),), filename=str(model))
    header, body = _split(good)
    header["a"]["data_offsets"] = [0, 10**12]
    forged = _forge(tmp_path / "off.safetensors", header, body)
    cut = tmp_path / "cut.safetensors"
    cut.write_bytes(good.read_bytes()[:-20])
    huge = tmp_path / "huge.safetensors"
    huge.write_bytes(struct.pack("<Q", 2**40) + good.read_bytes()[8:])
    pt = tmp_path / "cut.pt"
    torch.save({"w": torch.randn(16, 16)}, str(pt))
    pt.write_bytes(pt.read_bytes()[:300])
    for ckpt in (forged, cut, huge, pt):
        rc = main(["fill-weights", str(model), str(ckpt)])
        err = capsys.readouterr().err
        assert rc == 2 and "Traceback" not in err, err
        assert len(err.strip().splitlines()) == 1 and str(ckpt) in err, err
