"""Deprecated (removed in 0.3): the dtype helpers live in :mod:`.dtypes`."""

import warnings

from .dtypes import (  # noqa: F401
    FLOAT_TYPES,
    INT_TYPES,
    dtype_name,
    np_dtype_to_onnx,
    onnx_to_np_dtype,
)

warnings.warn(
    "experimental_experiment.xbuilder._dtypes is deprecated and will be removed "
    "in 0.3: use experimental_experiment.xbuilder.dtypes",
    DeprecationWarning,
    stacklevel=2,
)
