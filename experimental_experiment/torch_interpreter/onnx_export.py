"""to_onnx: the exporter's entry point, the model only (see :func:`export_program
<experimental_experiment.torch_interpreter.export_program>` for every result).
Its options beyond the model, the inputs and ``dynamic_shapes`` are gathered in one
:class:`ToOnnxSettings`."""

from __future__ import annotations

import difflib
from dataclasses import dataclass, fields
from typing import Any

import torch

from .._deprecation import deprecated
from ..xbuilder import OptimizationOptions
from .convert.dispatcher import Dispatcher
from .errors import InvalidArgumentError
from .export_options import ExportOptions
from .result.export_result import ExportResult, document_parameters, export_program
from .stages import DynamicShapes


@dataclass
class ToOnnxSettings:
    """The keyword options of
    :func:`to_onnx <experimental_experiment.torch_interpreter.to_onnx>`, with the
    defaults of
    :func:`export_program <experimental_experiment.torch_interpreter.export_program>`;
    ``return_builder`` and ``return_optimize_report`` choose what ``to_onnx`` returns.

    :param input_names: names of the ONNX inputs
    :param output_names: names of the ONNX outputs
    :param target_opset: opset of the default domain or ``{domain: version}``
    :param options: optimization options
    :param dispatcher: user converters
    :param export_options: capture strategy
    :param optimize: runs the optimization passes and patterns
    :param large_model: returns a ``ModelContainer``
    :param external_threshold: size in bytes from which weights go to external data
    :param filename: saves the model there
    :param verbose: verbosity
    :param export_modules_as_functions: child modules exported as local functions
    :param report: an ``ExportReport`` filled in place, or a path
    :param progress: a progress bar on stderr when it is a terminal
    :param return_builder: to_onnx returns ``(model, builder)``
    :param return_optimize_report: deprecated (removed in 0.3), to_onnx returns
        ``(model, optimization report)``

    .. code-block:: python

        from experimental_experiment.torch_interpreter.onnx_export import ToOnnxSettings

        settings = ToOnnxSettings.from_keywords({"optimize": False})
        print(settings.program_keywords()["optimize"])  # False
    """

    input_names: list[str] | None = None
    output_names: list[str] | None = None
    target_opset: int | dict | None = None
    options: OptimizationOptions | None = None
    dispatcher: Dispatcher | None = None
    export_options: ExportOptions | None = None
    optimize: bool = True
    large_model: bool = False
    external_threshold: int = 1024
    filename: str | None = None
    verbose: int = 0
    export_modules_as_functions: bool | set | None = None
    report: Any = None
    progress: bool = False
    return_builder: bool = False
    return_optimize_report: bool = False

    @classmethod
    def from_keywords(cls, keywords: dict[str, Any]) -> ToOnnxSettings:
        """The settings from ``to_onnx``'s keywords; an unknown keyword raises
        :class:`InvalidArgumentError` naming the closest option."""
        known = [f.name for f in fields(cls)]
        unknown = [k for k in keywords if k not in known]
        if unknown:
            close = difflib.get_close_matches(unknown[0], known, n=1)
            hint = f" (did you mean {close[0]!r}?)" if close else ""
            raise InvalidArgumentError(
                f"to_onnx() got an unexpected keyword argument {unknown[0]!r}{hint}; "
                f"its options are model, args, kwargs, dynamic_shapes and {known}."
            )
        return cls(**keywords)

    def program_keywords(self) -> dict[str, Any]:
        """The keywords ``export_program`` takes (all but the ``return_*`` ones)."""
        return {
            f.name: getattr(self, f.name) for f in fields(self) if not f.name.startswith("return_")
        }

    def returned(self, res: ExportResult) -> Any:
        """What to_onnx returns: the model, with the builder and the optimization
        report when asked."""
        extra = ((res.builder,) if self.return_builder else ()) + (
            (res.optimization,) if self.return_optimize_report else ()
        )
        return (res.model, *extra) if extra else res.model


@document_parameters
def to_onnx(
    model: torch.nn.Module | torch.fx.GraphModule | torch.export.ExportedProgram,
    args: tuple | None = None,
    kwargs: dict[str, Any] | None = None,
    *,
    dynamic_shapes: DynamicShapes = None,
    **settings: Any,
) -> Any:
    """Exports a torch model to ONNX: captures it with :func:`torch.export.export`,
    converts every aten operator, optimizes the graph and returns the ONNX model
    (:func:`export_program <experimental_experiment.torch_interpreter.export_program>`
    takes the same parameters and returns everything the export produced).
    The keywords after ``dynamic_shapes`` are gathered in a :class:`ToOnnxSettings
    <experimental_experiment.torch_interpreter.onnx_export.ToOnnxSettings>`.

    {export_parameters}
    :param settings: the keywords above after ``dynamic_shapes``, and:
    :param return_builder: returns ``(model, builder)``, kept for the code the seeds
        show (``export_program(...).builder`` is the same builder)
    :param return_optimize_report: deprecated (removed in 0.3), returns
        ``(model, report)`` (or ``(model, builder, report)`` with ``return_builder``):
        ``export_program(...).optimization`` is the same report
    :return: an ``onnx.ModelProto`` (a container with ``large_model=True``)

    .. code-block:: python

        import torch
        from experimental_experiment.torch_interpreter import to_onnx

        model = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.ReLU())
        onx = to_onnx(model, (torch.randn(2, 4),), dynamic_shapes=({0: "batch"},))
        print(onx.graph.input[0].type.tensor_type.shape.dim[0].dim_param)  # batch
    """
    chosen = ToOnnxSettings.from_keywords(settings)
    if chosen.return_optimize_report:
        deprecated("to_onnx(..., return_optimize_report=True)", "export_program(...).optimization")
    res = export_program(
        model, args, kwargs, dynamic_shapes=dynamic_shapes, **chosen.program_keywords()
    )
    return chosen.returned(res)


__all__ = ["ToOnnxSettings", "to_onnx"]
