"""to_onnx: the exporter's entry point, the model only (see :func:`export_program
<experimental_experiment.torch_interpreter.export_program>` for every result)."""

from __future__ import annotations

from typing import Any

import torch

from ..xbuilder import OptimizationOptions
from .convert.dispatcher import Dispatcher
from .export_options import ExportOptions
from .result.export_result import document_parameters, export_program


@document_parameters
def to_onnx(model: torch.nn.Module | torch.fx.GraphModule | torch.export.ExportedProgram,
            args: tuple | None = None, kwargs: dict[str, Any] | None = None, *,
            dynamic_shapes=None, input_names: list[str] | None = None,
            output_names: list[str] | None = None, target_opset: int | dict | None = None,
            options: OptimizationOptions | None = None, dispatcher: Dispatcher | None = None,
            export_options: ExportOptions | None = None, optimize: bool = True,
            large_model: bool = False, external_threshold: int = 1024,
            filename: str | None = None, verbose: int = 0, return_builder: bool = False,
            return_optimize_report: bool = False,
            export_modules_as_functions: bool | set | None = None, report=None):
    """Exports a torch model to ONNX: captures it with :func:`torch.export.export`,
    converts every aten operator, optimizes the graph and returns the ONNX model
    (:func:`export_program <experimental_experiment.torch_interpreter.export_program>`
    takes the same parameters and returns everything the export produced).

    {export_parameters}
    :param return_builder: returns ``(model, builder)``, kept for the code the seeds
        show (``export_program(...).builder`` is the same builder)
    :param return_optimize_report: returns ``(model, report)`` (or
        ``(model, builder, report)`` with ``return_builder``), kept for the code
        written before ``export_program`` (``result.optimization``)
    :return: an ``onnx.ModelProto`` (a container with ``large_model=True``)

    .. code-block:: python

        import torch
        from experimental_experiment.torch_interpreter import to_onnx

        model = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.ReLU())
        onx = to_onnx(model, (torch.randn(2, 4),), dynamic_shapes=({0: "batch"},))
        print(onx.graph.input[0].type.tensor_type.shape.dim[0].dim_param)  # batch
    """
    res = export_program(
        model, args, kwargs, dynamic_shapes=dynamic_shapes, input_names=input_names,
        output_names=output_names, target_opset=target_opset, options=options,
        dispatcher=dispatcher, export_options=export_options, optimize=optimize,
        large_model=large_model, external_threshold=external_threshold, filename=filename,
        verbose=verbose, export_modules_as_functions=export_modules_as_functions,
        report=report)
    extra = ((res.builder,) if return_builder else ()) + (
        (res.optimization,) if return_optimize_report else ())
    return (res.model, *extra) if extra else res.model
