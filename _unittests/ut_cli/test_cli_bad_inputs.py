"""Every subcommand reading a model refuses a folder, an empty file, a file which is not
an ONNX model and a truncated one in one line on stderr with exit code 2."""

import numpy as np
import onnx
import pytest
from onnx import TensorProto
from onnx import helper as oh
from onnx import numpy_helper as onh

from experimental_experiment._command_lines import main


def _model() -> onnx.ModelProto:
    graph = oh.make_graph(
        [oh.make_node("Add", ["x", "w"], ["y"])],
        "g",
        [oh.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3])],
        [oh.make_tensor_value_info("y", TensorProto.FLOAT, [2, 3])],
        [onh.from_array(np.ones((2, 3), dtype=np.float32), "w")],
    )
    return oh.make_model(graph, opset_imports=[oh.make_opsetid("", 18)], ir_version=9)


def _bad_file(tmp_path, kind: str):
    """(path, words the message must contain)."""
    path = tmp_path / f"{kind}.onnx"
    data = _model().SerializeToString()
    if kind == "folder":
        path.mkdir()
        return path, "is a folder"
    if kind == "empty":
        path.write_bytes(b"")
        return path, "is empty"
    if kind == "tensor":  # a TensorProto parses as a ModelProto without graph
        path.write_bytes(onh.from_array(np.arange(6, dtype=np.int64)).SerializeToString())
        return path, "no graph"
    if kind == "text":
        path.write_bytes(b"\xff\xfenot a model")
        return path, "not an ONNX model"
    if kind == "cut_inside":  # inside the graph: protobuf fails
        path.write_bytes(data[: len(data) // 2])
        return path, "not an ONNX model"
    # cut between the graph and the opsets: protobuf parses a partial model
    no_opset = _model()
    del no_opset.opset_import[:]
    prefix = no_opset.SerializeToString()
    assert data.startswith(prefix) and len(prefix) < len(data)
    path.write_bytes(prefix)
    return path, "truncated (no opset_import)"


COMMANDS = {
    "print": [],
    "stats": [],
    "optimize": ["{tmp}/o.onnx"],
    "lighten": ["{tmp}/l.onnx"],
    "unlighten": ["{tmp}/u.onnx", "--random"],
    "fill-weights": ["{tmp}/w.pt"],
    "run": [],
    "find": ["y"],
    "compare": ["{tmp}/good.onnx"],
}
KINDS = ["folder", "empty", "tensor", "text", "cut_inside", "cut_between"]


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("command", sorted(COMMANDS))
def test_bad_model_one_line(tmp_path, capsys, command, kind):
    onnx.save(_model(), str(tmp_path / "good.onnx"))
    import torch

    torch.save({"w": torch.ones(2, 3)}, str(tmp_path / "w.pt"))
    path, words = _bad_file(tmp_path, kind)
    extra = [a.format(tmp=tmp_path) for a in COMMANDS[command]]
    rc = main([command, str(path), *extra])
    err = capsys.readouterr().err
    assert rc == 2, (rc, err)
    assert "Traceback" not in err and len(err.strip().splitlines()) == 1, err
    assert err.startswith(f"{command}: ") and str(path) in err and words in err, err
    for out in ("o.onnx", "l.onnx", "u.onnx"):
        assert not (tmp_path / out).exists()


@pytest.mark.parametrize("kind", ["folder", "empty", "cut_between"])
def test_compare_bad_other(tmp_path, capsys, kind):
    onnx.save(_model(), str(tmp_path / "good.onnx"))
    path, words = _bad_file(tmp_path, kind)
    rc = main(["compare", str(tmp_path / "good.onnx"), str(path)])
    err = capsys.readouterr().err
    assert rc == 2 and len(err.strip().splitlines()) == 1 and words in err, err


def test_good_model_still_accepted(tmp_path, capsys):
    onnx.save(_model(), str(tmp_path / "good.onnx"))
    assert main(["print", str(tmp_path / "good.onnx")]) == 0
    assert "Add" in capsys.readouterr().out
