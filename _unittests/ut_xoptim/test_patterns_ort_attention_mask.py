"""onnxruntime pattern set: the padding mask transformers reads from the 2-D attention
mask through index grids (GatherND) becomes a Slice, checked against the unfused model
and eager with onnxruntime (batch 1 and 2, masks longer than the positions, random
padding)."""

import collections

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from experimental_experiment.torch_interpreter import to_onnx  # noqa: E402
from experimental_experiment.xoptim import optimize  # noqa: E402
from experimental_experiment.xoptim.testing import applied, refused, run_ort  # noqa: E402

NAME = "GridGatherNDToSlice"


class PaddingMask(torch.nn.Module):
    """Causal and padding mask as transformers builds it, ``transposed`` reads a mask of
    shape (total, batch) with the grids in the other order."""

    def __init__(self, transposed=False):
        super().__init__()
        self.transposed = transposed

    def forward(self, x, past, mask):
        b, s, p = x.shape[0], x.shape[1], past.shape[1]
        kv = torch.arange(p + s)
        causal = kv[None, None, None, :] <= (torch.arange(s) + p)[None, None, :, None]
        rows, cols = torch.arange(b)[:, None, None, None], kv[None, None, None, :]
        if self.transposed:
            pad = mask.t().bool()[cols, rows]
        else:
            pad = mask.bool()[rows, cols]
        return torch.where(causal & pad, x[:, None, :, None], torch.tensor(-1.0))


def _inputs(batch, seq, past, extra, seed=0):
    gen = torch.Generator().manual_seed(seed)
    mask = torch.randint(0, 2, (batch, past + seq + extra), generator=gen)
    return torch.randn(batch, seq, generator=gen), torch.randn(batch, past), mask


def _export(model):
    ds = ({0: "batch", 1: "seq"}, {0: "batch", 1: "past"}, {0: "batch", 1: "total"})
    return to_onnx(model, _inputs(2, 3, 5, 0), dynamic_shapes=ds, optimize=False)


def _check(model, raw, opt):
    for i, (batch, seq, past, extra) in enumerate(
        [(2, 3, 5, 0), (1, 1, 9, 0), (3, 4, 0, 0), (2, 1, 6, 3), (1, 5, 2, 1)]
    ):
        inputs = _inputs(batch, seq, past, extra, seed=i)
        feeds = {n.name: t.numpy() for n, t in zip(raw.graph.input, inputs)}
        expected = model(*inputs).numpy()
        got, unfused = run_ort(opt, feeds)[0], run_ort(raw, feeds)[0]
        assert got.shape == (batch, 1, seq, past + seq)
        np.testing.assert_array_equal(got, unfused)
        np.testing.assert_array_equal(got, expected)


def test_grid_gathernd_becomes_slice():
    model = PaddingMask()
    raw = _export(model)
    res = optimize(raw, patterns="default+onnxruntime")
    opt, report = res.model, res.report
    assert applied(report, NAME) == 1
    ops = collections.Counter(n.op_type for n in opt.graph.node)
    assert ops["GatherND"] == 0 and ops["Expand"] == 0 and ops["Slice"] == 1, ops
    _check(model, raw, opt)


def test_grids_in_the_other_order_are_refused():
    model = PaddingMask(transposed=True)
    raw = _export(model)
    res = optimize(raw, patterns="default+onnxruntime")
    opt, report = res.model, res.report
    assert applied(report, NAME) == 0
    assert any("rows then columns" in r for r in refused(report, NAME)), report
    assert "GatherND" in {n.op_type for n in opt.graph.node}
    _check(model, raw, opt)
