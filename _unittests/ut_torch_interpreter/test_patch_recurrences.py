"""Recurrences rewritten with scan (RecurrentGemma's RG-LRU, RWKV's WKV): the same
results as transformers' Python loops, and the models exported with a dynamic sequence
length run in onnxruntime like eager on two sizes."""

import inspect
import json

import pytest
import torch

from experimental_experiment.ext_test_case import check_token_model
from experimental_experiment.torch_interpreter.patches.patch_recurrences import (
    _recurrent_gemma_rnn_scan,
    _rwkv_linear_attention_cpu,
    get_recurrence_patches,
)

pytestmark = pytest.mark.usefixtures("quiet_transformers")


@pytest.mark.parametrize("seq", [1, 5])
@pytest.mark.parametrize("with_state", [False, True])
def test_rwkv_scan_matches_the_loop(seq, with_state):
    from transformers.models.rwkv import modeling_rwkv

    loop = inspect.unwrap(modeling_rwkv.rwkv_linear_attention_cpu)
    scan = _rwkv_linear_attention_cpu(loop)
    g = torch.Generator().manual_seed(seq)
    b, d = 2, 6
    args = (
        torch.randn(d, generator=g),
        torch.randn(d, generator=g),
        torch.randn(b, seq, d, generator=g),
        torch.randn(b, seq, d, generator=g),
    )
    state = None
    if with_state:
        state = [
            torch.rand(b, d, generator=g),
            torch.rand(b, d, generator=g) + 0.5,
            torch.randn(b, d, generator=g),
        ]
    expected = loop(*args, state=None if state is None else list(state), return_state=True)
    got = scan(*args, state=None if state is None else list(state), return_state=True)
    torch.testing.assert_close(got[0], expected[0], atol=1e-6, rtol=1e-6)
    for e, r in zip(expected[1], got[1]):
        torch.testing.assert_close(r, e, atol=1e-6, rtol=1e-6)
    out, no_state = scan(*args)
    assert no_state is None and out.shape == expected[0].shape


@pytest.mark.parametrize("seq", [1, 5])
@pytest.mark.parametrize("with_state", [False, True])
def test_recurrent_gemma_scan_matches_the_loop(seq, with_state):
    from transformers.models.recurrent_gemma import modeling_recurrent_gemma

    loop = modeling_recurrent_gemma.RecurrentGemmaRglru._rnn_scan
    scan = _recurrent_gemma_rnn_scan(loop)
    g = torch.Generator().manual_seed(seq)
    b, d = 2, 6
    x = torch.randn(b, seq, d, generator=g)
    gate = torch.rand(b, seq, d, generator=g)
    reset = torch.zeros(b, seq, 1, dtype=torch.bool)
    reset[1, 0] = True  # a document boundary resets the state
    state = torch.randn(b, d, generator=g) if with_state else None
    expected = loop(None, x, gate, reset, state)
    got = scan(None, x, gate, reset, state)
    for e, r in zip(expected, got):
        assert e.dtype == r.dtype and e.shape == r.shape
        torch.testing.assert_close(r, e, atol=1e-6, rtol=1e-6)


def _check_dynamic_sequence(model, vocab, name):
    """Exports with a dynamic batch and sequence, compares onnxruntime with the
    unpatched model (the Python loop) on two sizes."""

    def patched():
        assert any(p.name.endswith(name) for p in get_recurrence_patches())

    onx = check_token_model(model, vocab, patched=patched, shapes=((2, 3), (3, 7)))
    assert any(n.op_type == "Scan" for n in onx.graph.node)


def test_rwkv_dynamic_sequence_to_onnx():
    from transformers import RwkvConfig, RwkvForCausalLM
    from transformers.models.recurrent_gemma import modeling_recurrent_gemma  # noqa: F401

    torch.manual_seed(0)
    config = RwkvConfig(
        vocab_size=64,
        hidden_size=32,
        num_hidden_layers=2,
        attention_hidden_size=32,
        intermediate_size=64,
        context_length=64,
        use_cache=False,
    )
    _check_dynamic_sequence(RwkvForCausalLM(config).eval(), 64, "rwkv_linear_attention_cpu")


def test_recurrent_gemma_dynamic_sequence_to_onnx():
    """Without the cache: the model then keeps no recurrent state between calls."""
    from transformers import RecurrentGemmaConfig, RecurrentGemmaForCausalLM
    from transformers.models.rwkv import modeling_rwkv  # noqa: F401

    torch.manual_seed(0)
    config = RecurrentGemmaConfig(
        vocab_size=64,
        hidden_size=32,
        lru_width=32,
        intermediate_size=64,
        num_hidden_layers=3,
        num_attention_heads=4,
        num_key_value_heads=1,
        head_dim=8,
        attention_window_size=16,
        use_cache=False,
    )
    _check_dynamic_sequence(RecurrentGemmaForCausalLM(config).eval(), 64, "_rnn_scan")


def _xlstm(chunk_size=64):
    from transformers import xLSTMConfig, xLSTMForCausalLM

    torch.manual_seed(0)
    config = xLSTMConfig(
        vocab_size=64,
        hidden_size=32,
        embedding_dim=32,
        num_hidden_layers=2,
        num_blocks=2,
        num_heads=4,
        chunk_size=chunk_size,
        use_cache=False,
    )
    return xLSTMForCausalLM(config).eval()


@pytest.mark.parametrize("seqs", [(1, 2, 5), (11, 20)])
def test_xlstm_scan_matches_the_loop(seqs):
    """The same numbers as the loop: one token (the step kernel), tokens fewer than a
    chunk (the sequence kernel), chunks and a remainder (chunk_size 8: the chunkwise
    kernel then the sequence kernel from its states)."""
    from experimental_experiment.torch_interpreter.patches import apply_patches

    model = _xlstm(chunk_size=8)
    for seq in seqs:
        ids = torch.randint(0, 64, (2, seq))
        with torch.no_grad():
            expected = model(ids).logits
            with apply_patches(get_recurrence_patches()) as names:
                assert "xLSTMBackend.forward" in names
                got = model(ids).logits
        torch.testing.assert_close(got, expected, rtol=0, atol=0, msg=f"seq={seq}")


def test_xlstm_dynamic_sequence_to_onnx():
    """The sequence stays dynamic at any length, exported on 3 tokens: odd and even
    lengths, shorter and longer than a chunk (16 tokens: eager runs chunks then the
    recurrence, the exported model the recurrence only)."""
    from experimental_experiment.ext_test_case import check_token_model

    def patched():
        assert any(p.name.endswith("xLSTMBackend.forward") for p in get_recurrence_patches())

    onx = check_token_model(
        _xlstm(chunk_size=16), 64, patched=patched, shapes=((2, 3), (3, 7), (2, 37))
    )
    assert any(n.op_type == "Scan" for n in onx.graph.node)
    # the sequence is bounded by the model's own inference chunk only, not the kernel's
    ranges = json.loads(
        next(p.value for p in onx.metadata_props if p.key == "dynamic_dimension_ranges")
    )
    assert ranges["input_ids.shape[1]"]["max"] >= 16384, ranges
