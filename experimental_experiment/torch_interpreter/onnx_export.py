"""to_onnx: the exporter's entry point."""

from __future__ import annotations

import logging
from typing import Any

import torch

from ..xbuilder import GraphBuilder, OptimizationOptions
from ..xoptim.optimizer import optimize_builder
from ..verbosity import with_verbose_logging
from ..xoptim.report import OptimizationReport
from ..xbuilder.model_container import save_model
from . import aten  # noqa: F401  registers the converters
from ._dims import DimNamer
from .capture import capture, decompose
from .capture_dims import check_zero_one, size_oblivious_capture, zero_one_axes
from .custom_op_fallback import inline_custom_ops
from .decomposition_fallback import decompose_unsupported
from .dispatcher import Dispatcher
from .dynamic_shapes import _argument_names, leaf_paths, normalize_dynamic_shapes, symbol_names
from .errors import CaptureError, InvalidArgumentError
from .export_options import ExportOptions
from .input_checks import (
    check_dynamic_shapes_axes, check_target_opset, describe_dimension_sources,
)
from .export_report import (
    PhaseClock, record_capture, record_conversion, record_decompositions,
    record_optimization, reported,
)
from .interpreter import InputPlan, Interpreter
from .large_model import make_container, pin_weights, weight_free_inputs
from .shape_guards import record_shape_guards

logger = logging.getLogger(__name__)

_KEPT_OUTPUTS = ("USER_OUTPUT",)


@reported
@with_verbose_logging
def to_onnx(
    model: torch.nn.Module | torch.fx.GraphModule | torch.export.ExportedProgram,
    args: tuple | None = None,
    kwargs: dict[str, Any] | None = None,
    *,
    dynamic_shapes=None,
    input_names: list[str] | None = None,
    output_names: list[str] | None = None,
    target_opset: int | dict[str, int] | None = None,
    options: OptimizationOptions | None = None,
    dispatcher: Dispatcher | None = None,
    export_options: ExportOptions | None = None,
    optimize: bool = True,
    large_model: bool = False,
    external_threshold: int = 1024,
    filename: str | None = None,
    verbose: int = 0,
    return_builder: bool = False,
    return_optimize_report: bool = False,
    export_modules_as_functions: bool | set | None = None,
    report=None,
):
    """Exports a torch model to ONNX through torch.export.export.

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
        :data:`experimental_experiment.xbuilder.DEFAULT_OPSET`) or ``{domain: version}``
    :param options: optimization options
    :param dispatcher: user converters, they win over the built-in ones
    :param export_options: capture strategy (strict, decompositions, fallback)
    :param optimize: runs the optimization passes
    :param large_model: returns a
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
    :param return_builder: returns ``(model, builder)`` (kept for the code the seeds
        show; :func:`export_program` returns a result object with the model, the
        builder, the optimization report and the export report)
    :param return_optimize_report: returns ``(model, report)`` (or
        ``(model, builder, report)`` with ``return_builder``); deprecated in favor of
        :func:`export_program`
    :param export_modules_as_functions: True (every child module of the model) or a set
        of module types (or class names): the nodes of each instance become a call to an
        ONNX local function of domain ``local_functions``, weights given as inputs, so
        instances with the same structure share one function; see
        :mod:`experimental_experiment.torch_interpreter.module_functions`
        (``inline_functions(onx)`` flattens the model again)
    :param report: an :class:`ExportReport <experimental_experiment.report.ExportReport>`
        filled in place, or a path (``.json``, ``.md``, ``.sarif``) where the report is
        written (atomically), after a success or a failure; an error raised by
        ``to_onnx`` carries the same record as ``err.report``
    :return: an ``onnx.ModelProto``, a
        :class:`~experimental_experiment.xbuilder.model_container.ModelContainer` with
        ``large_model=True``

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

    .. code-block:: python

        import torch
        from experimental_experiment.torch_interpreter import to_onnx

        model = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.ReLU())
        onx = to_onnx(model, (torch.randn(2, 4),), dynamic_shapes=({0: "batch"},))
        print(onx.graph.input[0].type.tensor_type.shape.dim[0].dim_param)  # batch
    """
    args, kwargs = _check_arguments(model, args, kwargs, export_options, options, dispatcher)
    check_target_opset(target_opset)
    args, kwargs, weight_free = weight_free_inputs(model, args, kwargs,
                                                   large=large_model or bool(filename))
    builder = GraphBuilder(target_opset, verbose=verbose)
    clock = PhaseClock(report)
    gm, plan, namer, out_names = _prepare(
        model, args, kwargs, dynamic_shapes, export_options or ExportOptions(),
        input_names, output_names, dispatcher, builder.main_opset, report=report,
    )
    clock("capture")
    if export_modules_as_functions:
        from .module_functions import ModuleTaggingInterpreter, make_local_functions

        interp = ModuleTaggingInterpreter(builder, gm, plan, dispatcher=dispatcher,
                                          namer=namer, selected=export_modules_as_functions)
    else:
        interp = Interpreter(builder, gm, plan, dispatcher=dispatcher, namer=namer)
    _mutations_last(builder, interp.run(out_names), out_names)
    # weights going to external data are pinned: the optimizer does not fold them
    large = pin_weights(builder, external_threshold, large=large_model or weight_free)
    if export_modules_as_functions:
        make_local_functions(builder, interp.owner)
    clock("interpret")
    record_conversion(report, interp.converters_used)
    n_nodes = len(builder.nodes)
    # one dict per pass and pattern (name, matched, applied, refused, time_s)
    opt_report = optimize_builder(builder, options) if optimize else OptimizationReport()
    clock("optimize")
    record_optimization(report, n_nodes, len(builder.nodes), opt_report)
    if large:  # saved if filename, the ModelProto refers to its data file
        container = make_container(builder, external_threshold, filename, model)
        onx = container if large_model else container.model_proto
    else:
        onx = builder.to_onnx(optimize=False)
    clock("serialize")
    if filename and not large:
        save_model(onx, filename)
        clock("save")
    result = (onx,)
    if return_builder:
        result += (builder,)
    if return_optimize_report:
        result += (opt_report,)
    return result[0] if len(result) == 1 else result


def _check_arguments(model, args, kwargs, export_options, options, dispatcher):
    if not isinstance(model, (torch.nn.Module, torch.export.ExportedProgram)):
        raise InvalidArgumentError(
            f"model must be a torch.nn.Module, a torch.fx.GraphModule or an "
            f"ExportedProgram, not {type(model).__name__}"
        )
    if args is None:
        args = ()
    if isinstance(args, list):
        args = tuple(args)
    if not isinstance(args, tuple):
        raise InvalidArgumentError(
            f"args must be a tuple of inputs, not {type(args).__name__}; "
            "for a single tensor write (x,)"
        )
    kwargs = kwargs or {}
    if not isinstance(kwargs, dict):
        raise InvalidArgumentError(f"kwargs must be a dict, not {type(kwargs).__name__}")
    for value, cls, name in [(export_options, ExportOptions, "export_options"),
                             (options, OptimizationOptions, "options"),
                             (dispatcher, Dispatcher, "dispatcher")]:
        if value is not None and not isinstance(value, cls):
            raise InvalidArgumentError(
                f"{name} must be a {cls.__name__}, not {type(value).__name__}"
            )
    return args, kwargs


def _prepare(model, args, kwargs, dynamic_shapes, export_options, input_names, output_names,
             dispatcher=None, opset=18, report=None):
    """Captures if needed; returns the graph module, the input plan, the dim namer and
    the output names (None for outputs to drop)."""
    if isinstance(model, torch.fx.GraphModule) and not isinstance(
        model, torch.export.ExportedProgram
    ) and _has_meta(model):
        return _prepare_graph_module(model, args, input_names, output_names)
    if isinstance(model, torch.export.ExportedProgram):
        # functionalized like a captured model when it has in-place operators
        ep, names = decompose(model, export_options.decomposition_table), {}
        paths = None
    else:
        # an example size 0 or 1 on a dynamic dimension: captured as any other size
        arg_names = _argument_names(model, args, kwargs)
        check_dynamic_shapes_axes(dynamic_shapes, arg_names, list(args) + list(kwargs.values()))
        small = zero_one_axes(model, args, kwargs, dynamic_shapes)
        ds, names = normalize_dynamic_shapes(dynamic_shapes, model, args, kwargs)
        attempts, guards = [], None
        try:
            with size_oblivious_capture(bool(small)), record_shape_guards() as guards:
                ep = capture(model, args, kwargs, ds, export_options, attempts)
                if export_options.decomposition_fallback:  # custom ops with no converter
                    inlined = []
                    ep = inline_custom_ops(
                        ep, lambda: capture(model, args, kwargs, ds, export_options), opset,
                        None if dispatcher is None else (lambda op: dispatcher.find(op)
                                                         is not None), record=inlined)
                    if report is not None:
                        record_decompositions(report, inlined)
        except CaptureError as e:
            # torch's L['x'].size()[0] becomes: dimension 0 ('batch') of input 'x'
            e.args = (describe_dimension_sources(str(e), names, arg_names),) + e.args[1:]
            if small:  # say what was changed for these sizes
                e.args = (f"{e}\nThe example size of {', '.join(w for *_, w in small)} is "
                          "0 or 1: the capture ran with backed_size_oblivious=True to keep "
                          "it dynamic; an example size >= 2 may capture or explain more.",)
            raise
        finally:
            if report is not None:
                record_capture(report, attempts, guards, model, args, kwargs)
        leaves = leaf_paths(model, args, kwargs)
        check_zero_one(ep, [leaf for _, leaf in leaves], small)
        paths = [p for p, _ in leaves]
        if input_names is None:
            input_names = _default_input_names(ep, model, args, kwargs, paths)
    if export_options.decomposition_fallback:
        can_convert = None if dispatcher is None else (lambda op: dispatcher.find(op) is not None)
        decomposed = []
        try:
            ep = decompose_unsupported(ep, opset, can_convert, decomposed)
        finally:
            if report is not None:
                record_decompositions(report, decomposed)
    return _prepare_exported_program(ep, names, paths, input_names, output_names)


def _default_input_names(ep, model, args, kwargs, paths) -> list[str] | None:
    """Names of the user inputs when a transformers cache is given under another name
    than ``past_key_values`` (``cache`` since transformers 5.24): the ONNX inputs keep
    the names ``past_key_values_key_<i>``; None (placeholder names) otherwise."""
    from torch.export.graph_signature import InputKind

    from .patches.cache_registration import cache_input_renames

    renames = cache_input_renames(_argument_names(model, args, kwargs),
                                  list(args) + list(kwargs.values()))
    user = [s.arg.name for s in ep.graph_signature.input_specs
            if s.kind == InputKind.USER_INPUT]
    if not renames or len(user) != len(paths):
        return None
    vals = {n.name: n.meta.get("val") for n in ep.graph_module.graph.nodes
            if n.op == "placeholder"}
    names = []
    for name, path in zip(user, paths):
        if not isinstance(vals.get(name), (torch.Tensor, torch.SymInt)):
            continue  # a constant input, no ONNX input
        prefix = renames.get(path[0])
        names.append(prefix + name[len(path[0]):] if prefix and name.startswith(path[0])
                     else name)
    return names


def _has_meta(gm: torch.fx.GraphModule) -> bool:
    return all("val" in n.meta or n.op in ("output", "get_attr") for n in gm.graph.nodes
               if n.op in ("placeholder", "call_function"))


def _prepare_graph_module(gm, args, input_names, output_names):
    placeholders = [n for n in gm.graph.nodes if n.op == "placeholder"]
    names = list(input_names) if input_names else [p.name for p in placeholders]
    if len(names) != len(placeholders):
        raise InvalidArgumentError(
            f"{len(names)} input names for {len(placeholders)} graph inputs"
        )
    plan = InputPlan(inputs={p.name: n for p, n in zip(placeholders, names)})
    out = next(n for n in gm.graph.nodes if n.op == "output").args[0]
    out = out if isinstance(out, (list, tuple)) else [out]
    # None outputs (gradients of inputs not requiring one) have no ONNX counterpart
    return gm, plan, DimNamer(), _output_names(output_names, [o is not None for o in out])


def _prepare_exported_program(ep, dim_names, paths, input_names, output_names):
    from torch.export.graph_signature import InputKind, OutputKind

    gm = ep.graph_module
    placeholders = {n.name: n for n in gm.graph.nodes if n.op == "placeholder"}
    plan = InputPlan()
    user = []
    for spec in ep.graph_signature.input_specs:
        name = spec.arg.name
        if spec.kind == InputKind.USER_INPUT:
            val = placeholders[name].meta.get("val")
            if isinstance(val, torch.Tensor) or isinstance(val, torch.SymInt):
                user.append(name)
            else:
                logger.info("input %r is a constant (%r) baked into the graph", name, val)
                plan.skipped.add(name)
        elif spec.kind in (InputKind.PARAMETER, InputKind.BUFFER):
            tensor = ep.state_dict.get(spec.target)
            if tensor is None:
                tensor = ep.constants[spec.target]
            plan.initializers[name] = (spec.target, tensor)
        elif spec.kind == InputKind.CONSTANT_TENSOR:
            plan.initializers[name] = (spec.target, ep.constants[spec.target])
        else:
            plan.skipped.add(name)
    if input_names is not None:
        if len(input_names) != len(user):
            raise InvalidArgumentError(
                f"{len(input_names)} input names for {len(user)} tensor inputs {user}"
            )
        plan.inputs = dict(zip(user, input_names))
    namer = DimNamer()
    if dim_names and paths is not None:
        nodes = [placeholders[s.arg.name] for s in ep.graph_signature.input_specs
                 if s.kind == InputKind.USER_INPUT]
        namer = DimNamer(symbol_names(nodes, paths, dim_names))
    keep = []
    for spec in ep.graph_signature.output_specs:
        if spec.kind == OutputKind.USER_OUTPUT:
            keep.append(True)
        elif spec.kind in (OutputKind.BUFFER_MUTATION, OutputKind.USER_INPUT_MUTATION):
            # the new value of a mutated buffer or input: an extra output (a KV cache)
            base = plan.inputs.get(spec.target, spec.target)
            logger.info("the new value of %r (%s) is the output %r", spec.target,
                        spec.kind.name, f"{base}_updated")
            keep.append(_MutationName(f"{base}_updated"))
        else:
            keep.append(False)
            logger.warning("output %r (%s) of %r is dropped", spec.arg.name,
                           spec.kind.name, spec.target)
    return gm, plan, namer, _output_names(output_names, keep)


class _MutationName(str):
    """Name of an output holding the new value of a mutated buffer or input."""


def _output_names(output_names, keep: list) -> list[str | None]:
    n_user = sum(k is True for k in keep)
    if output_names is not None and len(output_names) != n_user:
        raise InvalidArgumentError(f"{len(output_names)} output names for {n_user} outputs")
    it = iter(output_names or [f"output_{i}" for i in range(n_user)])
    return [next(it) if k is True else (k or None) for k in keep]


def _mutations_last(builder: GraphBuilder, names: list[str], out_names: list) -> None:
    """Moves the outputs of mutated buffers and inputs after the user's outputs."""
    kinds = [isinstance(n, _MutationName) for n in out_names if n is not None]
    if not any(kinds) or len(kinds) != len(names):
        return
    moved = {n for n, k in zip(names, kinds) if k}
    builder.outputs = [o for o in builder.outputs if o not in moved] + [
        o for o in builder.outputs if o in moved]
