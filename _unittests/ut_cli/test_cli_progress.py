"""--progress/--no-progress of the subcommands doing long work (export, quantize,
package, fill-weights): on by default (drawn only on a terminal), off when asked."""

import io

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from experimental_experiment import progress
from experimental_experiment._command_lines import get_parser, main
from experimental_experiment.ext_test_case import fake_terminal

LONG_WORK = {
    "export": ["torch.nn:Tanh", "-o", "m.onnx"],
    "quantize": ["a.onnx", "b.onnx", "--precision", "int4"],
    "package": ["folder", "out"],
    "fill-weights": ["m.onnx", "w.safetensors"],
}


@pytest.mark.parametrize("command", sorted(LONG_WORK))
def test_progress_on_by_default(command):
    parser = get_parser()
    args = [command, *LONG_WORK[command]]
    assert parser.parse_args(args).progress is True
    assert parser.parse_args([*args, "--no-progress"]).progress is False


def _matmul_model(path) -> str:
    w = numpy_helper.from_array(np.ones((64, 64), dtype=np.float32), "w")
    graph = helper.make_graph(
        [
            helper.make_node("MatMul", ["x", "w"], ["h"], name="inner_matmul"),
            helper.make_node("Relu", ["h"], ["y"]),
        ],
        "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 64])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 64])],
        [w],
    )
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)]), path)
    return str(path)


def test_quantize_progress(monkeypatch, tmp_path, capsys):
    src = _matmul_model(tmp_path / "m.onnx")
    tty = fake_terminal(monkeypatch)
    args = ["quantize", src, str(tmp_path / "q.onnx"), "--precision", "int4", "--lm-head"]
    assert main(args) == 0
    assert "quantize int4: quantize" in tty.getvalue() and "inner_matmul" in tty.getvalue()
    tty.truncate(0)
    assert main([*args, "--no-progress"]) == 0
    assert tty.getvalue() == ""
    monkeypatch.setattr(progress.sys, "stderr", io.StringIO())  # redirected
    assert main(args) == 0
    assert progress.sys.stderr.getvalue() == ""
    capsys.readouterr()


def test_export_progress(monkeypatch, tmp_path, capsys):
    path = str(tmp_path / "tanh.onnx")
    tty = fake_terminal(monkeypatch)
    assert main(["export", "torch.nn:Tanh", "-o", path, "--shape", "3x4"]) == 0
    text = tty.getvalue()
    assert "to_onnx: convert" in text and "to_onnx: serialize" in text, text
    tty.truncate(0)
    assert main(["export", "torch.nn:Tanh", "-o", path, "--no-progress"]) == 0
    assert tty.getvalue() == ""
    capsys.readouterr()
