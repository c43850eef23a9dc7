"""torch.compile backends running forward and backward graphs with onnxruntime."""

from .onnx_backend import onnx_custom_backend, onnx_debug_backend

__all__ = ["onnx_custom_backend", "onnx_debug_backend"]
