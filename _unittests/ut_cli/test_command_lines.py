"""Tests of the command line ``python -m experimental_experiment`` on a tiny model."""

import os
import subprocess
import sys

import numpy as np
import onnx
import onnxruntime
import pytest
from onnx import TensorProto
from onnx import helper as oh
from onnx import numpy_helper as onh

from experimental_experiment._command_lines import DELEGATED, get_help, main, save_model
from experimental_experiment.helpers import format_statistics, model_statistics, pretty_onnx

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def tiny_model() -> onnx.ModelProto:
    "Two transposes cancelling each other, a MatMul, an Add and an If with two branches."
    two = onh.from_array(np.array([2], dtype=np.float32), "two")
    then = oh.make_graph(
        [oh.make_node("Mul", ["x", "two"], ["y1"])],
        "then",
        [],
        [oh.make_tensor_value_info("y1", TensorProto.FLOAT, None)],
        [two],
    )
    other = oh.make_graph(
        [oh.make_node("Identity", ["x"], ["y2"])],
        "else",
        [],
        [oh.make_tensor_value_info("y2", TensorProto.FLOAT, None)],
    )
    graph = oh.make_graph(
        [
            oh.make_node("Transpose", ["x"], ["xt"], perm=[1, 0]),
            oh.make_node("Transpose", ["xt"], ["xtt"], perm=[1, 0]),
            oh.make_node("MatMul", ["xtt", "w"], ["mm"]),
            oh.make_node("Add", ["mm", "b"], ["z"]),
            oh.make_node("ReduceSum", ["x"], ["s"], keepdims=0),
            oh.make_node("Greater", ["s", "zero"], ["c"]),
            oh.make_node("If", ["c"], ["y"], then_branch=then, else_branch=other),
        ],
        "tiny",
        [oh.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 4])],
        [
            oh.make_tensor_value_info("z", TensorProto.FLOAT, ["batch", 3]),
            oh.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", 4]),
        ],
        [
            onh.from_array(np.arange(12).reshape(4, 3).astype(np.float32), "w"),
            onh.from_array(np.array([1, 2, 3], dtype=np.float32), "b"),
            onh.from_array(np.array(0, dtype=np.float32), "zero"),
        ],
    )
    model = oh.make_model(graph, opset_imports=[oh.make_opsetid("", 18)], ir_version=9)
    onnx.checker.check_model(model)
    return model


@pytest.fixture
def model_path(tmp_path):
    path = str(tmp_path / "tiny.onnx")
    onnx.save(tiny_model(), path)
    return path


def run_cli(*args):
    return subprocess.run(
        [sys.executable, "-m", "experimental_experiment", *args],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=300,
    )


def test_help_lists_every_subcommand(capsys):
    with pytest.raises(SystemExit) as e:
        main(["--help"])
    assert e.value.code == 0
    text = capsys.readouterr().out
    for name in ["print", "stats", "optimize", *DELEGATED]:
        assert name in text


def test_no_subcommand_prints_help(capsys):
    assert main([]) == 0
    assert "usage: python -m experimental_experiment" in capsys.readouterr().out


def test_print(model_path):
    res = run_cli("print", model_path)
    assert res.returncode == 0, res.stderr
    lines = res.stdout.splitlines()
    assert "input: x FLOAT[batch,4]" in lines
    assert "output: z FLOAT[batch,3]" in lines
    assert "Transpose(x, perm=[1, 0]) -> xt" in lines
    assert "init: b FLOAT[3] = [1.0,2.0,3.0]" in lines
    # the branches of If are indented under it
    assert "        Mul(x, two) -> y1" in lines


def test_stats(model_path):
    res = run_cli("stats", model_path, "--top", "1")
    assert res.returncode == 0, res.stderr
    assert res.stdout.startswith("nodes: 9\n")
    assert "  Transpose      2" in res.stdout
    assert "initializers: 3, 64 B" in res.stdout
    assert "w FLOAT[4,3] 48 B" in res.stdout
    assert "... 2 more" in res.stdout


def test_missing_file_is_one_line_error(tmp_path):
    res = run_cli("stats", str(tmp_path / "missing.onnx"))
    assert res.returncode == 2
    assert "no file" in res.stderr and "Traceback" not in res.stderr


def test_not_an_onnx_file(tmp_path):
    path = tmp_path / "bad.onnx"
    path.write_bytes(b"\xff\xfenot a model")
    assert main(["print", str(path)]) == 2


def test_model_statistics_subgraphs_and_functions():
    model = tiny_model()
    fct = oh.make_function(
        "local",
        "Twice",
        ["a"],
        ["b"],
        [oh.make_node("Add", ["a", "a"], ["b"])],
        [oh.make_opsetid("", 18)],
    )
    model.functions.append(fct)
    stats = model_statistics(model)
    assert stats["n_nodes"] == 9  # the two nodes of the branches included
    assert stats["op_types"]["Transpose"] == 2
    assert stats["function_nodes"] == {"Add": 1}
    assert [r[0] for r in stats["initializers"]] == ["w", "b", "zero"]
    assert "local functions: 1" in format_statistics(stats)
    text = pretty_onnx(model)
    assert "function local.Twice(a)" in text and "    return b" in text


def test_save_model_leaves_no_temporary_file(tmp_path):
    path = str(tmp_path / "out.onnx")
    save_model(tiny_model(), path)
    save_model(tiny_model(), path)  # replaces an existing file
    assert os.listdir(tmp_path) == ["out.onnx"]
    assert len(onnx.load(path).graph.node) == 7


def test_optimize(model_path, tmp_path):
    xoptim = pytest.importorskip("experimental_experiment.xoptim")
    if not hasattr(xoptim, "optimize"):
        pytest.skip("experimental_experiment.xoptim.optimize does not exist yet")
    out = str(tmp_path / "opt.onnx")
    res = run_cli("optimize", model_path, out, "--patterns", "default", "--verbose", "1")
    assert res.returncode == 0, res.stderr
    assert "optimize: 7 ->" in res.stdout
    # --verbose 1 lists what matched: at least the two transposes cancelling each other
    assert "applied" in res.stdout.splitlines()[1]
    assert len(res.stdout.splitlines()) >= 3
    optimized = onnx.load(out)
    assert len(optimized.graph.node) <= 7
    x = np.random.randn(5, 4).astype(np.float32)
    expected = onnxruntime.InferenceSession(model_path).run(None, {"x": x})
    got = onnxruntime.InferenceSession(out).run(None, {"x": x})
    for e, g in zip(expected, got):
        np.testing.assert_allclose(e, g, rtol=1e-5)


def test_optimize_without_xoptim_is_clear(model_path, tmp_path, monkeypatch):
    import experimental_experiment.xoptim as xoptim

    monkeypatch.delattr(xoptim, "optimize", raising=False)
    assert main(["optimize", model_path, str(tmp_path / "o.onnx")]) == 1
    assert not os.path.exists(tmp_path / "o.onnx")


@pytest.mark.parametrize("name", [None, "print", "stats", "optimize"])
def test_get_help(name):
    text = get_help(name)
    assert text.startswith("usage: python -m experimental_experiment")


def test_get_help_delegated():
    # the benchmark parsers show the name of the subcommand
    text = get_help("backend-speed")
    assert "usage: python -m experimental_experiment backend-speed" in text
    assert "--repeat" in text


def test_cli_does_not_import_torch(model_path):
    code = (
        "import sys; import experimental_experiment.helpers; "
        "from experimental_experiment._command_lines import main; "
        f"main(['stats', {model_path!r}]); assert 'torch' not in sys.modules, 'torch'"
    )
    res = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=120
    )
    assert res.returncode == 0, res.stderr
