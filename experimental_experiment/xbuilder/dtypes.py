"""ONNX element types and their numpy counterparts (no torch here)."""

from __future__ import annotations

from types import MappingProxyType
from typing import Mapping

import numpy as np
from onnx import TensorProto

try:  # onnx ships ml_dtypes for bfloat16/float8
    import ml_dtypes

    _BF16 = np.dtype(ml_dtypes.bfloat16)
except ImportError:  # pragma: no cover
    _BF16 = None

_np_to_onnx = {
    np.dtype("float32"): TensorProto.FLOAT,
    np.dtype("float64"): TensorProto.DOUBLE,
    np.dtype("float16"): TensorProto.FLOAT16,
    np.dtype("int64"): TensorProto.INT64,
    np.dtype("int32"): TensorProto.INT32,
    np.dtype("int16"): TensorProto.INT16,
    np.dtype("int8"): TensorProto.INT8,
    np.dtype("uint8"): TensorProto.UINT8,
    np.dtype("uint16"): TensorProto.UINT16,
    np.dtype("uint32"): TensorProto.UINT32,
    np.dtype("uint64"): TensorProto.UINT64,
    np.dtype("bool"): TensorProto.BOOL,
    np.dtype("complex64"): TensorProto.COMPLEX64,
    np.dtype("complex128"): TensorProto.COMPLEX128,
}
if _BF16 is not None:
    _np_to_onnx[_BF16] = TensorProto.BFLOAT16
_NP_TO_ONNX: Mapping[np.dtype, int] = MappingProxyType(_np_to_onnx)
del _np_to_onnx

_ONNX_TO_NP: Mapping[int, np.dtype] = MappingProxyType({v: k for k, v in _NP_TO_ONNX.items()})

FLOAT_TYPES = frozenset(
    {TensorProto.FLOAT, TensorProto.DOUBLE, TensorProto.FLOAT16, TensorProto.BFLOAT16}
)
INT_TYPES = frozenset(
    {
        TensorProto.INT64,
        TensorProto.INT32,
        TensorProto.INT16,
        TensorProto.INT8,
        TensorProto.UINT8,
        TensorProto.UINT16,
        TensorProto.UINT32,
        TensorProto.UINT64,
    }
)


def np_dtype_to_onnx(dtype) -> int:
    """Returns the ONNX element type of a numpy dtype."""
    dt = np.dtype(dtype)
    if dt not in _NP_TO_ONNX:
        raise TypeError(f"numpy dtype {dt} has no ONNX element type")
    return _NP_TO_ONNX[dt]


def onnx_to_np_dtype(elem_type: int) -> np.dtype:
    """Returns the numpy dtype of an ONNX element type."""
    if elem_type not in _ONNX_TO_NP:
        raise TypeError(f"ONNX element type {elem_type} has no numpy dtype")
    return _ONNX_TO_NP[elem_type]


def dtype_name(elem_type: int) -> str:
    """Short readable name of an ONNX element type ('FLOAT', 'INT64', ...)."""
    return TensorProto.DataType.Name(elem_type) if elem_type else "UNDEFINED"


def i64(values) -> np.ndarray:
    """An int64 array of ``values`` (a python int, a sequence, an array): the one way
    the package writes its integer constants (shapes, axes, indices).

    .. code-block:: python

        g.op.Reshape(x, i64([-1, 4]))
    """
    return np.array(values, dtype=np.int64)
