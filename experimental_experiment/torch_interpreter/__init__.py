"""Exporter from torch to ONNX: capture with torch.export, one converter per aten op.

Layer 2: it may import :mod:`experimental_experiment.xbuilder`,
:mod:`experimental_experiment.xoptim`, :mod:`experimental_experiment.runtime`,
:mod:`experimental_experiment.report`, :mod:`experimental_experiment.large` and the
bottom modules; never ``torch_dynamo``, ``torch_models``, ``bench``, the CLI nor the test
helpers of ``ext_test_case`` (``_unittests/test_layers.py`` checks it).
"""

from .convert.dispatcher import Dispatcher
from .errors import (
    CaptureError,
    ConversionError,
    DynamicShapesError,
    ExportError,
    InvalidArgumentError,
    SignatureError,
    TrainingModeWarning,
    UnfilledWeightsWarning,
    UnsupportedOpError,
    UnsupportedOutputError,
)
from .export_options import ExportOptions
from .onnx_export import to_onnx
from .result.export_result import ExportResult, export_program

__all__ = [
    "CaptureError",
    "ConversionError",
    "Dispatcher",
    "DynamicShapesError",
    "ExportError",
    "ExportOptions",
    "ExportResult",
    "InvalidArgumentError",
    "SignatureError",
    "TrainingModeWarning",
    "UnfilledWeightsWarning",
    "UnsupportedOpError",
    "UnsupportedOutputError",
    "export_program",
    "to_onnx",
]
