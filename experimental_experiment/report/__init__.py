"""The export report (data model and writers, no torch import); see
:class:`ExportReport`."""

from .model import (
    CaptureAttempt,
    ConverterUse,
    Decomposition,
    Diagnostic,
    DimensionRecord,
    ExportReport,
    Rewrite,
    SourceLocation,
)
from .render import render, save_report, to_markdown, to_sarif

__all__ = [
    "CaptureAttempt",
    "ConverterUse",
    "Decomposition",
    "Diagnostic",
    "DimensionRecord",
    "ExportReport",
    "Rewrite",
    "SourceLocation",
    "render",
    "save_report",
    "to_markdown",
    "to_sarif",
]
