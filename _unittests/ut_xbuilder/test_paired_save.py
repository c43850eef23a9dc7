"""A model and its data file are replaced as one: a save killed at any step, or two
saves racing to one path, leave a model reading the data it was saved with; a data
file from another save is detected."""

import os
import shutil
import subprocess
import sys
import threading

import numpy as np
import onnx
import onnxruntime
import pytest
from onnx import TensorProto
from onnx import helper as oh
from onnx import numpy_helper as onh

from experimental_experiment.xbuilder.model_container import check_external_data, save_model

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def variant(kind: str) -> onnx.ModelProto:
    """Two models with the same weight layout, different graphs and weights:
    A: y = x @ w + b, B: y = x @ w - b."""
    rng = np.random.default_rng(0 if kind == "A" else 1)
    w = onh.from_array(rng.standard_normal((64, 32)).astype(np.float32), "w")
    b = onh.from_array(rng.standard_normal((32,)).astype(np.float32), "b")
    graph = oh.make_graph(
        [
            oh.make_node("MatMul", ["x", "w"], ["m"]),
            oh.make_node("Add" if kind == "A" else "Sub", ["m", "b"], ["y"]),
        ],
        kind,
        [oh.make_tensor_value_info("x", TensorProto.FLOAT, ["n", 64])],
        [oh.make_tensor_value_info("y", TensorProto.FLOAT, ["n", 32])],
        [w, b],
    )
    return oh.make_model(graph, opset_imports=[oh.make_opsetid("", 18)], ir_version=9)


def expected(kind: str, x: np.ndarray) -> np.ndarray:
    inits = {i.name: onh.to_array(i) for i in variant(kind).graph.initializer}
    m = x @ inits["w"]
    return m + inits["b"] if kind == "A" else m - inits["b"]


def read_pair(path) -> str:
    """What a reader sees: checks the pair is consistent, returns 'A' or 'B'. The model
    file is read once (another save may replace it meanwhile)."""
    from onnx.external_data_helper import load_external_data_for_model

    model = onnx.load(str(path), load_external_data=False)
    kind, folder = model.graph.name, os.path.dirname(str(path))
    check_external_data(model, folder)  # sizes and checksums
    load_external_data_for_model(model, folder)
    sess = onnxruntime.InferenceSession(
        model.SerializeToString(), providers=["CPUExecutionProvider"]
    )
    x = np.random.default_rng(5).standard_normal((3, 64)).astype(np.float32)
    np.testing.assert_allclose(sess.run(None, {"x": x})[0], expected(kind, x), atol=1e-5)
    return kind


# a save of model B to argv[1] killed (os._exit) at the argv[2]-th file operation
_CRASHING_SAVE = """
import os, sys
sys.path.insert(0, {root!r})
sys.path.insert(0, {tests!r})
from test_paired_save import variant
from experimental_experiment.xbuilder.model_container import save_model

calls = [0]
def crashing(fct):
    def wrapper(*args, **kwargs):
        if calls[0] == int(sys.argv[2]):
            os._exit(3)
        calls[0] += 1
        return fct(*args, **kwargs)
    return wrapper

for name in ("replace", "rename", "remove", "unlink", "fsync", "truncate", "ftruncate"):
    setattr(os, name, crashing(getattr(os, name)))
save_model(variant("B"), sys.argv[1], external_data=True, threshold=0)
"""


def test_killed_at_every_step(tmp_path):
    """The process saving B over A dies at each file operation in turn: the model on
    disk is A with A's data or B with B's data, never A's graph on B's weights."""
    script = tmp_path / "crash.py"
    script.write_text(_CRASHING_SAVE.format(root=ROOT, tests=os.path.dirname(__file__)))
    seen, left, step = [], [], 0
    while step < 50:
        folder = tmp_path / f"step{step}"
        folder.mkdir()
        path = folder / "m.onnx"
        save_model(variant("A"), str(path), external_data=True, threshold=0)
        rc = subprocess.run(
            [sys.executable, str(script), str(path), str(step)], capture_output=True, text=True
        ).returncode
        assert rc in (0, 3)
        try:
            seen.append(read_pair(path))
        except AssertionError as e:  # A's graph on B's weights
            seen.append(f"mixed pair after a kill at step {step}: {str(e)[:80]}")
        # the next save cleans what the killed one left
        save_model(variant("A"), str(path), external_data=True, threshold=0)
        left.append(sorted(os.listdir(folder)))
        if rc == 0:
            break
        step += 1
    assert rc == 0 and seen[-1] == "B" and "A" in seen, seen
    assert set(seen) == {"A", "B"}, seen
    assert all(len(files) == 2 for files in left), left


def _failing(real, when):
    calls = [0]

    def wrapper(*args, **kwargs):
        calls[0] += 1
        if calls[0] == when:
            raise OSError(28, "No space left on device")
        return real(*args, **kwargs)

    return wrapper


@pytest.mark.parametrize("name", ["replace", "fsync", "remove"])
def test_failure_at_each_step(tmp_path, monkeypatch, name):
    """An error raised by each file operation in turn, in process."""
    for when in range(1, 6):
        folder = tmp_path / f"{name}{when}"
        path = folder / "m.onnx"
        save_model(variant("A"), str(path), external_data=True, threshold=0)
        with monkeypatch.context() as m:
            m.setattr(os, name, _failing(getattr(os, name), when))
            try:
                save_model(variant("B"), str(path), external_data=True, threshold=0)
            except OSError:
                pass
        assert read_pair(path) in ("A", "B")


def test_concurrent_saves(tmp_path, monkeypatch):
    """Two threads save A and B to one path, renames slowed down to interleave them,
    while a third one reads the model: it may find a data file gone (the model was
    replaced while it read), never a model on the data of another save."""
    import time

    from experimental_experiment.xbuilder.safe_paths import ExternalDataError, StaleDataError

    real = os.replace

    def slow(*args, **kwargs):
        time.sleep(0.02)
        return real(*args, **kwargs)

    monkeypatch.setattr(os, "replace", slow)
    path = tmp_path / "m.onnx"
    save_model(variant("A"), str(path), external_data=True, threshold=0)
    errors, mixes, reads, done = [], [], [], threading.Event()

    def save(kind):
        try:
            for _ in range(6):
                save_model(variant(kind), str(path), external_data=True, threshold=0)
        except Exception as e:  # pragma: no cover - reported below
            errors.append(e)

    def read():
        while not done.is_set():
            try:
                reads.append(read_pair(path))
            except (AssertionError, StaleDataError) as e:
                mixes.append(e)
            except (ExternalDataError, OSError):
                pass  # a data file removed after the reader loaded the model

    reader = threading.Thread(target=read)
    reader.start()
    threads = [threading.Thread(target=save, args=(k,)) for k in "AB"]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    done.set()
    reader.join()
    assert errors == [] and mixes == [], (errors, mixes[:3])
    assert reads, "the reader never read the model"
    assert read_pair(path) in ("A", "B")
    assert len(os.listdir(tmp_path)) == 2, os.listdir(tmp_path)  # no lock, no orphan


def test_foreign_data_file_detected(tmp_path):
    """The data file of another save, same size (same layout, other weights), copied
    next to the model: the check refuses it, the command line too."""
    from experimental_experiment._command_lines import main
    from experimental_experiment.xbuilder.safe_paths import StaleDataError

    for kind in "AB":
        save_model(variant(kind), str(tmp_path / kind / "m.onnx"), external_data=True, threshold=0)
    model = onnx.load(str(tmp_path / "A" / "m.onnx"), load_external_data=False)
    loc = next(e.value for e in model.graph.initializer[0].external_data if e.key == "location")
    other = [f for f in os.listdir(tmp_path / "B") if f.endswith(".data")]
    shutil.copyfile(tmp_path / "B" / other[0], tmp_path / "A" / loc)
    with pytest.raises(StaleDataError, match="another save"):
        check_external_data(model, str(tmp_path / "A"))
    check_external_data(model, str(tmp_path / "A"), checksum=False)  # same size
    assert main(["print", str(tmp_path / "A" / "m.onnx")]) == 2


def test_data_file_named_after_content(tmp_path):
    """Deterministic: the same model gives the same files wherever it is saved."""
    files = []
    for folder in ("one", "two"):
        path = tmp_path / folder / "m.onnx"
        save_model(variant("A"), str(path), external_data=True, threshold=0)
        files.append({f: (path.parent / f).read_bytes() for f in os.listdir(path.parent)})
    assert files[0] == files[1]
    names = sorted(files[0])
    assert names[0] == "m.onnx" and names[1].startswith("m.onnx.") and names[1].endswith(".data")


def test_small_model_replacing_large_one_removes_its_data(tmp_path):
    path = tmp_path / "m.onnx"
    save_model(variant("A"), str(path), external_data=True, threshold=0)
    save_model(variant("B"), str(path))  # no external data
    assert os.listdir(tmp_path) == ["m.onnx"]
    assert read_pair(path) == "B"


def test_model_without_data_saved_unchanged(tmp_path):
    model = variant("A")
    before = model.SerializeToString()
    save_model(model, str(tmp_path / "m.onnx"))
    assert model.SerializeToString() == before
    assert (tmp_path / "m.onnx").read_bytes() == before
