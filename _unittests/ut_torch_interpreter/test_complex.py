"""Complex tensors: rotary embeddings written with polar/view_as_complex, complex inputs
and outputs (real pairs named ``*_real_imag``), checked in onnxruntime on two sizes."""

import numpy as np
import pytest
import torch

from experimental_experiment.runtime import run_onnx
from experimental_experiment.torch_interpreter import UnsupportedOpError, to_onnx


def _run(onx, inputs):
    """Runs the model, complex inputs given as real pairs, complex outputs rebuilt."""
    feeds = [torch.view_as_real(t) if t.is_complex() else t for t in inputs]
    got = run_onnx(onx, feeds)
    outs = []
    for value, info in zip(got, onx.graph.output):
        t = torch.from_numpy(np.asarray(value))
        outs.append(
            torch.view_as_complex(t.contiguous()) if info.name.endswith("_real_imag") else t
        )
    return outs


def _check(model, make, dynamic_shapes, sizes=(5, 7), atol=1e-5):
    onx = to_onnx(model, make(sizes[0]), dynamic_shapes=dynamic_shapes)
    for n in sizes:
        inputs = make(n)
        with torch.no_grad():
            expected = model(*inputs)
        expected = expected if isinstance(expected, tuple) else (expected,)
        got = _run(onx, inputs)
        assert len(got) == len(expected)
        for e, g in zip(expected, got):
            torch.testing.assert_close(g, e, atol=atol, rtol=atol)
    return onx


class PolarRotary(torch.nn.Module):
    """The rotary embedding of the original Llama code, frequencies given."""

    def forward(self, xq, freqs):
        freqs_cis = torch.polar(torch.ones_like(freqs), freqs)
        xq_ = torch.view_as_complex(xq.float().reshape(*xq.shape[:-1], -1, 2))
        return torch.view_as_real(xq_ * freqs_cis).flatten(3)


def test_polar_rotary():
    def make(seq):
        return torch.randn(2, seq, 4, 8), torch.randn(seq, 1, 4)

    onx = _check(PolarRotary(), make, ({1: "seq"}, {0: "seq"}))
    assert [i.name for i in onx.graph.input] == ["xq", "freqs"]


def _precompute_freqs_cis(dim: int, end: int, theta: float = 10000.0):
    freqs = 1.0 / (theta ** (torch.arange(0, dim, 2)[: (dim // 2)].float() / dim))
    t = torch.arange(end, device=freqs.device)
    freqs = torch.outer(t, freqs).float()
    return torch.polar(torch.ones_like(freqs), freqs)  # complex64


class LlamaRotary(torch.nn.Module):
    """Frequencies precomputed as a complex buffer, sliced to the sequence length,
    reshaped for broadcasting, applied to queries and keys."""

    def __init__(self, head_dim=8, max_seq=32):
        super().__init__()
        self.register_buffer("freqs_cis", _precompute_freqs_cis(head_dim, max_seq))
        self.wq = torch.nn.Linear(16, 16, bias=False)
        self.wk = torch.nn.Linear(16, 16, bias=False)

    def forward(self, x):
        bsz, seqlen, _ = x.shape
        xq = self.wq(x).view(bsz, seqlen, 2, 8)
        xk = self.wk(x).view(bsz, seqlen, 2, 8)
        freqs_cis = self.freqs_cis[:seqlen]
        xq_ = torch.view_as_complex(xq.float().reshape(*xq.shape[:-1], -1, 2))
        xk_ = torch.view_as_complex(xk.float().reshape(*xk.shape[:-1], -1, 2))
        shape = [d if i == 1 or i == xq_.ndim - 1 else 1 for i, d in enumerate(xq_.shape)]
        freqs_cis = freqs_cis.view(*shape)
        xq_out = torch.view_as_real(xq_ * freqs_cis).flatten(3)
        xk_out = torch.view_as_real(xk_ * freqs_cis).flatten(3)
        return xq_out.type_as(xq), xk_out.type_as(xk)


def test_llama_rotary_buffer():
    model = LlamaRotary().eval()
    _check(model, lambda seq: (torch.randn(2, seq, 16),), ({0: "batch", 1: "seq"},), sizes=(5, 9))


class ComplexIO(torch.nn.Module):
    """Complex in, complex and real out."""

    def forward(self, z, w):
        y = z * w + z / (w + 2) - torch.conj(z) * 0.5
        return y.transpose(0, 1), torch.abs(y), torch.angle(y), torch.exp(z * 0.1)


def test_complex_inputs_outputs():
    def make(n):
        return (torch.randn(n, 3, dtype=torch.complex64), torch.randn(n, 3, dtype=torch.complex64))

    onx = _check(ComplexIO(), make, ({0: "n"}, {0: "n"}), atol=1e-4)
    assert [i.name for i in onx.graph.input] == ["z_real_imag", "w_real_imag"]
    assert [o.name for o in onx.graph.output] == [
        "output_0_real_imag",
        "output_1",
        "output_2",
        "output_3_real_imag",
    ]
    dims = [d.dim_param or d.dim_value for d in onx.graph.input[0].type.tensor_type.shape.dim]
    assert dims == ["n", 3, 2]
    assert onx.graph.input[0].type.tensor_type.elem_type == 1  # float32 pairs


class Layout(torch.nn.Module):
    """Layout operators on complex values: negative dims, reshape, cat, sum."""

    def forward(self, z, r):
        c = torch.complex(r, -r)
        y = torch.cat([z, c], dim=-1).unsqueeze(-1).permute(1, 0, 2)
        y = y.reshape(y.shape[0], -1) + 1
        return y.sum(dim=-1), y[:, 1:].sum(dim=0), torch.stack([z, c], dim=-1)


def test_complex_layout():
    def make(n):
        return torch.randn(n, 4, dtype=torch.complex64), torch.randn(n, 4)

    _check(Layout(), make, ({0: "n"}, {0: "n"}), atol=1e-4)


def test_complex128():
    class M(torch.nn.Module):
        def forward(self, z):
            return z * z

    onx = _check(M(), lambda n: (torch.randn(n, 2, dtype=torch.complex128),), ({0: "n"},))
    assert onx.graph.input[0].type.tensor_type.elem_type == 11  # float64 pairs


class MatMul(torch.nn.Module):
    def forward(self, z, r, w):
        return z @ w, r.to(w.dtype) @ w, torch.bmm(z.T.unsqueeze(0), r.unsqueeze(0).to(z.dtype))


def test_complex_matmul():
    def make(n):
        return (
            torch.randn(n, 4, dtype=torch.complex64),
            torch.randn(n, 4),
            torch.randn(4, 3, dtype=torch.complex64),
        )

    _check(MatMul(), make, ({0: "n"}, {0: "n"}, None), atol=1e-4)


def test_complex_unsupported_op():
    class M(torch.nn.Module):
        def forward(self, z):
            return torch.sqrt(z)

    z = torch.randn(3, 3, dtype=torch.complex64)
    with pytest.raises(UnsupportedOpError, match="for complex tensors"):
        to_onnx(M(), (z,))


class ComplexMoves(torch.nn.Module):
    """``.to(device)`` and ``.to(dtype=...)`` of a complex tensor (Llama 4's rotary
    frequencies), kept as ``to.device`` / ``to.dtype_layout`` when no in-place
    operator makes the capture run the decompositions."""

    def forward(self, z, w):
        a = z.to(z.device) * w
        b = z.to(dtype=torch.complex128, device=z.device)
        return a, b


def test_complex_to_device_and_dtype_layout():
    def make(n):
        return (torch.randn(n, 3, dtype=torch.complex64), torch.randn(n, 3, dtype=torch.complex64))

    ep = torch.export.export(ComplexMoves(), make(5))
    targets = {str(n.target) for n in ep.graph.nodes if n.op == "call_function"}
    assert targets & {"aten.to.device", "aten.to.dtype_layout"}, targets
    _check(ComplexMoves(), make, ({0: "n"}, {0: "n"}))
