"""From the user's model to the FX graph the interpreter converts: argument checks,
capture (or the graph module as given), input plan, dimension names, output names."""

from __future__ import annotations

import logging
from typing import Any

import torch

from ...report import ExportReport
from ...xbuilder import GraphBuilder, OptimizationOptions
from .._dims import DimNamer
from ..convert.dispatcher import Dispatcher
from ..errors import CaptureError, InvalidArgumentError, UnsupportedOutputError
from ..export_options import ExportOptions
from ..export_report import record_capture, record_decompositions, record_guard_ranges
from ..stages import (
    DynamicShapes,
    ExampleInputs,
    InputPlan,
    OutputSlot,
    OutputSpec,
    PreparedProgram,
)
from .capture import capture, decompose
from .capture_dims import check_zero_one, size_oblivious_capture
from .custom_op_fallback import inline_custom_ops
from .decomposition_fallback import decompose_unsupported
from .fake_quantize_capture import fixed_fake_quantizers
from .input_checks import check_signature, warn_training_mode
from .shape_guards import record_shape_guards
from .symbolic_text import failing_line, shorten_symbolic, symbol_descriptions
from .user_inputs import UserInputs, read_user_inputs

logger = logging.getLogger(__name__)


def check_arguments(
    model: object,
    args: tuple | list | None,
    kwargs: dict[str, Any] | None,
    export_options: ExportOptions | None,
    options: OptimizationOptions | None,
    dispatcher: Dispatcher | None,
) -> ExampleInputs:
    """The example inputs as a tuple and a dict; raises :class:`InvalidArgumentError`
    for a model, inputs or options of the wrong type."""
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
    for value, cls, name in [
        (export_options, ExportOptions, "export_options"),
        (options, OptimizationOptions, "options"),
        (dispatcher, Dispatcher, "dispatcher"),
    ]:
        if value is not None and not isinstance(value, cls):
            raise InvalidArgumentError(
                f"{name} must be a {cls.__name__}, not {type(value).__name__}"
            )
    return ExampleInputs(args, kwargs)


def prepare(
    model: torch.nn.Module | torch.export.ExportedProgram,
    inputs: ExampleInputs,
    dynamic_shapes: DynamicShapes,
    export_options: ExportOptions,
    input_names: list[str] | None,
    output_names: list[str] | None,
    dispatcher: Dispatcher | None,
    opset: int,
    report: ExportReport,
) -> PreparedProgram:
    """Captures if needed; returns the graph module, the input plan, the dim namer and
    the outputs. ``report`` receives what the capture found (attempts, guards,
    dimension ranges, decompositions). ``dynamic_shapes`` is read once, with the
    example inputs, into a :class:`UserInputs`."""
    if (
        isinstance(model, torch.fx.GraphModule)
        and not isinstance(model, torch.export.ExportedProgram)
        and _has_meta(model)
    ):
        return _prepare_graph_module(model, input_names, output_names)
    can_convert = None if dispatcher is None else (lambda op: dispatcher.find(op) is not None)
    user = None
    if isinstance(model, torch.export.ExportedProgram):
        # functionalized like a captured model when it has in-place operators
        ep = decompose(model, export_options.decomposition_table)
    else:
        check_signature(model, inputs.args, inputs.kwargs)
        warn_training_mode(model)
        user = read_user_inputs(model, inputs.args, inputs.kwargs, dynamic_shapes)
        ep = _capture_model(model, user, export_options, can_convert, opset, report)
        if input_names is None:
            input_names = _default_input_names(ep, user)
    if export_options.decomposition_fallback:
        decomposed = []
        try:
            ep = decompose_unsupported(ep, opset, can_convert, decomposed)
        finally:
            record_decompositions(report, decomposed)
    return _prepare_exported_program(ep, user, input_names, output_names)


def _capture_model(
    model, inputs: UserInputs, export_options, can_convert, opset, report: ExportReport
) -> torch.export.ExportedProgram:
    """torch.export.export of the model, custom operators without a converter inlined."""
    # an example size 0 or 1 on a dynamic dimension: captured as any other size
    args, kwargs, layout = inputs.args, inputs.kwargs, inputs.layout
    attempts, guards = [], None
    try:
        with (
            size_oblivious_capture(bool(inputs.small)),
            record_shape_guards() as guards,
            fixed_fake_quantizers(model),
        ):
            ep = capture(model, args, kwargs, inputs.torch_spec, export_options, attempts, layout)
            if export_options.decomposition_fallback:  # custom ops with no converter
                inlined = []
                ep = inline_custom_ops(
                    ep,
                    lambda: capture(
                        model, args, kwargs, inputs.torch_spec, export_options, layout=layout
                    ),
                    opset,
                    can_convert,
                    record=inlined,
                )
                record_decompositions(report, inlined)
    except CaptureError as e:
        _explain_capture_error(e, inputs, guards)
        raise
    finally:
        record_capture(report, attempts, guards, inputs.leaf_names)
    # the sizes every guard of the capture accepts
    record_guard_ranges(report, ep, guards, inputs.leaf_names)
    check_zero_one(ep, [leaf for _, leaf in inputs.leaves], inputs.small)
    return ep


def _explain_capture_error(e: CaptureError, inputs: UserInputs, recorder=None) -> None:
    """Rewrites the message: torch's ``L['x'].size()[0]`` becomes dimension 0
    ('batch') of input 'x', long symbolic expressions the dimensions they are made of,
    the model's failing line is named; sizes 0 or 1 captured size-oblivious are named."""
    describe = inputs.describe
    text = shorten_symbolic(describe(str(e)), symbol_descriptions(recorder, describe))
    attempts = getattr(e, "attempts", None) or []
    line = failing_line(attempts[-1][1]) if attempts else None
    if line:
        text += f"\nThe model's line that failed (last attempt): {line}"
    e.args = (text,) + e.args[1:]
    if inputs.small:  # say what was changed for these sizes
        e.args = (
            f"{e}\nThe example size of {', '.join(w for *_, w in inputs.small)} is "
            "0 or 1: the capture ran with backed_size_oblivious=True to keep "
            "it dynamic; an example size >= 2 may capture or explain more.",
        )


def _default_input_names(ep, inputs: UserInputs) -> list[str] | None:
    """Names of the user inputs when a transformers cache is given under another name
    than ``past_key_values`` (``cache`` since transformers 5.24): the ONNX inputs keep
    the names ``past_key_values_key_<i>``; None (placeholder names) otherwise."""
    from torch.export.graph_signature import InputKind

    from ..patches.cache_registration import cache_input_renames

    renames = cache_input_renames(inputs.arg_names, inputs.values)
    paths = inputs.paths
    user = [s.arg.name for s in ep.graph_signature.input_specs if s.kind == InputKind.USER_INPUT]
    if not renames or len(user) != len(paths):
        return None
    vals = {n.name: n.meta.get("val") for n in ep.graph_module.graph.nodes if n.op == "placeholder"}
    names = []
    for name, path in zip(user, paths):
        if not isinstance(vals.get(name), (torch.Tensor, torch.SymInt)):
            continue  # a constant input, no ONNX input
        prefix = renames.get(path[0])
        names.append(prefix + name[len(path[0]) :] if prefix and name.startswith(path[0]) else name)
    return names


def _has_meta(gm: torch.fx.GraphModule) -> bool:
    """Tells if ``gm`` can be interpreted as it is: every node carries its fake value and
    none calls a submodule or a method (a graph prepared by torchao's ``prepare_pt2e``
    calls its observers as modules: it is captured again)."""
    if any(n.op in ("call_module", "call_method") for n in gm.graph.nodes):
        return False
    return all(
        "val" in n.meta or n.op in ("output", "get_attr")
        for n in gm.graph.nodes
        if n.op in ("placeholder", "call_function")
    )


def _prepare_graph_module(gm, input_names, output_names) -> PreparedProgram:
    placeholders = [n for n in gm.graph.nodes if n.op == "placeholder"]
    names = list(input_names) if input_names else [p.name for p in placeholders]
    if len(names) != len(placeholders):
        raise InvalidArgumentError(f"{len(names)} input names for {len(placeholders)} graph inputs")
    plan = InputPlan(inputs={p.name: n for p, n in zip(placeholders, names)})
    out = next(n for n in gm.graph.nodes if n.op == "output").args[0]
    out = out if isinstance(out, (list, tuple)) else [out]
    # None outputs (gradients of inputs not requiring one) have no ONNX counterpart
    outputs = _output_spec(output_names, [o is not None for o in out])
    return PreparedProgram(gm, plan, DimNamer(), outputs)


def _prepare_exported_program(
    ep,
    inputs: UserInputs | None,
    input_names,
    output_names,
) -> PreparedProgram:
    from torch.export.graph_signature import InputKind

    placeholders = {n.name: n for n in ep.graph_module.graph.nodes if n.op == "placeholder"}
    plan, user = _input_plan(ep, placeholders)
    if input_names is not None:
        if len(input_names) != len(user):
            raise InvalidArgumentError(
                f"{len(input_names)} input names for {len(user)} tensor inputs {user}"
            )
        plan.inputs = dict(zip(user, input_names))
    namer = DimNamer()
    if inputs is not None and inputs.dim_names:
        nodes = [
            placeholders[s.arg.name]
            for s in ep.graph_signature.input_specs
            if s.kind == InputKind.USER_INPUT
        ]
        namer = DimNamer(inputs.symbol_names(nodes))
    check_outputs(ep)
    keep = _kept_outputs(ep, plan)
    return PreparedProgram(ep.graph_module, plan, namer, _output_spec(output_names, keep))


def check_outputs(ep: torch.export.ExportedProgram) -> None:
    """Raises :class:`UnsupportedOutputError` when an output of the model is a constant
    an ONNX model cannot return (a string...), naming its position among the outputs."""
    from torch.export.graph_signature import ConstantArgument, OutputKind

    user = [s for s in ep.graph_signature.output_specs if s.kind == OutputKind.USER_OUTPUT]
    for i, spec in enumerate(user):
        value = getattr(spec.arg, "value", None) if isinstance(spec.arg, ConstantArgument) else 0
        if value is not None and not isinstance(value, (bool, int, float)):
            raise UnsupportedOutputError(
                f"output {i} (of {len(user)}, flattened) of the model is the constant "
                f"{type(value).__name__} {value!r}: an ONNX model returns tensors only. "
                "Return tensors from forward (drop this value, or wrap the model in a "
                "module returning only its tensors).",
                position=i,
            )


def _input_plan(ep, placeholders: dict) -> tuple[InputPlan, list[str]]:
    """What every input of the program becomes; the names of the tensor user inputs."""
    from torch.export.graph_signature import InputKind

    plan, user = InputPlan(), []
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
    return plan, user


def _kept_outputs(ep, plan: InputPlan) -> list[OutputSlot | bool]:
    """For every output: True (a user output, named later), the slot of the new value
    of a mutated buffer or input, or False (dropped)."""
    from torch.export.graph_signature import OutputKind

    keep: list[OutputSlot | bool] = []
    for spec in ep.graph_signature.output_specs:
        if spec.kind == OutputKind.USER_OUTPUT:
            keep.append(True)
        elif spec.kind in (OutputKind.BUFFER_MUTATION, OutputKind.USER_INPUT_MUTATION):
            # the new value of a mutated buffer or input: an extra output (a KV cache)
            base = plan.inputs.get(spec.target, spec.target)
            logger.info(
                "the new value of %r (%s) is the output %r",
                spec.target,
                spec.kind.name,
                f"{base}_updated",
            )
            keep.append(OutputSlot(f"{base}_updated", mutation=True))
        else:
            keep.append(False)
            logger.warning(
                "output %r (%s) of %r is dropped", spec.arg.name, spec.kind.name, spec.target
            )
    return keep


def _output_spec(output_names, keep: list) -> OutputSpec:
    """The outputs, user outputs named ``output_names`` (default ``output_<i>``)."""
    n_user = sum(k is True for k in keep)
    if output_names is not None and len(output_names) != n_user:
        raise InvalidArgumentError(f"{len(output_names)} output names for {n_user} outputs")
    it = iter(output_names or [f"output_{i}" for i in range(n_user)])
    return OutputSpec(
        [
            OutputSlot(next(it))
            if k is True
            else k
            if isinstance(k, OutputSlot)
            else OutputSlot(None)
            for k in keep
        ]
    )


def mutations_last(builder: GraphBuilder, names: list[str], outputs: OutputSpec) -> None:
    """Moves the outputs of mutated buffers and inputs after the user's outputs."""
    kinds = outputs.mutations
    if not any(kinds) or len(kinds) != len(names):
        return
    moved = {n for n, k in zip(names, kinds) if k}
    builder.outputs = [o for o in builder.outputs if o not in moved] + [
        o for o in builder.outputs if o in moved
    ]
