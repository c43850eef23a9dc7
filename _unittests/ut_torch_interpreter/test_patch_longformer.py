"""Longformer's sliding-chunk attention (LED's encoder reuses it) exported with a dynamic
batch and sequence: onnxruntime matches the eager (unpatched) model on sequence lengths
which are and are not a multiple of the attention window; in eager mode the patched
model computes the same outputs as the original."""

import numpy as np
import onnxruntime
import pytest
import torch

from experimental_experiment.errors import ExportError
from experimental_experiment.torch_interpreter import to_onnx
from experimental_experiment.torch_interpreter.onnx_export_errors import (
    bypass_export_some_errors,
)
from experimental_experiment.torch_interpreter.patches import active_patches, apply_patches
from experimental_experiment.torch_interpreter.patches.patch_models import get_model_patches

pytestmark = pytest.mark.usefixtures("quiet_transformers")

WINDOW = 8
SIZES = ((3, 16), (1, 21), (2, 5))  # 16: a multiple of the window, 21 and 5: not


def _longformer():
    from transformers import LongformerConfig, LongformerForMaskedLM

    config = LongformerConfig(
        vocab_size=128,
        hidden_size=32,
        num_hidden_layers=2,
        num_attention_heads=4,
        intermediate_size=64,
        attention_window=[WINDOW, WINDOW],
        max_position_embeddings=64,
        pad_token_id=1,
    )
    torch.manual_seed(0)
    return LongformerForMaskedLM(config).eval()


def _led():
    from transformers import LEDConfig, LEDForConditionalGeneration

    config = LEDConfig(
        vocab_size=128,
        d_model=32,
        encoder_layers=2,
        decoder_layers=2,
        encoder_attention_heads=4,
        decoder_attention_heads=4,
        encoder_ffn_dim=64,
        decoder_ffn_dim=64,
        attention_window=[WINDOW, WINDOW],
        max_encoder_position_embeddings=64,
        max_decoder_position_embeddings=64,
        use_cache=False,
        pad_token_id=1,
    )
    torch.manual_seed(0)
    return LEDForConditionalGeneration(config).eval()


MODELS = {"longformer": _longformer, "led": _led}


@pytest.fixture(scope="module", params=sorted(MODELS))
def kind_model(request):
    return request.param, MODELS[request.param]()


def _inputs(kind, batch, seq, seed, global_tokens=None):
    """Random tokens, the last two of the first row padding, ``global_tokens`` with a
    global attention (no global attention mask when None)."""
    generator = torch.Generator().manual_seed(seed)
    ids = torch.randint(3, 128, (batch, seq), generator=generator)
    mask = torch.ones_like(ids)
    mask[0, -2:] = 0
    inputs = dict(input_ids=ids, attention_mask=mask)
    if global_tokens is not None:
        inputs["global_attention_mask"] = torch.zeros_like(ids)
        for token in global_tokens:
            inputs["global_attention_mask"][:, token] = 1
    if kind == "led":
        inputs["decoder_input_ids"] = ids[:, :3].contiguous()
    return inputs


def _outputs(kind, out):
    if kind == "led":
        return [out.logits, out.encoder_last_hidden_state]
    return [out.logits]


def _states(kind, out):
    """The outputs and the hidden states of the encoder's layers."""
    states = out.encoder_hidden_states if kind == "led" else out.hidden_states
    return [*_outputs(kind, out), *states]


@pytest.mark.parametrize("global_tokens", [(), (0,), (0, 3)])
@pytest.mark.parametrize("seq", [16, 13])
def test_eager_is_unchanged(kind_model, seq, global_tokens):
    kind, model = kind_model
    inputs = _inputs(kind, 2, seq, seq, global_tokens)
    with torch.no_grad():
        expected = _states(kind, model(**inputs, output_hidden_states=True))
        with apply_patches(get_model_patches()) as active:
            assert any(name.endswith("_sliding_chunks_query_key_matmul") for name in active)
            got = _states(kind, model(**inputs, output_hidden_states=True))
    assert len(got) == len(expected)
    for g, e in zip(got, expected):
        # bit-identical where the matrix products of the padded and unpadded chunks use
        # the same kernel blocking (Intel CPUs); a rounding apart on others (AMD EPYC,
        # AVX2: 2 of 832 values 1.5e-8 off)
        torch.testing.assert_close(g, e, rtol=1e-6, atol=1e-7)


@pytest.fixture(scope="module")
def session(kind_model):
    kind, model = kind_model
    inputs = _inputs(kind, 2, 13, 0)
    ds = {name: {0: "batch", 1: "seq"} for name in inputs}
    if kind == "led":
        ds["decoder_input_ids"] = {0: "batch", 1: "decoder_seq"}
    with torch.no_grad(), bypass_export_some_errors(patch_transformers=True):
        assert "_sliding_chunks_matmul_attn_probs_value" in " ".join(active_patches())
        onx = to_onnx(model, (), inputs, dynamic_shapes=ds)
    sess = onnxruntime.InferenceSession(onx.SerializeToString(), providers=["CPUExecutionProvider"])
    return kind, model, sess


def _run(sess, inputs):
    names = [i.name for i in sess.get_inputs()]
    assert set(names) == set(inputs), names
    return sess.run(None, {name: inputs[name].numpy() for name in names})


@pytest.mark.parametrize("batch,seq", SIZES)
def test_export_dynamic_batch_and_sequence(session, batch, seq):
    kind, model, sess = session
    inputs = _inputs(kind, batch, seq, batch * seq)
    with torch.no_grad():
        expected = _outputs(kind, model(**inputs))  # unpatched
    got = _run(sess, inputs)
    for g, e in zip(got, expected):
        assert g.shape == tuple(e.shape)
        np.testing.assert_allclose(g, e.numpy(), atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("global_tokens", [(), (0, 3)])
def test_export_with_global_attention_is_refused(kind_model, global_tokens):
    """The exported layers attend locally only: a capture given a global attention mask
    (even all zeros, as an ONNX input it could hold global tokens) stops with a typed
    error instead of a model ignoring the mask."""
    kind, model = kind_model
    inputs = _inputs(kind, 2, 13, 0, global_tokens=global_tokens)
    ds = {name: {0: "batch", 1: "seq"} for name in inputs}
    if kind == "led":
        ds["decoder_input_ids"] = {0: "batch", 1: "decoder_seq"}
    with (
        torch.no_grad(),
        bypass_export_some_errors(patch_transformers=True),
        pytest.raises(ExportError, match="global_attention_mask"),
    ):
        to_onnx(model, (), inputs, dynamic_shapes=ds)
