"""flex_attention (higher-order op) against onnxruntime and eager torch, two sequence
lengths each (create_block_mask needs lengths of at least two blocks of 128 to stay
dynamic: torch.export specializes a single block)."""

import warnings
from typing import Any

import numpy as np
import onnx
import pytest
import torch

from experimental_experiment.runtime import flatten_tensors, run_onnx
from experimental_experiment.torch_interpreter import to_onnx

flex = pytest.importorskip("torch.nn.attention.flex_attention")
flex_attention, create_block_mask = flex.flex_attention, flex.create_block_mask

#: sequence length as a multiple of the block size (128), two blocks at least
SEQ = 128 * torch.export.Dim("blocks", min=2, max=32)
ATOL = 1e-5


@pytest.fixture(autouse=True)
def _quiet():
    # flex_attention outside torch.compile compiles its own wrapper with dynamo, whose
    # cache outlives an export: a later export of another flex model in the same process
    # reuses it and specializes its dynamic batch (torch 2.13)
    torch._dynamo.reset()
    with warnings.catch_warnings():  # "flex_attention called without torch.compile()"
        warnings.simplefilter("ignore", UserWarning)
        yield


def _qkv(b, hq, hk, seqs, e=16):
    return [
        (torch.randn(b, hq, s, e), torch.randn(b, hk, s, e), torch.randn(b, hk, s, e)) for s in seqs
    ]


def _check(model, inputs, dynamic_shapes, atol=ATOL) -> list[float]:
    """Exports with ``inputs[0]``, runs every set in onnxruntime, returns the max abs
    difference to eager of each set (infinite values must match exactly)."""
    onx = to_onnx(model, inputs[0], dynamic_shapes=dynamic_shapes)
    onnx.checker.check_model(onx, full_check=True)
    assert not any(n.op_type == "flex_attention" for n in onx.graph.node)
    diffs = []
    for args in inputs:
        with torch.no_grad():
            expected = [t.numpy() for t in flatten_tensors(model(*args))]
        got = run_onnx(onx, flatten_tensors(args))
        assert len(got) == len(expected)
        worst = 0.0
        for e, r in zip(expected, got):
            assert e.shape == r.shape and e.dtype == r.dtype, (e.shape, r.shape, r.dtype)
            np.testing.assert_array_equal(np.isinf(e), np.isinf(r))
            np.testing.assert_array_equal(e[np.isinf(e)], r[np.isinf(r)])
            assert not np.isnan(r).any()
            finite = np.isfinite(e)
            delta = np.abs(e[finite].astype(np.float64) - r[finite].astype(np.float64))
            worst = max(worst, float(delta.max(initial=0.0)))
        diffs.append(worst)
    assert max(diffs) <= atol, diffs
    return diffs


class Plain(torch.nn.Module):
    def forward(self, q, k, v):
        return flex_attention(q, k, v)


class Causal(torch.nn.Module):
    def forward(self, q, k, v):
        def causal(b, h, q_idx, kv_idx):
            return q_idx >= kv_idx

        mask = create_block_mask(causal, None, None, q.shape[-2], k.shape[-2], device="cpu")
        return flex_attention(q, k, v, block_mask=mask)


class Alibi(torch.nn.Module):
    """score_mod reading a captured buffer (a slope per head), plus a causal mask."""

    slopes: torch.Tensor

    def __init__(self, heads, *, causal=False):
        super().__init__()
        self.register_buffer("slopes", -torch.rand(heads) / 8)
        self.causal = causal

    def forward(self, q, k, v):
        def alibi(score, b, h, q_idx, kv_idx):
            return score + self.slopes[h] * (q_idx - kv_idx)

        mask = None
        if self.causal:
            mask = create_block_mask(
                lambda b, h, qi, ki: qi >= ki, None, None, q.shape[-2], k.shape[-2], "cpu"
            )
        return flex_attention(q, k, v, score_mod=alibi, block_mask=mask)


class Gqa(torch.nn.Module):
    def forward(self, q, k, v):
        return flex_attention(q, k, v, enable_gqa=True)


class Padding(torch.nn.Module):
    """A document mask and a padding mask read from a buffer (mask_mod_other_buffers):
    the padded queries of the second batch keep no key at all (output 0, logsumexp
    -inf); returns the logsumexp too (the max score is not available on CPU)."""

    lengths: torch.Tensor

    def __init__(self, lengths):
        super().__init__()
        self.register_buffer("lengths", torch.tensor(lengths))

    def forward(self, q, k, v):
        lengths = self.lengths
        doc = torch.arange(q.shape[-2]) // 64

        def mask_mod(b, h, q_idx, kv_idx):
            valid = (q_idx < lengths[b]) & (kv_idx < lengths[b])
            return valid & (doc[q_idx] == doc[kv_idx])

        mask = create_block_mask(mask_mod, q.shape[0], None, q.shape[-2], k.shape[-2], "cpu")
        out, aux = flex_attention(q, k, v, block_mask=mask, return_aux=flex.AuxRequest(lse=True))
        return out, aux.lse


def _ds(n=3, seq: Any = SEQ):
    return ({2: seq},) * n


def test_plain():
    # no block mask: any length, not only multiples of 128
    print("plain", _check(Plain(), _qkv(2, 4, 4, (128, 200)), _ds(seq="seq")))


def test_causal():
    print("causal", _check(Causal(), _qkv(2, 4, 4, (256, 384)), _ds()))


def test_score_mod_buffer():
    print("alibi", _check(Alibi(4), _qkv(2, 4, 4, (128, 256)), _ds(seq="seq")))


def test_score_mod_buffer_causal():
    print("alibi+causal", _check(Alibi(4, causal=True), _qkv(2, 4, 4, (256, 384)), _ds()))


def test_gqa():
    print("gqa", _check(Gqa(), _qkv(2, 8, 2, (128, 256)), _ds(seq="seq")))


def test_padding_fully_masked_rows():
    model = Padding([256, 200])
    with torch.no_grad():
        out, lse = model(*_qkv(2, 4, 4, (256,))[0])
    assert (out[1, :, 200:] == 0).all() and torch.isinf(lse[1, :, 200:]).all()
    print("padding", _check(model, _qkv(2, 4, 4, (256, 384)), _ds()))


def test_float64():
    inputs = [tuple(t.double() for t in qkv) for qkv in _qkv(1, 2, 2, (256, 384))]
    print("causal float64", _check(Causal(), inputs, _ds()))


def test_float16():
    inputs = [tuple(t.half() for t in qkv) for qkv in _qkv(2, 4, 4, (128, 200))]
    print("plain float16", _check(Plain(), inputs, _ds(seq="seq"), atol=2e-3))


class IndexTerms(torch.nn.Module):
    """score_mod reading every index: batch, head, query and key positions."""

    def forward(self, q, k, v):
        def terms(score, b, h, q_idx, kv_idx):
            return score + 0.1 * b - 0.01 * h + 0.001 * (q_idx - kv_idx)

        return flex_attention(q, k, v, score_mod=terms)


def test_dynamic_batch_and_key_length():
    inputs = []
    for b, lq, lk in ((2, 128, 64), (3, 200, 96)):
        inputs.append(
            (torch.randn(b, 4, lq, 16), torch.randn(b, 4, lk, 16), torch.randn(b, 4, lk, 16))
        )
    q_ds, kv_ds = {0: "batch", 2: "lq"}, {0: "batch", 2: "lk"}
    print("index terms", _check(IndexTerms(), inputs, (q_ds, kv_ds, kv_ds)))
