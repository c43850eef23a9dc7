"""Tools on ONNX models which do not need torch: a text dump and statistics."""

from .onnx_stats import format_statistics, model_statistics
from .onnx_text import pretty_onnx
