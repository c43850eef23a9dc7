"""torch.compile backends running forward and backward graphs with onnxruntime.

Layer 3: it may import :mod:`experimental_experiment.torch_interpreter` and what lies
below (``xoptim``, ``xbuilder``, ``runtime``, bottom modules); never ``torch_models``,
``bench``, the CLI nor ``ext_test_case`` (``_unittests/test_layers.py`` checks it).
"""

from .onnx_backend import onnx_custom_backend, onnx_debug_backend

__all__ = ["onnx_custom_backend", "onnx_debug_backend"]
