"""The result of an export as one value: :func:`export_program` returns an
:class:`ExportResult`; :func:`to_onnx <experimental_experiment.torch_interpreter.to_onnx>`
returns only its model (or the tuples its ``return_*`` flags ask for, kept for the code
written before).

.. code-block:: python

    import torch
    from experimental_experiment.torch_interpreter import export_program

    res = export_program(torch.nn.Linear(4, 2), (torch.randn(3, 4),))
    onx = res.model                       # onnx.ModelProto
    print(len(res.builder.nodes), [e.name for e in res.optimization if e.applied])
    print(res.report.status)              # the export report ("success")
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ..xbuilder import GraphBuilder
from ..xoptim.report import OptimizationReport
from .errors import InvalidArgumentError


@dataclass
class ExportResult:
    """What one export produced.

    :param model: the ``onnx.ModelProto`` (or the ``ModelContainer`` of
        ``large_model=True``)
    :param builder: the GraphBuilder the model was written from
    :param optimization: what every optimization pass and pattern did
    :param report: the export report
        (:class:`ExportReport <experimental_experiment.report.ExportReport>`)
    """

    model: Any
    builder: GraphBuilder
    optimization: OptimizationReport
    report: Any = None


def export_program(model, args: tuple | None = None, kwargs: dict | None = None,
                   **options) -> ExportResult:
    """Exports like :func:`to_onnx <experimental_experiment.torch_interpreter.to_onnx>`
    (same keyword parameters) and returns an :class:`ExportResult`.

    ``report=`` may be an ``ExportReport`` (filled in place), a path where the report
    is written, or None (a new report, in ``result.report``).
    """
    from ..report import ExportReport
    from .onnx_export import to_onnx

    flags = {"return_builder", "return_optimize_report"} & set(options)
    if flags:
        raise InvalidArgumentError(
            f"export_program returns every result, {sorted(flags)} do not apply")
    report = options.pop("report", None)
    if report is None:
        report = ExportReport()
    onx, builder, optimization = to_onnx(model, args, kwargs, return_builder=True,
                                         return_optimize_report=True, report=report,
                                         **options)
    kept = report if isinstance(report, ExportReport) else None
    return ExportResult(onx, builder, optimization, kept)


__all__ = ["ExportResult", "export_program"]
