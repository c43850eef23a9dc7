"""Backward of the CPU flash attention kernel against eager PyTorch (the gradients
torch computes), on two sequence lengths, causal or not, with a mask or a scale."""

import pytest
import torch

from experimental_experiment.ext_test_case import check_export
from experimental_experiment.torch_interpreter import UnsupportedOpError, to_onnx

aten = torch.ops.aten


class FlashGrad(torch.nn.Module):
    def __init__(self, is_causal=False, scale=None, masked=False, dropout_p=0.0):
        super().__init__()
        self.is_causal, self.scale, self.masked, self.dropout_p = (
            is_causal,
            scale,
            masked,
            dropout_p,
        )

    def forward(self, q, k, v, grad):
        mask = None
        if self.masked:
            mask = (
                torch.zeros(q.shape[-2], k.shape[-2])
                - (torch.arange(k.shape[-2]) % 3 == 0).float() * 1e4
            )
        out, lse = aten._scaled_dot_product_flash_attention_for_cpu(
            q, k, v, 0.0, self.is_causal, attn_mask=mask, scale=self.scale
        )
        return aten._scaled_dot_product_flash_attention_for_cpu_backward(
            grad,
            q,
            k,
            v,
            out,
            lse,
            self.dropout_p,
            self.is_causal,
            attn_mask=mask,
            scale=self.scale,
        )


def _inputs(seq):
    return (
        torch.randn(2, 3, seq, 8),
        torch.randn(2, 3, seq, 8),
        torch.randn(2, 3, seq, 8),
        torch.randn(2, 3, seq, 8),
    )


@pytest.mark.parametrize("kwargs", [{}, {"is_causal": True}, {"scale": 0.3}, {"masked": True}])
def test_flash_attention_backward(kwargs):
    ds = tuple({2: "seq"} for _ in range(4))
    check_export(FlashGrad(**kwargs), [_inputs(5), _inputs(7)], dynamic_shapes=ds)


def test_matches_autograd():
    # the kernel's gradients are those of autograd through sdpa
    q, k, v, grad = (t.requires_grad_(i < 3) for i, t in enumerate(_inputs(6)))
    out = torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True)
    out.backward(grad)
    got = FlashGrad(is_causal=True)(q.detach(), k.detach(), v.detach(), grad)
    for g, t in zip(got, (q, k, v)):
        torch.testing.assert_close(g, t.grad, atol=1e-5, rtol=1e-4)


def test_dropout_refused():
    with pytest.raises(UnsupportedOpError, match="dropout_p"):
        to_onnx(FlashGrad(dropout_p=0.1), _inputs(5))
