"""RawDataWriter writes the same TensorProto as onnx.numpy_helper.from_array."""

import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper

from experimental_experiment.xbuilder._raw_data import _LARGE, RawDataWriter


def _written(writer, array, name="w"):
    proto = TensorProto()
    writer.fill(proto, name, helper.np_dtype_to_tensor_dtype(array.dtype), array)
    return proto


@pytest.mark.parametrize("dtype", [np.float32, np.float16, np.int64, np.uint8, np.bool_])
@pytest.mark.parametrize("size", [0, 7, _LARGE // 2 + 3, _LARGE + 5, 3 * _LARGE])
def test_same_bytes_as_from_array(dtype, size):
    rng = np.random.default_rng(size)
    array = (rng.standard_normal(size) * 100).astype(dtype).reshape((-1, 1) if size else (0,))
    proto = _written(RawDataWriter(), array)
    expected = numpy_helper.from_array(array, name="w")
    assert proto.SerializeToString() == expected.SerializeToString()
    np.testing.assert_array_equal(numpy_helper.to_array(proto), array)


def test_buffer_reused_from_large_to_smaller():
    """A smaller array after a larger one does not carry the larger one's tail."""
    writer = RawDataWriter()
    big = np.arange(3 * _LARGE // 4, dtype=np.float32)
    small = np.full(_LARGE // 4 + 1, -1.5, dtype=np.float32)
    first, second = _written(writer, big), _written(writer, small)
    assert writer._buffer.size >= big.nbytes  # the merge path ran, not the fallback
    np.testing.assert_array_equal(numpy_helper.to_array(first), big)
    np.testing.assert_array_equal(numpy_helper.to_array(second), small)
    assert len(second.raw_data) == small.nbytes


def test_fields_set_before_are_kept():
    array = np.ones((_LARGE, 2), dtype=np.float32)
    proto = TensorProto()
    proto.doc_string = "kept"
    RawDataWriter().fill(proto, "", TensorProto.FLOAT, array)
    assert proto.doc_string == "kept" and proto.name == "" and list(proto.dims) == [_LARGE, 2]
