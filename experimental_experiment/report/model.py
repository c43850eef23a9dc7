"""The export report: what one export did (no torch import).

:func:`to_onnx <experimental_experiment.torch_interpreter.to_onnx>` fills an
:class:`ExportReport` phase by phase (``report=`` argument); errors it raises carry the
same record as ``err.report``. Its records are the dataclasses of
:mod:`experimental_experiment.report.records`; :mod:`experimental_experiment.report.render`
writes it as JSON, Markdown or SARIF 2.1.0.
"""

from __future__ import annotations

from typing import Any

from .records import (
    CaptureAttempt,
    ConverterUse,
    Decomposition,
    Diagnostic,
    DimensionRecord,
    ReportData,
    Rewrite,
    SourceLocation,
)
from .render import save_report, to_markdown, to_sarif

__all__ = [
    "CaptureAttempt",
    "ConverterUse",
    "Decomposition",
    "Diagnostic",
    "DimensionRecord",
    "ExportReport",
    "Rewrite",
    "SourceLocation",
]


class ExportReport(ReportData):
    """Everything one export recorded.

    :param model: the name of the exported model's class
    :param status: ``"not started"``, ``"running"``, ``"success"`` or ``"failed"``
    :param error_type: the class name of the error which stopped the export
    :param error: its message
    :param error_location: the user's line the error comes from
    :param capture_attempts: every call to :func:`torch.export.export`
        (``CaptureAttempt``)
    :param patches: the patches active during the capture
    :param decompositions: the operators torch decomposed, and why
        (``Decomposition``)
    :param converters: the converters used and how many nodes each translated
        (``ConverterUse``)
    :param timings: seconds spent in every step, by step name
    :param nodes_before_optimization: number of nodes before the optimization
    :param nodes_after_optimization: number of nodes after the optimization
    :param rewrites: the passes and patterns which changed the graph (``Rewrite``)
    :param dimensions: the dynamic dimensions specialized or constrained by the capture
        (:class:`DimensionRecord`)
    :param diagnostics: messages for the user (``Diagnostic``)

    .. code-block:: python

        import torch
        from experimental_experiment.report import ExportReport
        from experimental_experiment.torch_interpreter import to_onnx

        report = ExportReport()
        onx = to_onnx(torch.nn.Linear(4, 2), (torch.randn(3, 4),), report=report)
        print(report.to_markdown())
    """

    def to_markdown(self) -> str:
        """The report for people."""
        return to_markdown(self)

    def to_sarif(self) -> dict[str, Any]:
        """The report as a SARIF 2.1.0 log (a dict)."""
        return to_sarif(self)

    def save(self, path: str) -> None:
        """Writes ``.json``, ``.md`` or ``.sarif`` (by extension), atomically."""
        save_report(self, path)
