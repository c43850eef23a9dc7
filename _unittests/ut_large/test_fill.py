"""fill_weights: name rules, report, errors before writing, a tiny Llama exported without
weights then filled from save_pretrained gives the data of the export with weights."""

import os

import numpy as np
import onnx
import onnxruntime
import pytest
import torch

from experimental_experiment._command_lines import main
from experimental_experiment.large import WeightsMismatchError, fill_weights, match_names
from experimental_experiment.torch_interpreter import to_onnx
from experimental_experiment.xbuilder.model_container import ExternalDataError


class Block(torch.nn.Module):
    def __init__(self, n=32):
        super().__init__()
        self.proj = torch.nn.Linear(n, n)
        self.gate = torch.nn.Linear(n, n, bias=False)

    def forward(self, x):
        return self.proj(x) * torch.sigmoid(self.gate(x))


class Net(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.layers = torch.nn.ModuleList([Block(), Block()])

    def forward(self, x):
        for layer in self.layers:
            x = layer(x)
        return x


def _export_meta(path):
    with torch.device("meta"):
        meta = Net().eval()
    to_onnx(meta, (torch.randn(2, 32),), dynamic_shapes=({0: "batch"},), filename=str(path))


def _data(path):
    """The data file a saved model refers to (named after its content)."""
    model = onnx.load(str(path), load_external_data=False)
    locs = {
        e.value for i in model.graph.initializer for e in i.external_data if e.key == "location"
    }
    assert len(locs) == 1, locs
    return path.parent / locs.pop()


def _real():
    torch.manual_seed(1)
    return Net().eval()


def _run(path, x):
    sess = onnxruntime.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    return sess.run(None, {sess.get_inputs()[0].name: x.numpy()})[0]


def test_match_names_rules():
    inits = {
        "layers.0.proj.weight": "layers.0.proj.weight",
        "layers_1_proj_weight": None,
        "gate_weight": None,
        "norm.weight": None,
    }
    ckpt = [
        "layers.0.proj.weight",
        "layers.1.proj.weight",
        "model.decoder.gate.weight",
        "layers.0.norm.weight",
        "layers.1.norm.weight",
    ]
    matched, ambiguous = match_names(inits, ckpt)
    assert matched == {
        "layers.0.proj.weight": ("layers.0.proj.weight", "source"),
        "layers_1_proj_weight": ("layers.1.proj.weight", "underscore"),
        "gate_weight": ("model.decoder.gate.weight", "suffix"),
    }
    assert ambiguous == {"norm.weight": ["layers.0.norm.weight", "layers.1.norm.weight"]}


def test_renamed_checkpoint_suffix_rule(tmp_path):
    import safetensors.torch

    path = tmp_path / "m.onnx"
    _export_meta(path)
    model = _real()
    # a checkpoint of a wrapper: every name gains a prefix
    renamed = {f"model.backbone.{k}": v for k, v in model.state_dict().items()}
    renamed["extra.unused"] = torch.zeros(3)
    safetensors.torch.save_file(renamed, str(tmp_path / "w.safetensors"))
    report = fill_weights(str(path), [str(tmp_path / "w.safetensors")])
    assert report.rules() == {"suffix": 6}
    assert report.matched["layers.1.gate.weight"] == (
        "model.backbone.layers.1.gate.weight",
        "suffix",
    )
    assert report.unused == ["extra.unused"] and report.unfilled == []
    x = torch.randn(5, 32)
    np.testing.assert_allclose(_run(path, x), model(x).detach().numpy(), atol=1e-5, rtol=1e-4)
    # the model records where every weight came from
    from experimental_experiment.xbuilder.model_container import get_weights_metadata

    info = get_weights_metadata(onnx.load(str(path), load_external_data=False))
    assert info["sources"]["layers.0.proj.bias"] == "model.backbone.layers.0.proj.bias"
    assert info["unfilled"] == []


def test_shape_mismatch_writes_nothing(tmp_path):
    import safetensors.torch

    path = tmp_path / "m.onnx"
    _export_meta(path)
    before = {f: (tmp_path / f).read_bytes() for f in os.listdir(tmp_path)}
    state = _real().state_dict()
    state["layers.1.proj.weight"] = torch.zeros(32, 16)
    safetensors.torch.save_file(state, str(tmp_path / "w.safetensors"))
    with pytest.raises(WeightsMismatchError, match=r"layers.1.proj.weight.*\(32, 16\)") as e:
        fill_weights(str(path), [str(tmp_path / "w.safetensors")])
    assert len(e.value.report.mismatches) == 1
    assert {f: (tmp_path / f).read_bytes() for f in before} == before
    assert sorted(os.listdir(tmp_path)) == sorted([*before, "w.safetensors"])


def test_truncated_data_file(tmp_path):
    path = tmp_path / "m.onnx"
    model = _real()
    to_onnx(model, (torch.randn(2, 32),), large_model=True, external_threshold=0).save(str(path))
    data = _data(path)
    data.write_bytes(data.read_bytes()[:-100])
    torch.save(model.state_dict(), str(tmp_path / "w.pt"))
    with pytest.raises(ExternalDataError, match="truncated"):
        fill_weights(str(path), [str(tmp_path / "w.pt")], output=str(tmp_path / "o.onnx"))
    assert not os.path.exists(tmp_path / "o.onnx")


def test_cli_fill_weights_and_stats(tmp_path, capsys):
    path = tmp_path / "m.onnx"
    _export_meta(path)
    assert main(["stats", str(path)]) == 0
    assert "6 unfilled" in capsys.readouterr().out
    model = _real()
    torch.save(model.state_dict(), str(tmp_path / "w.bin"))
    out = tmp_path / "filled" / "f.onnx"
    assert main(["fill-weights", str(path), str(tmp_path / "w.bin"), "-o", str(out)]) == 0
    assert "matched 6 initializers {'source': 6}" in capsys.readouterr().out
    assert sorted(os.listdir(out.parent)) == ["f.onnx", _data(out).name]
    x = torch.randn(3, 32)
    np.testing.assert_allclose(_run(out, x), model(x).detach().numpy(), atol=1e-5, rtol=1e-4)
    assert main(["stats", str(out)]) == 0
    assert "0 unfilled" in capsys.readouterr().out


def _tiny_llama(meta: bool):
    from experimental_experiment.torch_models.llm_helper import build_causal_lm, get_tiny_config

    config = get_tiny_config("llama")
    return config, build_causal_lm(config, meta=meta)


def _export_llama(config, model, path):
    from experimental_experiment.torch_interpreter.onnx_export_errors import (
        bypass_export_some_errors,
    )
    from experimental_experiment.torch_models.llm_helper import make_llm_inputs

    inputs, ds = make_llm_inputs(config, model=model)
    with bypass_export_some_errors(patch_transformers=True) as modificator:
        to_onnx(
            model,
            (),
            modificator(inputs),
            dynamic_shapes=ds,
            large_model=True,
            external_threshold=0,
        ).save(str(path))


def test_tiny_llama_weight_free_then_filled(tmp_path, monkeypatch):
    from experimental_experiment.runtime import flatten_tensors
    from experimental_experiment.torch_interpreter.onnx_export_errors import (
        bypass_export_some_errors,
    )
    from experimental_experiment.torch_models.llm_helper import make_llm_inputs

    config, model = _tiny_llama(meta=False)
    _export_llama(config, model, tmp_path / "with.onnx")
    model.save_pretrained(str(tmp_path / "ckpt"))  # model.safetensors
    _, meta = _tiny_llama(meta=True)
    _export_llama(config, meta, tmp_path / "without.onnx")
    report = fill_weights(str(tmp_path / "without.onnx"), [str(tmp_path / "ckpt")])
    assert report.unfilled == [] and report.unused == []
    assert _data(tmp_path / "without.onnx").read_bytes() == (
        _data(tmp_path / "with.onnx").read_bytes()
    )
    monkeypatch.chdir(tmp_path / "ckpt")
    sess = onnxruntime.InferenceSession(
        str(tmp_path / "without.onnx"), providers=["CPUExecutionProvider"]
    )
    for batch, seq, past in ((2, 3, 5), (3, 4, 7)):
        inputs, _ = make_llm_inputs(
            config, batch, seq, past, model=model, generator=torch.Generator().manual_seed(batch)
        )
        with bypass_export_some_errors(patch_transformers=True):
            feeds = dict(
                zip(
                    [i.name for i in sess.get_inputs()],
                    [t.numpy() for t in flatten_tensors(inputs)],
                )
            )
            with torch.no_grad():
                expected = model(**inputs).logits.numpy()
        got = sess.run(None, feeds)[0]
        np.testing.assert_allclose(got, expected, atol=1e-4, rtol=1e-3)


def test_sharded_checkpoint_index(tmp_path):
    """Two safetensors shards and their index file, as save_pretrained writes them."""
    import json

    import safetensors.torch

    path = tmp_path / "m.onnx"
    _export_meta(path)
    model = _real()
    state = model.state_dict()
    names = sorted(state)
    shards = {
        "model-00001-of-00002.safetensors": names[:3],
        "model-00002-of-00002.safetensors": names[3:],
    }
    for file, keys in shards.items():
        safetensors.torch.save_file({k: state[k] for k in keys}, str(tmp_path / file))
    index = {"metadata": {}, "weight_map": {k: f for f, ks in shards.items() for k in ks}}
    (tmp_path / "model.safetensors.index.json").write_text(json.dumps(index))
    report = fill_weights(str(path), [str(tmp_path / "model.safetensors.index.json")])
    assert len(report.matched) == 6 and report.unfilled == [] and report.unused == []
    x = torch.randn(4, 32)
    np.testing.assert_allclose(_run(path, x), model(x).detach().numpy(), atol=1e-5, rtol=1e-4)


def test_export_with_weights_deterministic(tmp_path):
    contents = []
    for i in range(2):
        path = tmp_path / str(i) / "m.onnx"
        to_onnx(
            _real(),
            (torch.randn(2, 32),),
            dynamic_shapes=({0: "batch"},),
            large_model=True,
            external_threshold=0,
        ).save(str(path))
        contents.append((path.read_bytes(), _data(path).read_bytes()))
    assert contents[0] == contents[1]


def test_tied_weights_filled_from_the_other_name(tmp_path):
    """save_pretrained keeps one name of a tied weight (the embedding), the export the
    other (lm_head): the exporter records both, the fill finds it."""
    import transformers

    from experimental_experiment.torch_interpreter.onnx_export_errors import (
        bypass_export_some_errors,
    )
    from experimental_experiment.torch_models.llm_helper import get_tiny_config, make_llm_inputs

    config = get_tiny_config("llama", tie_word_embeddings=True)
    with torch.device("meta"):
        meta = transformers.LlamaForCausalLM(config).eval()
    meta.model.rotary_emb = type(meta.model.rotary_emb)(config)
    inputs, ds = make_llm_inputs(config, model=meta)
    with bypass_export_some_errors(patch_transformers=True) as modificator:
        to_onnx(meta, (), modificator(inputs), dynamic_shapes=ds, large_model=True).save(
            str(tmp_path / "m.onnx")
        )
    torch.manual_seed(0)
    model = transformers.LlamaForCausalLM(config).eval()
    model.save_pretrained(str(tmp_path / "ckpt"))
    report = fill_weights(str(tmp_path / "m.onnx"), [str(tmp_path / "ckpt")])
    assert report.unfilled == [] and report.unused == []
    assert report.matched["lm_head.weight"] == ("model.embed_tokens.weight", "source")


def test_progress_bar_counts_the_written_bytes(tmp_path, monkeypatch):
    import io

    from experimental_experiment import progress

    class Tty(io.StringIO):
        def isatty(self):
            return True

    path = tmp_path / "m.onnx"
    _export_meta(path)
    torch.save(_real().state_dict(), str(tmp_path / "w.bin"))
    tty = Tty()
    monkeypatch.setattr(progress.sys, "stderr", tty)
    report = fill_weights(str(path), [str(tmp_path / "w.bin")])
    assert report.written_bytes == 4 * (4 * 32 * 32 + 2 * 32)  # float32: 4 weights, 2 biases
    text = tty.getvalue()
    assert "fill_weights" in text and "100%" in text
    tty.truncate(0)
    fill_weights(str(path), [str(tmp_path / "w.bin")], progress=False)
    assert tty.getvalue() == ""
