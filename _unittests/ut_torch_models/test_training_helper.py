"""make_aot_ort, train_loop, dump_onnx: the two examples of seed 000_935d5d4648d66da2
(tiny LlamaModel, batch 2, seq 1024, eager attention) run as written and their
gradients after one step match eager training."""

import copy
import os
import warnings

import numpy as np
import onnx
import pytest
import torch

from experimental_experiment.torch_dynamo import onnx_backend
from experimental_experiment.torch_models.dump_helper import dump_onnx
from experimental_experiment.torch_models.training_helper import (
    default_loss,
    make_aot_ort,
    train_loop,
)


@pytest.fixture(autouse=True)
def _fresh(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("ONNXRT_CHANGE_REWRITER", raising=False)
    monkeypatch.delenv("ONNXRT_DUMP_PATH", raising=False)
    torch._dynamo.reset()
    onnx_backend.clear_cache()
    yield
    torch._dynamo.reset()


def ids_tensor(shape, vocab_size):
    total_dims = 1
    for dim in shape:
        total_dims *= dim

    values = []
    for _ in range(total_dims):
        values.append(np.random.randint(0, vocab_size - 1))

    return torch.tensor(data=values, dtype=torch.long).view(shape).contiguous()


def seed_model_and_inputs():
    """The seed's model and inputs (LlamaConfig, eager attention, batch 2, seq 1024)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        from transformers import LlamaConfig
        from transformers.models.llama.modeling_llama import LlamaModel

    config = LlamaConfig(
        hidden_size=16,
        num_hidden_layers=1,
        vocab_size=1024,
        intermediate_size=16,
        max_position_embeddings=1024,
        num_attention_heads=2,
    )
    config._attn_implementation = "eager"

    torch.manual_seed(0)
    np.random.seed(0)
    model = LlamaModel(config)

    batch, seq, vocab_size = 2, 1024, 1024

    input_ids = ids_tensor([batch, seq], vocab_size)
    input_mask = torch.tril(torch.ones(batch, seq, dtype=torch.float32))

    model(input_ids, input_mask)
    return model, input_ids, input_mask


def print_dumped_models():
    # the end of both seed examples
    names = [_ for _ in os.listdir("dump_llama") if _.endswith(".onnx")]
    print("------------------------------------------")
    print(f"exported model: {names}")
    for name in names:
        print()
        print("NODES in {name!r}")
        onx = onnx.load(os.path.join("dump_llama", name))
        for i, node in enumerate(onx.graph.node):
            print(f"{i + 1}/{len(onx.graph.node)}: {node.op_type} {node.input} -> {node.output}")
    return names


def check_gradients_match_eager(model, reference, input_ids, input_mask):
    """One eager step on ``reference``: its gradients equal those of ``model``.

    The loss sums the squares of 2*1024*16 outputs: gradients reach ~5e3 and the
    float32 summation order differs between onnxruntime and torch, the tolerance is
    1e-4 relative to the largest gradient of each parameter (observed: < 3e-5).
    """
    train_loop(reference, input_ids, input_mask)
    for (name, p), q in zip(model.named_parameters(), reference.parameters()):
        assert p.grad is not None, f"no gradient for {name}"
        scale = max(1.0, q.grad.abs().max().item())
        torch.testing.assert_close(
            p.grad,
            q.grad,
            atol=1e-4 * scale,
            rtol=1e-4,
            msg=lambda m, n=name: f"gradient of {n}: {m}",
        )


def check_dumps(names):
    assert sorted(names) == ["dort-llama-ort_0.onnx", "dort-llama-ort_1.onnx"]
    assert sorted(n for n in os.listdir("dump_llama") if n.endswith(".txt")) == [
        "dort-llama-ort_0.txt",
        "dort-llama-ort_1.txt",
    ]
    backward = open(os.path.join("dump_llama", "dort-llama-ort_1.txt")).read()
    assert "embedding_dense_backward" in backward
    for n in names:
        onnx.checker.check_model(onnx.load(os.path.join("dump_llama", n)))


def test_seed_example_default_exporter():
    model, input_ids, input_mask = seed_model_and_inputs()
    reference = copy.deepcopy(model)

    local_aot_ort, _ = make_aot_ort(
        dynamic=True,
        rewrite=True,
        verbose=1,
    )

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        optimized_mod = torch.compile(model, backend=local_aot_ort, fullgraph=True)
        with dump_onnx("dort-llama-ort", folder="dump_llama", clean=True):
            train_loop(optimized_mod, input_ids, input_mask)

    check_dumps(print_dumped_models())
    check_gradients_match_eager(model, reference, input_ids, input_mask)


def test_seed_example_custom_exporter():
    model, input_ids, input_mask = seed_model_and_inputs()
    reference = copy.deepcopy(model)

    # the fixture's monkeypatch restores the variable after the test
    os.environ["ONNXRT_CHANGE_REWRITER"] = "1"

    local_aot_ort, _ = make_aot_ort(
        dynamic=True,
        verbose=1,
    )

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        optimized_mod = torch.compile(model, backend=local_aot_ort, fullgraph=True)
        with dump_onnx("dort-llama-ort", folder="dump_llama", clean=True):
            train_loop(optimized_mod, input_ids, input_mask)

    check_dumps(print_dumped_models())
    os.environ["ONNXRT_CHANGE_REWRITER"] = "0"
    check_gradients_match_eager(model, reference, input_ids, input_mask)


def test_llama_dynamic_two_shapes():
    # torch.compile(dynamic=True): one forward and one backward model for both shapes
    model, input_ids, input_mask = seed_model_and_inputs()
    reference = copy.deepcopy(model)
    local_aot_ort, extra = make_aot_ort(dynamic=True)
    optimized_mod = torch.compile(model, backend=local_aot_ort, fullgraph=True, dynamic=True)
    for seq in (128, 96):
        ids, mask = input_ids[:, :seq], input_mask[:, :seq]
        torch.testing.assert_close(
            train_loop(optimized_mod, ids, mask, lr=0),
            train_loop(reference, ids, mask, lr=0),
            rtol=1e-5,
            atol=1e-5,
        )
    assert extra["compiler"].stats.exported == 2


def test_train_loop_and_default_loss():
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(4, 3), torch.nn.ReLU())
    x = torch.randn(5, 4)
    losses = train_loop(model, x, steps=3, lr=0.1)
    assert len(losses) == 3 and losses[2] < losses[0]
    loss = train_loop(model, x, loss_fn=lambda y: y.sum(), lr=0)
    assert loss[0] == pytest.approx(float(model(x).sum()))
    assert default_loss((torch.ones(2), torch.ones(3))).item() == 2.0
    with pytest.raises(ValueError, match="no floating tensor"):
        default_loss(torch.ones(2, dtype=torch.int64))


def test_make_aot_ort_extra_and_debug():
    backend, extra = make_aot_ort(dynamic=True, rewrite=False, debug=True)
    assert extra["dynamic"] is True and extra["options"].patterns is None
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(4, 3), torch.nn.Tanh())
    reference = copy.deepcopy(model)
    x = torch.randn(5, 4)
    compiled = torch.compile(model, backend=backend, fullgraph=True)
    assert train_loop(compiled, x) == pytest.approx(train_loop(reference, x), rel=1e-5)
