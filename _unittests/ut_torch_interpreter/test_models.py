"""End-to-end exports: a tiny Llama, a small CNN, and the contract of to_onnx
(determinism, filename, errors, return_builder, names, graph modules and programs)."""

import os

import numpy as np
import onnx
import pytest
import torch

from experimental_experiment.ext_test_case import assert_close, run_onnx
from experimental_experiment.torch_interpreter import (
    InvalidArgumentError,
    UnsupportedOpError,
    to_onnx,
)
from experimental_experiment.xbuilder import GraphBuilder

LLAMA_DS = {"input_ids": {0: "batch", 1: "seq"}, "attention_mask": {0: "batch", 1: "seq"}}


def _dims(value_info) -> list:
    return [d.dim_param or d.dim_value for d in value_info.type.tensor_type.shape.dim]


def _tiny_llama(attn_implementation: str):
    transformers = pytest.importorskip("transformers")
    config = transformers.LlamaConfig(
        hidden_size=32,
        num_hidden_layers=1,
        vocab_size=1024,
        intermediate_size=64,
        max_position_embeddings=512,
        num_attention_heads=4,
        num_key_value_heads=2,
    )
    config._attn_implementation = attn_implementation
    config.use_cache = False
    torch.manual_seed(0)
    return transformers.LlamaModel(config).eval()


def _llama_inputs(batch: int, seq: int, pad: int = 0):
    """input_ids and an int64 attention mask, the last ``pad`` tokens masked."""
    gen = torch.Generator().manual_seed(batch * 100 + seq)
    ids = torch.randint(0, 1024, (batch, seq), generator=gen)
    mask = torch.ones((batch, seq), dtype=torch.int64)
    if pad:
        mask[-1, -pad:] = 0  # right padding: no query row is fully masked
    return ids, mask


def _export_llama(model, *, no_grad: bool = True):
    ids, mask = _llama_inputs(2, 8)
    with torch.set_grad_enabled(not no_grad):
        return to_onnx(model, (ids,), dict(attention_mask=mask), dynamic_shapes=LLAMA_DS)


@pytest.mark.parametrize("attn", ["eager", "sdpa"])
def test_tiny_llama(attn):
    model = _tiny_llama(attn)
    onx = _export_llama(model)
    assert [i.name for i in onx.graph.input] == ["input_ids", "attention_mask"]
    for inp in onx.graph.input:
        assert _dims(inp) == ["batch", "seq"], f"{inp.name}: {_dims(inp)}"
    assert _dims(onx.graph.output[0]) == ["batch", "seq", 32]
    onnx.checker.check_model(onx, full_check=True)
    # a batch and a sequence length different from the export inputs
    for batch, seq, pad in [(3, 13, 4), (1, 5, 0)]:
        ids, mask = _llama_inputs(batch, seq, pad)
        with torch.no_grad():
            expected = model(ids, attention_mask=mask).last_hidden_state
        got = run_onnx(onx, [ids, mask])
        assert len(got) == 1
        assert_close(expected, got[0], atol=1e-4, rtol=1e-4, msg=f"{attn} {batch}x{seq}")


def test_tiny_llama_exported_with_grad_enabled():
    """The rotary embedding's ``@torch.no_grad()`` becomes a higher-order operator
    (wrap_with_set_grad_enabled) when the export runs with grad enabled."""
    model = _tiny_llama("sdpa")
    onx = _export_llama(model, no_grad=False)
    ids, mask = _llama_inputs(3, 11, 2)
    with torch.no_grad():
        expected = model(ids, attention_mask=mask).last_hidden_state
    assert_close(expected, run_onnx(onx, [ids, mask])[0], atol=1e-4, rtol=1e-4)


class SmallCNN(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.features = torch.nn.Sequential(
            torch.nn.Conv2d(3, 8, 3, padding=1),
            torch.nn.BatchNorm2d(8),
            torch.nn.ReLU(),
            torch.nn.MaxPool2d(2),
            torch.nn.Conv2d(8, 16, 3),
            torch.nn.BatchNorm2d(16),
            torch.nn.ReLU(),
            torch.nn.AdaptiveAvgPool2d(1),
        )
        self.head = torch.nn.Linear(16, 10)

    def forward(self, x):
        return self.head(torch.flatten(self.features(x), 1))


def _cnn():
    torch.manual_seed(0)
    model = SmallCNN()
    for bn in (model.features[1], model.features[5]):  # non trivial running stats
        bn.running_mean.uniform_(-0.5, 0.5)
        bn.running_var.uniform_(0.5, 2.0)
        bn.weight.data.uniform_(0.5, 1.5)
        bn.bias.data.uniform_(-0.5, 0.5)
    return model.eval()


def _export_cnn(model, **kwargs):
    with torch.no_grad():
        return to_onnx(
            model, (torch.randn(2, 3, 16, 16),), dynamic_shapes=({0: "batch"},), **kwargs
        )


def test_small_cnn():
    model = _cnn()
    onx = _export_cnn(model)
    assert _dims(onx.graph.input[0]) == ["batch", 3, 16, 16]
    assert _dims(onx.graph.output[0]) == ["batch", 10]
    onnx.checker.check_model(onx, full_check=True)
    for batch in (2, 5):
        x = torch.randn(batch, 3, 16, 16)
        with torch.no_grad():
            expected = model(x)
        assert_close(expected, run_onnx(onx, [x])[0], atol=1e-4, rtol=1e-4, msg=f"batch={batch}")


def test_deterministic_llama():
    model = _tiny_llama("eager")
    first = _export_llama(model).SerializeToString()
    second = _export_llama(model).SerializeToString()
    assert first == second


def test_deterministic_cnn():
    model = _cnn()
    assert _export_cnn(model).SerializeToString() == _export_cnn(model).SerializeToString()


_HASH_SCRIPT = """
import hashlib, sys
sys.path.insert(0, {folder!r})
import test_models as t
for onx in (t._export_cnn(t._cnn()), t._export_llama(t._tiny_llama("eager"))):
    print(hashlib.sha256(onx.SerializeToString()).hexdigest())
"""


def test_deterministic_across_processes():
    """Set and dict orders must not depend on the hash seed of the process."""
    import subprocess
    import sys

    script = _HASH_SCRIPT.format(folder=os.path.dirname(os.path.abspath(__file__)))
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", script],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=dict(os.environ, PYTHONHASHSEED=seed),
        )
        for seed in ("1", "2")
    ]
    digests = []
    for proc in procs:
        out, err = proc.communicate(timeout=300)
        assert proc.returncode == 0, err[-3000:]
        digests.append(out.split())
    assert len(digests[0]) == 2 and digests[0] == digests[1]


def test_filename_saves_the_model(tmp_path):
    filename = str(tmp_path / "sub" / "cnn.onnx")
    onx = _export_cnn(_cnn(), filename=filename)
    with open(filename, "rb") as f:
        assert f.read() == onx.SerializeToString()
    assert onnx.load(filename).SerializeToString() == onx.SerializeToString()
    assert sorted(os.listdir(tmp_path / "sub")) == ["cnn.onnx"]  # no temporary file left


@torch.library.custom_op("ee_test_models::no_converter", mutates_args=())
def no_converter(x: torch.Tensor) -> torch.Tensor:
    # through numpy: not traceable, the fallback inlining the implementation cannot help
    return torch.from_numpy(x.detach().numpy().copy())


@no_converter.register_fake
def _no_converter_fake(x):
    return torch.empty_like(x)


class UsesCustomOp(torch.nn.Module):
    def forward(self, x):
        y = x * 2
        return torch.ops.ee_test_models.no_converter(y) + 1  # line named by the error


def test_unsupported_op_names_op_node_and_source_line(tmp_path):
    filename = str(tmp_path / "model.onnx")
    with pytest.raises(UnsupportedOpError) as e:
        to_onnx(
            UsesCustomOp(), (torch.randn(2, 3),), dynamic_shapes=({0: "batch"},), filename=filename
        )
    msg = str(e.value)
    assert "ee_test_models.no_converter" in msg, msg
    assert "no_converter" in msg and "node" in msg, msg
    assert "test_models.py" in msg, msg
    assert "torch.ops.ee_test_models.no_converter(y) + 1" in msg, msg
    assert os.listdir(tmp_path) == []  # neither the model nor a temporary file


def test_output_folder_refused_before_export(tmp_path, monkeypatch):
    from experimental_experiment.xbuilder.safe_paths import OutputPathError

    target = tmp_path / "model.onnx"
    target.mkdir()  # a folder cannot be replaced by a file
    monkeypatch.setattr(torch.export, "export", _no_capture)  # refused before capture
    with pytest.raises(OutputPathError, match="is a folder"):
        _export_cnn(_cnn(), filename=str(target))
    assert os.listdir(tmp_path) == ["model.onnx"]
    assert os.listdir(target) == []


class TwoInputs(torch.nn.Module):
    def forward(self, x, y):
        return x + y, x * y


def _no_capture(*args, **kwargs):
    raise AssertionError("torch.export was called before the arguments were checked")


@pytest.mark.parametrize(
    "args, dynamic_shapes, match",
    [
        (torch.randn(2, 3), None, "tuple"),
        ((torch.randn(2, 3), torch.randn(2, 3)), ({0: "batch"},), "elements"),
        ((torch.randn(2, 3), torch.randn(2, 3)), ({0: "b"}, {0: "b"}, {0: "b"}), "elements"),
        ((torch.randn(2, 3), torch.randn(2, 3)), {"x": {0: "b"}, "z": {0: "b"}}, "'z'"),
    ],
)
def test_invalid_arguments(monkeypatch, args, dynamic_shapes, match):
    import experimental_experiment.torch_interpreter.capture.prepare as prepare

    monkeypatch.setattr(prepare, "capture", _no_capture)
    monkeypatch.setattr(torch.export, "export", _no_capture)
    with pytest.raises(InvalidArgumentError, match=match):
        to_onnx(TwoInputs(), args, dynamic_shapes=dynamic_shapes)


def _two_inputs(batch):
    return torch.randn(batch, 3), torch.randn(batch, 3)


def _check_two_outputs(onx, input_names):
    for batch in (2, 7):
        x, y = _two_inputs(batch)
        got = run_onnx(onx, [x, y])
        for exp, res in zip(TwoInputs()(x, y), got):
            assert_close(exp, res, atol=1e-5, rtol=1e-5)
    assert [i.name for i in onx.graph.input] == input_names


def test_return_builder_and_names():
    result = to_onnx(
        TwoInputs(),
        _two_inputs(2),
        dynamic_shapes=({0: "n"}, {0: "n"}),
        input_names=["A", "B"],
        output_names=["S", "P"],
        return_builder=True,
    )
    assert isinstance(result, tuple) and len(result) == 2
    onx, builder = result
    assert isinstance(onx, onnx.ModelProto)
    assert isinstance(builder, GraphBuilder)
    assert [o.name for o in onx.graph.output] == ["S", "P"]
    assert _dims(onx.graph.output[0]) == ["n", 3]
    _check_two_outputs(onx, ["A", "B"])


def test_wrong_number_of_names():
    with pytest.raises(InvalidArgumentError):
        to_onnx(TwoInputs(), _two_inputs(2), input_names=["A"])
    with pytest.raises(InvalidArgumentError):
        to_onnx(TwoInputs(), _two_inputs(2), output_names=["S", "P", "Q"])


def test_exported_program():
    d = torch.export.Dim.DYNAMIC
    ep = torch.export.export(TwoInputs(), _two_inputs(2), dynamic_shapes=({0: d}, {0: d}))
    onx = to_onnx(ep)
    _check_two_outputs(onx, ["x", "y"])
    assert isinstance(_dims(onx.graph.input[0])[0], str)  # still dynamic


def _aot_graph_module(model, x):
    """The graph module a torch.compile backend built on aot_autograd receives."""
    from torch._dynamo.backends.common import aot_autograd

    captured = []

    def fw_compiler(gm, example_inputs):
        captured.append((gm, example_inputs))
        return gm.forward

    torch._dynamo.reset()
    with torch.no_grad():
        compiled = torch.compile(
            model, backend=aot_autograd(fw_compiler=fw_compiler), dynamic=True, fullgraph=True
        )
        compiled(x)
    assert len(captured) == 1
    return captured[0]


def test_graph_module_from_a_backend():
    from experimental_experiment.torch_interpreter._torch_models import create_input_names

    model = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.ReLU()).eval()
    x = torch.randn(3, 4)
    gm, fake_args = _aot_graph_module(model, x)
    # weight, bias, batch size (a SymInt), x
    args = (model[0].weight, model[0].bias, 3, x)
    assert len(fake_args) == len(args)
    names = create_input_names(gm, args)
    onx, builder = to_onnx(gm, args, input_names=names, return_builder=True)
    assert isinstance(builder, GraphBuilder)
    assert [i.name for i in onx.graph.input] == names
    for batch in (3, 6):
        x = torch.randn(batch, 4)
        with torch.no_grad():
            expected = model(x)
        feeds = [
            model[0].weight.detach(),
            model[0].bias.detach(),
            torch.tensor(batch, dtype=torch.int64),
            x,
        ]
        assert_close(expected, run_onnx(onx, feeds)[0], atol=1e-5, rtol=1e-5)


def test_graph_module_of_an_exported_program():
    d = torch.export.Dim.DYNAMIC
    model = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.ReLU()).eval()
    ep = torch.export.export(model, (torch.randn(3, 4),), dynamic_shapes=({0: d},))
    gm = ep.graph_module  # parameters are placeholders
    onx = to_onnx(gm, (model[0].weight, model[0].bias, torch.randn(3, 4)))
    assert len(onx.graph.input) == 3
    x = torch.randn(5, 4)
    with torch.no_grad():
        expected = model(x)
    got = run_onnx(onx, [model[0].weight.detach(), model[0].bias.detach(), x])
    np.testing.assert_allclose(got[0], expected.numpy(), atol=1e-5)


def test_source_line_is_the_users_not_torchs():
    from experimental_experiment.torch_interpreter.errors import user_source_line

    ep = torch.export.export(_cnn(), (torch.randn(2, 3, 16, 16),))
    conv = next(n for n in ep.graph.nodes if n.op == "call_function" and "conv" in n.name)
    line = user_source_line(conv)
    assert "test_models.py" in line and "self.features(x)" in line, line
