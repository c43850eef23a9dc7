"""``g.op.Where`` with branch types onnxruntime's CPU Where has no kernel for."""

import numpy as np
import onnxruntime
import pytest
import torch
from onnx import TensorProto

from experimental_experiment.torch_interpreter import to_onnx
from experimental_experiment.xbuilder import GraphBuilder


def _run(onx, feeds):
    sess = onnxruntime.InferenceSession(onx.SerializeToString(), providers=["CPUExecutionProvider"])
    return sess.run(None, feeds)


@pytest.mark.parametrize(
    "dtype", [TensorProto.BOOL, TensorProto.INT16, TensorProto.UINT16, TensorProto.UINT64]
)
def test_where_on_types_onnxruntime_lacks(dtype):
    from onnx.helper import tensor_dtype_to_np_dtype

    npt = tensor_dtype_to_np_dtype(dtype)
    g = GraphBuilder({"": 18})
    c = g.make_tensor_input("c", TensorProto.BOOL, ("n",))
    x = g.make_tensor_input("x", dtype, ("n",))
    y = g.make_tensor_input("y", dtype, (1,))
    g.make_tensor_output(g.op.Where(c, x, y), output_name="z")
    onx = g.to_onnx()
    assert "Where" not in [n.op_type for n in onx.graph.node] or dtype != TensorProto.BOOL
    rng = np.random.default_rng(0)
    for n in (3, 7):
        high = 1 if dtype == TensorProto.BOOL else np.iinfo(npt).max
        feeds = dict(
            c=rng.integers(0, 2, n).astype(bool),
            # the largest values too (uint64 above the int64 range goes through int64)
            x=rng.integers(0, high, n, dtype=npt, endpoint=True)
            if dtype != TensorProto.BOOL
            else rng.integers(0, 2, n).astype(bool),
            y=np.array([high], dtype=npt) if dtype != TensorProto.BOOL else np.array([True]),
        )
        (got,) = _run(onx, feeds)
        assert got.dtype == npt
        np.testing.assert_array_equal(got, np.where(feeds["c"], feeds["x"], feeds["y"]))


class _MaskedFillBool(torch.nn.Module):
    def forward(self, flags, mask):
        return flags.masked_fill(mask, True) & torch.where(mask, flags, ~flags)


def test_masked_fill_and_where_of_bool_tensors_run():
    model = _MaskedFillBool()
    flags, mask = torch.rand(2, 5) > 0.5, torch.rand(2, 5) > 0.5
    onx = to_onnx(model, (flags, mask), dynamic_shapes=({0: "b", 1: "n"}, {0: "b", 1: "n"}))
    for shape in [(2, 5), (4, 9)]:
        flags, mask = torch.rand(*shape) > 0.5, torch.rand(*shape) > 0.5
        (got,) = _run(onx, {"flags": flags.numpy(), "mask": mask.numpy()})
        np.testing.assert_array_equal(got, model(flags, mask).numpy())
