"""The dtype helpers: ``xbuilder._dtypes``, their first module, is deprecated."""

import importlib
import sys

import numpy as np
import onnx
import pytest

from experimental_experiment.xbuilder import dtypes


def test_private_dtypes_module_is_deprecated():
    sys.modules.pop("experimental_experiment.xbuilder._dtypes", None)
    with pytest.warns(
        DeprecationWarning,
        match=r"experimental_experiment\.xbuilder\._dtypes is deprecated and will be removed "
        r"in 0\.3; use experimental_experiment\.xbuilder\.dtypes instead",
    ):
        old = importlib.import_module("experimental_experiment.xbuilder._dtypes")
    for name in ["FLOAT_TYPES", "INT_TYPES", "dtype_name", "np_dtype_to_onnx", "onnx_to_np_dtype"]:
        assert getattr(old, name) is getattr(dtypes, name), name
    assert old.np_dtype_to_onnx(np.dtype("float32")) == onnx.TensorProto.FLOAT
