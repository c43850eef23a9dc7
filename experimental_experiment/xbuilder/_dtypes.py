"""Deprecated (removed in 0.3): the dtype helpers live in :mod:`.dtypes`."""

from .._deprecation import deprecated
from .dtypes import (  # noqa: F401
    FLOAT_TYPES,
    INT_TYPES,
    dtype_name,
    np_dtype_to_onnx,
    onnx_to_np_dtype,
)

deprecated(
    "experimental_experiment.xbuilder._dtypes",
    "experimental_experiment.xbuilder.dtypes",
    stacklevel=3,
)
