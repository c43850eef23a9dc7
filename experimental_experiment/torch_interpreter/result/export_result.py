"""The exporter: :func:`export_program` captures, converts, optimizes and serializes a
model and returns everything it produced as one :class:`ExportResult`.
:func:`to_onnx <experimental_experiment.torch_interpreter.to_onnx>` returns only its
model (or ``(model, builder)`` with ``return_builder=True``, kept for the code the seeds
show).

.. code-block:: python

    import torch
    from experimental_experiment.torch_interpreter import export_program

    res = export_program(torch.nn.Linear(4, 2), (torch.randn(3, 4),))
    onx = res.model                       # onnx.ModelProto
    print(len(res.builder.nodes), [e.name for e in res.optimization if e.applied])
    print(res.report.status)              # the export report ("success")
"""

from __future__ import annotations

import os
import textwrap
from dataclasses import dataclass
from typing import Any, Callable, TypeVar, cast

import torch

from ...progress import Progress, progress_enabled
from ...report import ExportReport
from ...verbosity import with_verbose_logging
from ...xbuilder import GraphBuilder, OptimizationOptions
from ...xbuilder.model_container import save_model
from ...xbuilder.safe_paths import check_output_path
from ...xoptim.optimizer import optimize_builder
from ...xoptim.report import OptimizationReport
from ..capture.guard_ranges import ranges_metadata
from ..capture.input_checks import check_target_opset
from ..capture.prepare import check_arguments, mutations_last, prepare
from ..capture.shape_guards import warn_constrained
from ..convert import aten  # noqa: F401  registers the converters
from ..convert.dispatcher import Dispatcher
from ..convert.interpreter import Interpreter
from ..convert.registry import DEFAULT_REGISTRY
from ..export_options import ExportOptions
from ..export_report import PhaseClock, record_conversion, record_optimization, reported
from ..stages import DynamicShapes, PreparedProgram, SerializationPlan
from .large_model import make_container, pin_weights, weight_free_inputs

_F = TypeVar("_F", bound=Callable[..., Any])


@dataclass
class ExportResult:
    """What one export produced.

    :param model: the ``onnx.ModelProto`` (or the ``ModelContainer`` of
        ``large_model=True``)
    :param builder: the GraphBuilder the model was written from
    :param optimization: what every optimization pass and pattern did
    :param report: the export report
        (:class:`ExportReport <experimental_experiment.report.ExportReport>`)

    .. code-block:: python

        import torch
        from experimental_experiment.torch_interpreter import export_program

        result = export_program(torch.nn.Linear(4, 2), (torch.randn(3, 4),))
        onx = result.model  # an onnx.ModelProto
        print(result.optimization)
    """

    model: Any
    builder: GraphBuilder
    optimization: OptimizationReport
    report: ExportReport


# The parameters export_program and to_onnx share, documented once
# (document_parameters puts them in place of ``{export_parameters}`` in a docstring).
EXPORT_PARAMETERS = """\
:param model: an ``nn.Module``, a ``torch.fx.GraphModule`` (what a torch.compile
    backend receives, its nodes must have ``meta["val"]``) or an ``ExportedProgram``
:param args: positional inputs (a tuple)
:param kwargs: keyword inputs
:param dynamic_shapes: as :func:`torch.export.export` takes them; strings are
    accepted as dimension names (``{"x": {0: "batch"}}``) and become the
    ``dim_param`` of the ONNX inputs and outputs
:param input_names: names of the ONNX inputs (default: the flattened argument names)
:param output_names: names of the ONNX outputs (default: ``output_0``, ...)
:param target_opset: opset of the default domain (default
    ``experimental_experiment.xbuilder.DEFAULT_OPSET``) or ``{domain: version}``
:param options: optimization options
    (:class:`~experimental_experiment.xbuilder.OptimizationOptions`: pattern sets,
    constant folding), used when ``optimize`` is True
:param dispatcher: user converters
    (:class:`~experimental_experiment.torch_interpreter.Dispatcher`), they win over the
    built-in ones for this export only
:param export_options: capture strategy
    (:class:`~experimental_experiment.torch_interpreter.ExportOptions`: strict or not,
    decompositions, fallbacks)
:param optimize: runs the optimization passes and patterns (False: the graph as the
    converters wrote it)
:param large_model: the model is a
    :class:`~experimental_experiment.xbuilder.model_container.ModelContainer`
    (the graph and references to the weights, no copy) whose ``save(path)`` streams
    the weights to ``<path>.data``; required for a model without weights (``meta``
    device, fake tensors), whose initializers are declared external, to be filled
    with :func:`experimental_experiment.large.fill_weights`
:param external_threshold: size in bytes from which weights go to external data
    (large models)
:param filename: saves the model there, atomically; with external data when the
    weights exceed 2 GB or have no data (the ModelProto returned then refers to it)
:param verbose: verbosity: the package's INFO (1) or DEBUG (2) messages are printed
    during the call (the logging configuration is restored after)
:param export_modules_as_functions: True (every child module of the model) or a set
    of module types (or class names): the nodes of each instance become a call to an
    ONNX local function of domain ``local_functions``, weights given as inputs, so
    instances with the same structure share one function; see
    :mod:`experimental_experiment.torch_interpreter.convert.module_functions`
    (``inline_functions(onx)`` flattens the model again)
:param report: an :class:`ExportReport <experimental_experiment.report.ExportReport>`
    filled in place, or a path (``.json``, ``.md``, ``.sarif``) where the report is
    written (atomically), after a success or a failure; an error raised by the
    export carries the same record as ``err.report``
:param progress: shows a progress bar on stderr when it is a terminal: the step in
    progress (capture, convert, optimize, serialize), the FX nodes converted (the
    node being converted), the optimization rounds, the bytes of the weights saved
    (the command line ``export`` shows it by default, ``--no-progress`` hides it)
"""


def document_parameters(func: _F) -> _F:
    "Replaces the line ``{export_parameters}`` of *func*'s docstring by EXPORT_PARAMETERS."
    lines = cast(str, func.__doc__).split("\n")
    for i, line in enumerate(lines):
        if line.strip() == "{export_parameters}":
            indent = line[: len(line) - len(line.lstrip())]
            lines[i] = textwrap.indent(EXPORT_PARAMETERS, indent).rstrip("\n")
    func.__doc__ = "\n".join(lines)
    return func


@reported
@with_verbose_logging
@document_parameters
def export_program(
    model: torch.nn.Module | torch.fx.GraphModule | torch.export.ExportedProgram,
    args: tuple | None = None,
    kwargs: dict[str, Any] | None = None,
    *,
    dynamic_shapes: DynamicShapes = None,
    input_names: list[str] | None = None,
    output_names: list[str] | None = None,
    target_opset: int | dict | None = None,
    options: OptimizationOptions | None = None,
    dispatcher: Dispatcher | None = None,
    export_options: ExportOptions | None = None,
    optimize: bool = True,
    large_model: bool = False,
    external_threshold: int = 1024,
    filename: str | None = None,
    verbose: int = 0,
    export_modules_as_functions: bool | set | None = None,
    report: ExportReport | str | os.PathLike | None = None,
    progress: bool = False,
) -> ExportResult:
    """Exports a torch model to ONNX through torch.export.export.

    {export_parameters}
    :return: an :class:`ExportResult`: the model, the builder, the optimization report,
        the export report (``result.report``, also when ``report`` is None or a path)

    .. code-block:: python

        import torch
        from experimental_experiment.torch_interpreter import export_program

        res = export_program(torch.nn.Linear(4, 2), (torch.randn(3, 4),),
                             dynamic_shapes=({0: "batch"},))
        print(res.report.status, len(res.model.graph.node))

    Buffers and inputs the model mutates in place (``self.count.add_(1)``, a cache
    updated with ``index_copy_``, the running statistics of a BatchNorm in training
    mode) become extra outputs named ``<buffer or input>_updated``, after the model's own
    outputs: the ONNX model is functional, the caller feeds the new value back.

    Complex tensors (``complex64``, ``complex128``) are real tensors with a trailing
    dimension 2 (real, imaginary) in the ONNX model, what ``torch.view_as_real``
    returns: onnxruntime runs almost no operator on ONNX complex types. A complex input
    ``z`` becomes the input ``z_real_imag`` (float32 or float64, shape
    ``(*z.shape, 2)``), fed with ``torch.view_as_real(z)``; a complex output is named
    ``<name>_real_imag`` and ``torch.view_as_complex`` gives its values back.
    """
    report = cast(ExportReport, report)  # @reported made it from None, a path or a report
    if filename:  # before any export work: a folder, a read-only folder fail now
        check_output_path(filename, what="filename")
    inputs = check_arguments(model, args, kwargs, export_options, options, dispatcher)
    check_target_opset(target_opset)
    serialization = SerializationPlan(
        container=large_model, filename=filename, threshold=external_threshold
    )
    inputs = weight_free_inputs(model, inputs, serialization)
    builder = GraphBuilder(target_opset, verbose=verbose)
    clock = PhaseClock(report)
    steps = ["capture", "convert"] + (["optimize"] if optimize else []) + ["serialize"]
    with Progress(steps, "to_onnx", progress_enabled(progress)) as bar:
        shown = bar if bar.enabled else None  # the inner bars, None: nothing drawn
        with bar.step("capture"):
            prepared = prepare(
                model,
                inputs,
                dynamic_shapes,
                export_options or ExportOptions(),
                input_names,
                output_names,
                dispatcher,
                builder.main_opset,
                report=report,
            )
        clock("capture")
        warn_constrained(report.dimensions)
        builder.metadata_props.update(ranges_metadata(report.dimensions))
        with bar.step("convert"):
            interp = _interpreter(builder, prepared, dispatcher, export_modules_as_functions)
            outputs = interp.run(prepared.outputs.names, progress=shown)
            mutations_last(builder, outputs, prepared.outputs)
            # weights going to external data are pinned: the optimizer does not fold them
            pin_weights(builder, serialization)
            if export_modules_as_functions:
                from ..convert.module_functions import (
                    ModuleTaggingInterpreter,
                    make_local_functions,
                )

                make_local_functions(builder, cast(ModuleTaggingInterpreter, interp).owner)
        clock("interpret")
        record_conversion(report, interp.converters_used)
        n_nodes = len(builder.nodes)
        # one entry per pass and pattern (name, matched, applied, refused, time_s)
        optimization = OptimizationReport()
        if optimize:
            with bar.step("optimize"):
                optimization = optimize_builder(builder, options, progress=shown)
        clock("optimize")
        record_optimization(report, n_nodes, len(builder.nodes), optimization)
        with bar.step("serialize"):
            onx = _serialize(builder, model, serialization, clock, shown)
    return ExportResult(onx, builder, optimization, report)


def _interpreter(builder, prepared: PreparedProgram, dispatcher, modules) -> Interpreter:
    """The interpreter converting the prepared graph into ``builder`` (``modules``: the
    child modules whose nodes become local functions); the user's converters
    (``dispatcher``) are layered on the built-in ones."""
    gm, plan, namer = prepared.graph_module, prepared.plan, prepared.namer
    registry = DEFAULT_REGISTRY.layered(dispatcher)
    if modules:
        from ..convert.module_functions import ModuleTaggingInterpreter

        return ModuleTaggingInterpreter(
            builder, gm, plan, registry=registry, namer=namer, selected=modules
        )
    return Interpreter(builder, gm, plan, registry=registry, namer=namer)


def _serialize(builder, model, plan: SerializationPlan, clock: PhaseClock, progress=None):
    """The ModelProto (or the container of ``large_model=True``), saved if asked;
    ``progress`` counts the bytes of the weights copied or saved."""
    if plan.external:  # saved if filename, the ModelProto refers to its data file
        container = make_container(builder, plan.threshold, plan.filename, model, progress)
        onx = container if plan.container else container.model_proto
    else:
        onx = builder.to_onnx(optimize=False, progress=progress)
    clock("serialize")
    if plan.filename and not plan.external:
        save_model(onx, plan.filename)
        clock("save")
    return onx


__all__ = ["EXPORT_PARAMETERS", "ExportResult", "document_parameters", "export_program"]
