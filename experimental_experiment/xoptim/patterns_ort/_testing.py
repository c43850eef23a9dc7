"""Test helper for the onnxruntime patterns: onnxruntime running the unfused model is
the reference (the ONNX reference evaluator does not know the contrib operators)."""

from __future__ import annotations

import functools

from ..testing import check_pattern

#: :func:`check_pattern` with the onnxruntime set and the light checker (onnx's shape
#: inference does not know the contrib operators)
check_ort_pattern = functools.partial(
    check_pattern, patterns="default+onnxruntime", full_check=False
)
