"""A Gemma text model with ``use_bidirectional_attention=True`` (the text model of
PaliGemma and ColPali): eager mode attends both ways when the padding mask holds only
ones and causally when a token is padded. onnxruntime must match eager in both cases,
on two sizes."""

import numpy as np
import onnxruntime
import pytest
import torch

from experimental_experiment.torch_interpreter import to_onnx
from experimental_experiment.torch_interpreter.onnx_export_errors import (
    bypass_export_some_errors,
)

pytestmark = pytest.mark.usefixtures("quiet_transformers")


def _model():
    from transformers import GemmaConfig, GemmaModel

    torch.manual_seed(0)
    config = GemmaConfig(
        vocab_size=64,
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        head_dim=8,
        use_bidirectional_attention=True,
    )
    return GemmaModel._from_config(config, attn_implementation="sdpa").eval()


def _inputs(batch, seq, padded=0):
    ids = torch.randint(0, 64, (batch, seq), dtype=torch.int64)
    mask = torch.ones((batch, seq), dtype=torch.int64)
    if padded:
        mask[0, -padded:] = 0
    return dict(input_ids=ids, attention_mask=mask)


@pytest.mark.parametrize("shared_dim", [True, False])
def test_bidirectional_gemma_matches_eager_with_and_without_padding(shared_dim):
    model = _model()
    seq = torch.export.Dim("seq", min=2, max=64)
    batch = torch.export.Dim("batch", min=1, max=16)
    # a second symbol for the mask: the query length and the key length are then two
    # symbols the exporter cannot prove equal
    mask_seq = seq if shared_dim else torch.export.Dim("mask_seq", min=2, max=64)
    ds = dict(input_ids={0: batch, 1: seq}, attention_mask={0: batch, 1: mask_seq})
    with torch.no_grad(), bypass_export_some_errors(patch_transformers=True):
        onx = to_onnx(model, (), _inputs(2, 7), dynamic_shapes=ds)
    sess = onnxruntime.InferenceSession(onx.SerializeToString(), providers=["CPUExecutionProvider"])
    ones = _inputs(2, 5)
    with torch.no_grad():
        both_ways = model(**ones).last_hidden_state
        model.config._attn_implementation = "eager"  # always a causal mask
        causal = model(**ones).last_hidden_state
        model.config._attn_implementation = "sdpa"
    # the case is meaningful: eager with a mask of ones is not causal
    assert (both_ways - causal).abs().max() > 1e-3
    for batch_size, length, padded in [(2, 5, 0), (3, 11, 0), (2, 5, 2), (3, 11, 3)]:
        torch.manual_seed(length + padded)
        feeds = _inputs(batch_size, length, padded)
        with torch.no_grad():
            expected = model(**feeds).last_hidden_state.numpy()
        got = sess.run(None, {k: v.numpy() for k, v in feeds.items()})[0]
        np.testing.assert_allclose(expected, got, atol=1e-4)
