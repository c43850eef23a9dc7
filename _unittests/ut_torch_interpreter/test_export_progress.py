"""to_onnx(progress=True): the steps (capture, convert, optimize, serialize), the FX
nodes converted, the optimization rounds and the bytes of the weights on a terminal;
nothing by default, when stderr is redirected or with progress=False."""

import io

import onnx
import pytest
import torch

from experimental_experiment import progress
from experimental_experiment.ext_test_case import fake_terminal
from experimental_experiment.torch_interpreter import to_onnx


def _mlp():
    return torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.ReLU(), torch.nn.Linear(8, 2))


def test_small_model_shows_every_step(monkeypatch):
    tty = fake_terminal(monkeypatch)
    to_onnx(_mlp(), (torch.randn(2, 4),), progress=True)
    text = tty.getvalue()
    for expected in [
        "to_onnx: capture",
        "to_onnx: convert",
        "to_onnx: optimize",
        "to_onnx: serialize",
        "4/4",  # the steps
        "8/8",  # the FX nodes but the output
        "linear_1",  # the node being converted
        "1round",  # the rounds of patterns
        "rewrites",
        "232/232",  # bytes of the weights: (4 * 8 + 8 + 8 * 2 + 2) * 4
    ]:
        assert expected in text, (expected, text)


def test_quiet(monkeypatch):
    tty = fake_terminal(monkeypatch)
    to_onnx(_mlp(), (torch.randn(2, 4),))  # progress=False by default
    to_onnx(_mlp(), (torch.randn(2, 4),), progress=False, optimize=False)
    assert tty.getvalue() == ""
    redirected = io.StringIO()
    monkeypatch.setattr(progress.sys, "stderr", redirected)
    to_onnx(_mlp(), (torch.randn(2, 4),), progress=True)
    assert redirected.getvalue() == ""


def test_no_optimize_has_three_steps(monkeypatch):
    tty = fake_terminal(monkeypatch)
    to_onnx(_mlp(), (torch.randn(2, 4),), progress=True, optimize=False)
    text = tty.getvalue()
    assert "3/3" in text and "to_onnx: optimize" not in text, text


def test_weight_free_llama_counts_the_saved_bytes(monkeypatch, tmp_path, quiet_transformers):
    transformers = pytest.importorskip("transformers")
    from tqdm import tqdm

    from experimental_experiment.torch_interpreter.onnx_export_errors import (
        bypass_export_some_errors,
    )
    from experimental_experiment.torch_models.llm_helper import build_causal_lm, make_llm_inputs

    config = transformers.LlamaConfig(
        hidden_size=64,
        intermediate_size=128,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        vocab_size=1000,
        max_position_embeddings=256,
        tie_word_embeddings=False,
    )
    model = build_causal_lm(config, meta=True)
    inputs, ds = make_llm_inputs(config, model=model)
    nbytes = sum(t.numel() * t.element_size() for t in model.state_dict().values())
    path = str(tmp_path / "llama.onnx")
    tty = fake_terminal(monkeypatch)
    with bypass_export_some_errors(patch_transformers=True) as modificator:
        to_onnx(model, (), modificator(inputs), dynamic_shapes=ds, filename=path, progress=True)
    text = tty.getvalue()
    for expected in ["to_onnx: capture", "to_onnx: convert", "to_onnx: serialize", "save:"]:
        assert expected in text, (expected, text)
    size = tqdm.format_sizeof(nbytes, divisor=1024)  # every weight has its place
    assert "save: 100%" in text and f"{size}/{size}" in text, (size, text)
    assert len(onnx.load(path, load_external_data=False).graph.initializer) > 0
