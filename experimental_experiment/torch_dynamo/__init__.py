"""torch.compile backends running forward and backward graphs with onnxruntime.

Layer 3: it may import :mod:`experimental_experiment.torch_interpreter` and what lies
below (``xoptim``, ``xbuilder``, ``runtime``, bottom modules); never ``torch_models``,
``bench``, the CLI nor ``ext_test_case`` (``_unittests/test_layers.py`` checks it).
"""

from .debug_backend import DebugOptions, OnnxDebugBackend
from .onnx_backend import (
    BackendOptions,
    BackendStats,
    OnnxBackend,
    default_backend,
    onnx_custom_backend,
    onnx_debug_backend,
)

__all__ = [
    "BackendOptions",
    "BackendStats",
    "DebugOptions",
    "OnnxBackend",
    "OnnxDebugBackend",
    "default_backend",
    "onnx_custom_backend",
    "onnx_debug_backend",
]
