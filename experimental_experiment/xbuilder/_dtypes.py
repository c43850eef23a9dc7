"""Kept for compatibility: the dtype helpers live in :mod:`.dtypes`."""

from .dtypes import (  # noqa: F401
    FLOAT_TYPES,
    INT_TYPES,
    dtype_name,
    np_dtype_to_onnx,
    onnx_to_np_dtype,
)
