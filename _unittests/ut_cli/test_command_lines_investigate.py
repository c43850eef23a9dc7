"""run, compare, find, report, export on a tiny Llama and on bad files."""

import json

import numpy as np
import onnx
import pytest

from experimental_experiment._command_lines import main


def _run(capsys, *argv):
    rc = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    assert "Traceback" not in err
    if rc != 0:
        assert len(err.strip().splitlines()) == 1, err  # a one-line reason
    return rc, out, err


@pytest.fixture(scope="module")
def llama(tmp_path_factory):
    folder = tmp_path_factory.mktemp("llama")
    model, report = folder / "llama.onnx", folder / "llama.json"
    assert main(["export", "llama", "-o", str(model), "--report", str(report)]) == 0
    return model, report


def test_export_llama_and_report(llama, capsys, tmp_path):
    model, report = llama
    onnx.checker.check_model(onnx.load(str(model)))
    data = json.loads(report.read_text())
    assert data["status"] == "success" and data["capture_attempts"][0]["success"]
    rc, out, _ = _run(capsys, "report", report)
    assert rc == 0 and "# Export report: LlamaForCausalLM" in out
    rc, out, _ = _run(capsys, "report", report, "--format", "sarif")
    assert rc == 0 and json.loads(out)["version"] == "2.1.0"
    rc, out, _ = _run(capsys, "report", report, "-o", tmp_path / "r.md")
    assert rc == 0 and (tmp_path / "r.md").read_text().startswith("# Export report")


def test_run_random_and_npz(llama, capsys, tmp_path):
    model, _ = llama
    rc, out, _ = _run(capsys, "run", model, "--repeat", 3)
    assert rc == 0 and "median time" in out
    onx = onnx.load(str(model))
    from experimental_experiment._command_lines_investigate import random_inputs

    feeds = random_inputs(onx, {}, seed=1)
    np.savez(tmp_path / "in.npz", **feeds)
    rc, out, _ = _run(capsys, "run", model, "--inputs", tmp_path / "in.npz", "--repeat", 1)
    assert rc == 0 and "output_0: float32" in out


def test_compare_and_find(llama, capsys, tmp_path):
    model, _ = llama
    rc, out, _ = _run(capsys, "compare", model, model)
    assert rc == 0 and "same results" in out
    # a model whose first output is changed differs
    onx = onnx.load(str(model))
    out0 = onx.graph.output[0].name
    for node in onx.graph.node:
        for k, o in enumerate(node.output):
            if o == out0:
                node.output[k] = out0 + "_raw"
    onx.graph.node.append(onnx.helper.make_node("Neg", [out0 + "_raw"], [out0]))
    onnx.save(onx, str(tmp_path / "neg.onnx"))
    rc, _, err = _run(capsys, "compare", model, tmp_path / "neg.onnx")
    assert rc == 1 and "max abs diff" in err
    rc, out, _ = _run(capsys, "find", model, "input_ids")
    assert rc == 0 and "input of the main graph" in out and "used by node" in out
    rc, _, err = _run(capsys, "find", model, "no_such_name")
    assert rc == 1 and "not found" in err


def test_export_module_class_and_compare_with_torch(capsys, tmp_path):
    path = tmp_path / "relu.onnx"
    rc, _, _ = _run(
        capsys, "export", "torch.nn:Tanh", "-o", path, "--shape", "3x4", "--dynamic", "0"
    )
    assert rc == 0
    dim = onnx.load(str(path)).graph.input[0].type.tensor_type.shape.dim[0]
    assert dim.dim_param == "dim0"
    rc, out, _ = _run(capsys, "compare", path, "torch.nn:Tanh", "--dim", "dim0=5")
    assert rc == 0 and "shape (5, 4)" in out


@pytest.mark.parametrize("command", ["run", "find", "compare", "report"])
def test_bad_files(command, capsys, tmp_path):
    garbage = tmp_path / "bad.onnx"
    garbage.write_bytes(b"\x08\x07garbage")
    missing = tmp_path / "missing.onnx"
    extra = {"find": ["x"], "compare": [garbage]}.get(command, [])
    for path in [missing, garbage]:
        rc, _, err = _run(capsys, command, path, *extra)
        assert rc == 2 and err.startswith(f"{command}: ")


def test_truncated_report_and_inputs(llama, capsys, tmp_path):
    model, report = llama
    (tmp_path / "t.json").write_text(report.read_text()[:80])
    rc, _, err = _run(capsys, "report", tmp_path / "t.json")
    assert rc == 2 and "not valid JSON" in err
    (tmp_path / "other.json").write_text('{"nodes": 1}')
    rc, _, err = _run(capsys, "report", tmp_path / "other.json")
    assert rc == 2 and "unknown fields" in err
    (tmp_path / "in.npz").write_bytes(b"PK\x03\x04truncated")
    rc, _, err = _run(capsys, "run", model, "--inputs", tmp_path / "in.npz")
    assert rc == 2 and "cannot read inputs" in err
    rc, _, err = _run(capsys, "export", "no_such_arch", "-o", tmp_path / "m.onnx")
    assert rc == 2 and "unknown architecture" in err
    assert not (tmp_path / "m.onnx").exists()


@pytest.mark.parametrize(
    "command", ["run", "compare", "find", "report", "export", "lighten", "unlighten"]
)
def test_help(command, capsys):
    with pytest.raises(SystemExit) as info:
        main([command, "--help"])
    assert info.value.code == 0
    assert f"{command}" in capsys.readouterr().out


def test_lighten_unlighten_round_trip(llama, capsys, tmp_path):
    model, _ = llama
    light, back = tmp_path / "light.onnx", tmp_path / "back.onnx"
    rc, out, _ = _run(capsys, "lighten", model, light)
    assert rc == 0 and (tmp_path / "light.onnx.npz").exists()
    assert light.stat().st_size < model.stat().st_size / 3
    onx = onnx.load(str(light))
    stats = [i.doc_string for i in onx.graph.initializer if i.doc_string]
    assert stats and '"std"' in stats[0]
    rc, _, _ = _run(capsys, "unlighten", light, back)
    assert rc == 0 and back.read_bytes() == model.read_bytes()
    rc, _, _ = _run(capsys, "unlighten", light, tmp_path / "rnd.onnx", "--random")
    assert rc == 0
    rc, out, _ = _run(capsys, "run", tmp_path / "rnd.onnx", "--repeat", 1)
    assert rc == 0 and "output_0" in out


def test_unlighten_bad_weights(llama, capsys, tmp_path):
    model, _ = llama
    light = tmp_path / "light.onnx"
    assert main(["lighten", str(model), str(light)]) == 0
    capsys.readouterr()
    rc, _, err = _run(
        capsys, "unlighten", light, tmp_path / "o.onnx", "--weights", tmp_path / "none.npz"
    )
    assert rc == 2 and "no file" in err
    np.savez(tmp_path / "wrong.npz", x=np.zeros(3))
    rc, _, err = _run(
        capsys, "unlighten", light, tmp_path / "o.onnx", "--weights", tmp_path / "wrong.npz"
    )
    assert rc == 2 and "no weight for initializer" in err
    (tmp_path / "trunc.npz").write_bytes((tmp_path / "light.onnx.npz").read_bytes()[:100])
    rc, _, err = _run(
        capsys, "unlighten", light, tmp_path / "o.onnx", "--weights", tmp_path / "trunc.npz"
    )
    assert rc == 2 and "cannot read weights" in err
    assert not (tmp_path / "o.onnx").exists()
