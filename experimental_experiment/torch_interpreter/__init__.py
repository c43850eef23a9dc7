"""Exporter from torch to ONNX: capture with torch.export, one converter per aten op."""

from .dispatcher import Dispatcher
from .errors import (
    CaptureError,
    ConversionError,
    ExportError,
    InvalidArgumentError,
    UnsupportedOpError,
)
from .export_options import ExportOptions
from .onnx_export import to_onnx

__all__ = [
    "CaptureError",
    "ConversionError",
    "Dispatcher",
    "ExportError",
    "ExportOptions",
    "InvalidArgumentError",
    "UnsupportedOpError",
    "to_onnx",
]
