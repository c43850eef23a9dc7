"""Contiguous copies of strided views (xbuilder._arrays): the same values and layout as
numpy's own copy, for the transposed matrices folding leaves and any other layout."""

import numpy as np
import pytest

from experimental_experiment.xbuilder._arrays import contiguous

_M = np.arange(300 * 200, dtype=np.float32).reshape(300, 200) / 7


@pytest.mark.parametrize(
    "view",
    [
        _M.T,  # a folded Transpose: tiles, sizes not multiples of the tile
        _M[::2, 1::3],  # steps
        _M.T[::-1],  # negative strides
        _M.astype(np.float16).T,
        np.arange(24, dtype=np.int64).reshape(2, 3, 4).transpose(2, 0, 1),  # 3-D
        _M[:3].T,  # small: numpy's copy
    ],
    ids=["transposed", "steps", "reversed", "float16", "3d", "small"],
)
def test_same_values_c_contiguous(view):
    got = contiguous(view)
    assert got.flags["C_CONTIGUOUS"] and got.dtype == view.dtype and got.shape == view.shape
    assert got.tobytes() == np.ascontiguousarray(view).tobytes()


def test_contiguous_array_is_not_copied():
    assert contiguous(_M) is _M


def test_serialized_transposed_weight_round_trips():
    """A transposed initializer of the builder is written with the values of the view."""
    from onnx import TensorProto, numpy_helper

    from experimental_experiment.xbuilder import GraphBuilder

    g = GraphBuilder(18)
    x = g.make_tensor_input("x", TensorProto.FLOAT, (2, 300))
    w = g.make_initializer("w", _M.T)
    g.make_tensor_output(g.op.MatMul(x, w), elem_type=TensorProto.FLOAT, shape=(2, 200))
    model = g.to_onnx(optimize=False)
    (init,) = model.graph.initializer
    np.testing.assert_array_equal(numpy_helper.to_array(init), _M.T)
