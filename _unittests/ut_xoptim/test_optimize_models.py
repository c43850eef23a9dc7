"""The optimizer on exported models: tiny Llama with and without patterns, the report
of to_onnx, determinism, a model exported by torch.onnx.export(dynamo=True)."""

import numpy as np
import onnx
import pytest
import torch

from experimental_experiment.ext_test_case import assert_close, run_onnx
from experimental_experiment.torch_interpreter import export_program, to_onnx
from experimental_experiment.xbuilder import OptimizationOptions
from experimental_experiment.xoptim import optimize_model
from experimental_experiment.xoptim.testing import run_ort

LLAMA_DS = {"input_ids": {0: "batch", 1: "seq"}, "attention_mask": {0: "batch", 1: "seq"}}


def _tiny_llama():
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
    config._attn_implementation = "sdpa"
    config.use_cache = False
    torch.manual_seed(0)
    return transformers.LlamaModel(config).eval()


def _inputs(batch, seq, pad=0):
    gen = torch.Generator().manual_seed(batch * 100 + seq)
    ids = torch.randint(0, 1024, (batch, seq), generator=gen)
    mask = torch.ones((batch, seq), dtype=torch.int64)
    if pad:
        mask[-1, -pad:] = 0
    return ids, mask


@pytest.fixture(scope="module")
def llama_exports():
    model = _tiny_llama()
    ids, mask = _inputs(2, 8)
    res = {}
    for patterns in [None, "default"]:
        out = export_program(
            model,
            (ids,),
            dict(attention_mask=mask),
            dynamic_shapes=LLAMA_DS,
            options=OptimizationOptions(patterns=patterns),
        )
        res[patterns] = (out.model, out.optimization)
    return model, res


def test_tiny_llama_with_and_without_patterns(llama_exports):
    model, res = llama_exports
    raw, opt = res[None][0], res["default"][0]
    assert len(opt.graph.node) < len(raw.graph.node)
    onnx.checker.check_model(opt, full_check=True)
    for batch, seq, pad in [(3, 13, 4), (1, 5, 0)]:
        ids, mask = _inputs(batch, seq, pad)
        with torch.no_grad():
            expected = model(ids, attention_mask=mask).last_hidden_state
        got_raw, got_opt = run_onnx(raw, [ids, mask])[0], run_onnx(opt, [ids, mask])[0]
        assert_close(expected, got_opt, atol=1e-4, rtol=1e-4)
        np.testing.assert_allclose(got_opt, got_raw, atol=1e-5, rtol=1e-5)


def test_to_onnx_report_has_patterns(llama_exports):
    _, res = llama_exports
    report = res["default"][1]
    kinds = {e.kind for e in report}
    assert kinds == {"pass", "pattern"}
    assert any(e.kind == "pattern" and e.applied for e in report)
    assert all(e.kind == "pass" for e in res[None][1])


def test_optimize_model_on_exported_llama_is_deterministic(llama_exports):
    _, res = llama_exports
    raw = res[None][0]
    first = optimize_model(raw)
    assert optimize_model(raw).SerializeToString() == first.SerializeToString()
    ids, mask = _inputs(2, 7, 2)
    feeds = {"input_ids": ids.numpy(), "attention_mask": mask.numpy()}
    np.testing.assert_allclose(run_ort(first, feeds)[0], run_ort(raw, feeds)[0], atol=1e-5)


def test_optimize_model_on_dynamo_export(tmp_path):
    class MLP(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.l1 = torch.nn.Linear(4, 16)
            self.l2 = torch.nn.Linear(16, 3)

        def forward(self, x):
            return torch.softmax(self.l2(torch.nn.functional.gelu(self.l1(x))), dim=-1)

    model = MLP().eval()
    x = torch.randn(5, 4)
    try:
        program = torch.onnx.export(
            model,
            (x,),
            dynamo=True,
            optimize=False,
            dynamic_shapes=({0: torch.export.Dim("batch")},),
        )
        onx = program.model_proto
    except Exception as e:  # pragma: no cover - environment (onnxscript, torch) issue
        pytest.skip(f"torch.onnx.export(dynamo=True) failed: {type(e).__name__}: {e}")
    opt = optimize_model(onx)
    onnx.checker.check_model(opt, full_check=True)
    assert len(opt.graph.node) <= len(onx.graph.node)
    for batch in (5, 2):
        xb = torch.randn(batch, 4)
        feeds = {onx.graph.input[0].name: xb.numpy()}
        with torch.no_grad():
            expected = model(xb).numpy()
        np.testing.assert_allclose(run_ort(opt, feeds)[0], expected, atol=1e-5, rtol=1e-4)


def test_tiny_llama_opset23_fuses_rms_norm():
    model = _tiny_llama()
    ids, mask = _inputs(2, 8)
    onx = to_onnx(
        model, (ids,), dict(attention_mask=mask), dynamic_shapes=LLAMA_DS, target_opset=23
    )
    ops = [n.op_type for n in onx.graph.node]
    assert ops.count("RMSNormalization") == 3  # two in the layer, one at the end
    ids, mask = _inputs(3, 11, 2)
    with torch.no_grad():
        expected = model(ids, attention_mask=mask).last_hidden_state
    assert_close(expected, run_onnx(onx, [ids, mask])[0], atol=1e-4, rtol=1e-4)
