"""Tools on ONNX models which do not need torch: a text dump and statistics.

Layer 0: onnx, numpy and :mod:`experimental_experiment.xbuilder` only; never torch.
"""

from .onnx_stats import format_statistics, model_statistics
from .onnx_text import pretty_onnx
