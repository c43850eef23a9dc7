"""Checks of what the user gives :func:`to_onnx`, run before any work, and the
translation of torch.export's names of dimensions (``L['x'].size()[0]``) into the
user's (input ``x``, dimension 0, ``batch``).

.. code-block:: python

    check_target_opset(99)   # InvalidArgumentError: ... supported range 18 to 24 ...
"""

from __future__ import annotations

import difflib
import functools
import inspect
import re
import warnings
from typing import Any, Callable

import torch

from ..errors import DynamicShapesError, InvalidArgumentError, SignatureError, TrainingModeWarning
from ..stages import DynamicShapes

#: the lowest opset of the default domain the converters are written for
MIN_OPSET = 18


@functools.lru_cache(maxsize=1)
def onnx_max_opset() -> int:
    """The newest opset of the default domain the installed onnx knows."""
    import onnx.defs

    return onnx.defs.onnx_opset_version()


@functools.lru_cache(maxsize=1)
def onnxruntime_max_opset() -> int | None:
    """The newest opset of the default domain the installed onnxruntime loads, found by
    loading a one-node model at decreasing opsets (no table of versions to maintain);
    None when onnxruntime is not installed."""
    try:
        import onnxruntime
    except ImportError:
        return None
    import onnx
    import onnx.helper as oh

    for opset in range(onnx_max_opset(), MIN_OPSET - 1, -1):
        x = oh.make_tensor_value_info("x", onnx.TensorProto.FLOAT, [1])
        y = oh.make_tensor_value_info("y", onnx.TensorProto.FLOAT, [1])
        graph = oh.make_graph([oh.make_node("Identity", ["x"], ["y"])], "probe", [x], [y])
        model = oh.make_model(
            graph, opset_imports=[oh.make_opsetid("", opset)], ir_version=min(onnx.IR_VERSION, 10)
        )
        try:
            onnxruntime.InferenceSession(
                model.SerializeToString(), providers=["CPUExecutionProvider"]
            )
        except Exception:  # noqa: BLE001 - any refusal means: not supported
            continue
        return opset
    return None


def check_target_opset(target_opset: int | dict[str, int] | None) -> None:
    """Raises :class:`InvalidArgumentError` when the opset of the default domain is out
    of the range the converters, onnx and onnxruntime support, with that range."""
    opset = target_opset.get("", None) if isinstance(target_opset, dict) else target_opset
    if opset is None:
        return
    if not isinstance(opset, int) or isinstance(opset, bool):
        raise InvalidArgumentError(
            f"target_opset must be an int or a dict {{domain: int}}, not {opset!r}"
        )
    high, ort = onnx_max_opset(), onnxruntime_max_opset()
    if MIN_OPSET <= opset <= high:
        return
    import onnx

    runs = f", onnxruntime runs up to {ort}" if ort is not None else ""
    best = min(high, ort) if ort is not None else high
    raise InvalidArgumentError(
        f"target_opset={opset} is not supported: the converters need at least "
        f"{MIN_OPSET}, the installed onnx {onnx.__version__} knows opsets up to "
        f"{high}{runs}. Use a value between {MIN_OPSET} and {best}."
    )


# dynamic_shapes against the inputs


def _input_label(path: tuple) -> str:
    return "".join(f"[{p!r}]" if i else str(p) for i, p in enumerate(path))


def _check_tensor_axes(spec, tensor: torch.Tensor, path: tuple) -> None:
    rank = tensor.dim()
    if isinstance(spec, dict):
        bad = [a for a in spec if not isinstance(a, int) or not 0 <= a < rank]
        if bad:
            # torch.export ignores a negative axis: the dimension would stay static
            hint = (
                f" (write {bad[0] + rank} for {bad[0]}: torch.export ignores negative axes)"
                if isinstance(bad[0], int) and -rank <= bad[0] < 0
                else ""
            )
            raise InvalidArgumentError(
                f"dynamic_shapes of input {_input_label(path)!r} names axis {bad[0]} but "
                f"that input has {rank} dimension(s) (shape {tuple(tensor.shape)}); "
                f"axes go from 0 to {rank - 1}{hint}."
            )
    elif isinstance(spec, (list, tuple)) and len(spec) != rank:
        raise InvalidArgumentError(
            f"dynamic_shapes of input {_input_label(path)!r} has {len(spec)} entries but "
            f"that input has {rank} dimension(s) (shape {tuple(tensor.shape)}); give one "
            f"entry per dimension or a dict {{axis: name}}."
        )


def _children(value) -> list | None:
    """The children of a registered pytree class (a transformers cache...), else None."""
    if type(value) not in torch.utils._pytree.SUPPORTED_NODES:
        return None
    return torch.utils._pytree.tree_flatten(value)[0]


def _refuse_string(spec: str, value, path: tuple) -> None:
    label = _input_label(path)
    if isinstance(value, torch.Tensor):
        what = (
            f"input {label!r} is a {value.dim()}-D tensor (shape {tuple(value.shape)}): "
            f"write {{0: {spec!r}}} to name its first dimension {spec!r}, or a tuple of "
            "one entry per dimension"
        )
    else:
        what = (
            f"input {label!r} is a {type(value).__name__}: give one spec per tensor it "
            "holds (a dict, list or tuple like the input)"
        )
    raise DynamicShapesError(
        f"dynamic_shapes of input {label!r} is the string {spec!r}, but a string names one "
        f"dimension, not an input; {what}.",
        input_name=label,
    )


def _check_spec(spec, value, path: tuple, dims: dict | None = None) -> None:
    if spec is None:
        return
    if isinstance(spec, str):
        _refuse_string(spec, value, path)
    if isinstance(value, torch.Tensor):
        # a tuple of specs is the grouped spec of *args, not this tensor's
        grouped = isinstance(spec, (list, tuple)) and any(
            isinstance(s, (dict, list, tuple)) for s in spec
        )
        if isinstance(spec, (dict, list, tuple)) and not grouped:
            _check_tensor_axes(spec, value, path)
            _check_dimensions(spec, value, path, {} if dims is None else dims)
        return
    if isinstance(value, dict) and isinstance(spec, dict):
        for key, sub in spec.items():
            if key in value:
                _check_spec(sub, value[key], path + (key,), dims)
        return
    if isinstance(value, (list, tuple)) and isinstance(spec, (list, tuple)):
        for i, (sub, v) in enumerate(zip(spec, value)):
            _check_spec(sub, v, path + (i,), dims)
        return
    leaves = _children(value)
    if leaves is not None and isinstance(spec, (list, tuple)) and len(leaves) == len(spec):
        for i, (sub, v) in enumerate(zip(spec, leaves)):
            _check_spec(sub, v, path + (i,), dims)


def _dim_label(d) -> str | None:
    """The name the user gave a dimension (a string or a ``Dim``, not a derived one)."""
    if isinstance(d, str):
        return d
    if isinstance(d, torch.export.Dim) and not hasattr(d, "root"):
        return getattr(d, "__name__", None)
    return None


def _bound(value) -> int | None:
    """``min`` or ``max`` of a Dim as an int (None when unbounded)."""
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _check_dimensions(spec, tensor: torch.Tensor, path: tuple, dims: dict) -> None:
    """Every dimension's example size within its Dim's ``min``/``max``; one name, one
    example size (``dims``: ``{name: (input, axis, size)}`` over all inputs)."""
    label = _input_label(path)
    items = spec.items() if isinstance(spec, dict) else enumerate(spec)
    for axis, d in items:
        size = tensor.shape[axis]
        if d is None or isinstance(d, int) or not isinstance(size, int):
            continue
        name = _dim_label(d)
        low, high = _bound(getattr(d, "min", None)), _bound(getattr(d, "max", None))
        if not hasattr(d, "root") and (
            (low is not None and size < low) or (high is not None and size > high)
        ):
            rng = f"[{low if low is not None else 0}, {high if high is not None else 'inf'}]"
            raise DynamicShapesError(
                f"dimension {axis}{f' ({name!r})' if name else ''} of input {label!r} has "
                f"the example size {size}, outside the range {rng} its Dim allows: give "
                f"an example of size within {rng}, or widen min/max.",
                input_name=label,
                axis=axis,
            )
        if name is None:
            continue
        seen = dims.setdefault(name, (label, axis, size))
        if seen[2] != size:
            raise DynamicShapesError(
                f"the dimension name {name!r} is given to dimension {seen[1]} of input "
                f"{seen[0]!r} (example size {seen[2]}) and to dimension {axis} of input "
                f"{label!r} (example size {size}): one name is one size. Use two names "
                "if these dimensions may differ, or examples whose sizes agree.",
                input_name=label,
                axis=axis,
            )


def check_dynamic_shapes_axes(
    dynamic_shapes: DynamicShapes, arg_names: list[str], values: list
) -> None:
    """Raises :class:`DynamicShapesError` (an :class:`InvalidArgumentError`) when
    ``dynamic_shapes`` declares an axis an input does not have (``{"x": {5: "b"}}`` on a
    2-D ``x``), gives a string where a spec is expected (``{"x": "batch"}``), a ``Dim``
    whose ``min``/``max`` exclude the example size, or one dimension name to dimensions
    of different example sizes; the message names the input and the dimension."""
    if dynamic_shapes is None:
        return
    dims: dict = {}
    if isinstance(dynamic_shapes, dict):
        by_name = dict(zip(arg_names, values))
        for name, spec in dynamic_shapes.items():
            if name in by_name:
                _check_spec(spec, by_name[name], (name,), dims)
    elif isinstance(dynamic_shapes, (list, tuple)) and len(dynamic_shapes) == len(values):
        names = (
            arg_names if len(arg_names) == len(values) else [f"arg{i}" for i in range(len(values))]
        )
        for name, spec, value in zip(names, dynamic_shapes, values):
            _check_spec(spec, value, (name,), dims)


# the example inputs against forward's signature


def check_signature(model: Callable[..., Any], args: tuple, kwargs: dict) -> None:
    """Raises :class:`SignatureError` when ``args`` and ``kwargs`` do not bind to the
    parameters of ``model.forward``: a missing argument (``args=None``), an unknown
    keyword, too many positional values; the message names them and the parameters."""
    if not isinstance(model, torch.nn.Module):
        return
    try:
        signature = inspect.signature(model.forward)
    except (TypeError, ValueError):
        return
    try:
        signature.bind(*args, **kwargs)
    except TypeError as e:
        params = signature.parameters
        where = f"{type(model).__name__}.forward{signature}"
        kinds = {p.kind for p in params.values()}
        unknown = [
            k
            for k in kwargs
            if k not in params
            or params[k].kind
            in (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.VAR_POSITIONAL)
        ]
        if unknown and inspect.Parameter.VAR_KEYWORD not in kinds:
            close = difflib.get_close_matches(unknown[0], list(params), n=1)
            hint = f" (did you mean {close[0]!r}?)" if close else ""
            raise SignatureError(
                f"keyword {unknown[0]!r} given in kwargs is not a parameter of {where}"
                f"{hint}: pass only the parameters {list(params)}."
            ) from None
        missing = [
            p.name
            for i, p in enumerate(params.values())
            if p.default is inspect.Parameter.empty
            and p.kind not in (inspect.Parameter.VAR_POSITIONAL, inspect.Parameter.VAR_KEYWORD)
            and p.name not in kwargs
            and not (p.kind != inspect.Parameter.KEYWORD_ONLY and i < len(args))
        ]
        if missing:
            given = "args=None" if not args else f"{len(args)} positional value(s)"
            raise SignatureError(
                f"{where} requires {missing} but the call gives {given} and keywords "
                f"{sorted(kwargs)}: pass the example inputs as args=(...) (a tuple, in the "
                "order of the parameters) or kwargs={name: value}."
            ) from None
        raise SignatureError(
            f"the example inputs do not match {where}: {e}; args={len(args)} positional "
            f"value(s), kwargs={sorted(kwargs)}."
        ) from None


def warn_training_mode(model: torch.nn.Module) -> None:
    """Warns (:class:`TrainingModeWarning`) when ``model`` is in training mode with
    modules whose behaviour depends on it (dropout, batch normalization)."""
    if not isinstance(model, torch.nn.Module) or not model.training:
        return
    from torch.nn.modules.batchnorm import _BatchNorm
    from torch.nn.modules.dropout import _DropoutNd

    found = [
        (name or "<model>", type(m).__name__)
        for name, m in model.named_modules()
        if m.training
        and (
            (isinstance(m, _DropoutNd) and m.p > 0)
            or (isinstance(m, _BatchNorm) and m.track_running_stats)
        )
    ]
    if found:
        names = ", ".join(f"{n!r} ({t})" for n, t in found[:5])
        more = f" and {len(found) - 5} more" if len(found) > 5 else ""
        warnings.warn(
            f"{type(model).__name__} is exported in training mode: {names}{more} behave as "
            "in training in the ONNX model (dropout zeroes random values at every run, "
            "batch normalization uses the statistics of the batch and returns new running "
            "statistics). Call model.eval() before the export for inference.",
            TrainingModeWarning,
            stacklevel=2,
        )


# torch's names of dimensions -> the user's

_SOURCE = re.compile(r"L((?:\[[^\[\]]+\]|\.\w+)+)\.size\(\)\[(\d+)\]")
_STEP = re.compile(r"\[([^\[\]]+)\]|\.(\w+)")


def _source_path(accessors: str) -> tuple:
    """``['kwargs']['x'][0]`` -> ``('x', 0)``: the path of an input as the user wrote it
    (``args`` and ``kwargs`` wrappers of torch.export removed)."""
    steps: list[Any] = []
    for key, attr in _STEP.findall(accessors):
        if attr:
            steps.append(attr)
            continue
        try:
            steps.append(int(key))
        except ValueError:
            steps.append(key.strip("'\""))
    if steps and steps[0] in ("args", "kwargs"):
        steps = steps[1:]
    return tuple(steps)


def describe_dimension_sources(
    text: str, dim_names: dict[tuple, str], arg_names: list[str] | None = None
) -> str:
    """Replaces torch.export's ``L['x'].size()[0]`` in ``text`` by
    ``dimension 0 ('batch') of input 'x'``, with the user's dimension name when
    ``dim_names`` (``{(path, axis): name}``) has it."""
    arg_names = arg_names or []

    def replace(match):
        path, axis = _source_path(match.group(1)), int(match.group(2))
        if path and isinstance(path[0], int) and path[0] < len(arg_names):
            path = (arg_names[path[0]],) + path[1:]
        name = dim_names.get((path, axis))
        label = _input_label(path) if path else match.group(0)
        named = f" ({name!r})" if name else ""
        return f"dimension {axis}{named} of input {label!r}"

    return _SOURCE.sub(replace, text)
