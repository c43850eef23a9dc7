"""Checks of what the user gives :func:`to_onnx`, run before any work, and the
translation of torch.export's names of dimensions (``L['x'].size()[0]``) into the
user's (input ``x``, dimension 0, ``batch``).

.. code-block:: python

    check_target_opset(99)   # InvalidArgumentError: ... supported range 18 to 24 ...
"""

from __future__ import annotations

import functools
import re
from typing import Any

import torch

from .errors import InvalidArgumentError

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
        model = oh.make_model(graph, opset_imports=[oh.make_opsetid("", opset)],
                              ir_version=min(onnx.IR_VERSION, 10))
        try:
            onnxruntime.InferenceSession(model.SerializeToString(),
                                         providers=["CPUExecutionProvider"])
        except Exception:  # noqa: BLE001 - any refusal means: not supported
            continue
        return opset
    return None


def check_target_opset(target_opset) -> None:
    """Raises :class:`InvalidArgumentError` when the opset of the default domain is out
    of the range the converters, onnx and onnxruntime support, with that range."""
    opset = target_opset.get("", None) if isinstance(target_opset, dict) else target_opset
    if opset is None:
        return
    if not isinstance(opset, int) or isinstance(opset, bool):
        raise InvalidArgumentError(
            f"target_opset must be an int or a dict {{domain: int}}, not {opset!r}")
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
            hint = (f" (write {bad[0] + rank} for {bad[0]}: torch.export ignores negative "
                    "axes)" if isinstance(bad[0], int) and -rank <= bad[0] < 0 else "")
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


def _check_spec(spec, value, path: tuple) -> None:
    if spec is None:
        return
    if isinstance(value, torch.Tensor):
        # a tuple of specs is the grouped spec of *args, not this tensor's
        grouped = isinstance(spec, (list, tuple)) and any(
            isinstance(s, (dict, list, tuple)) for s in spec)
        if isinstance(spec, (dict, list, tuple)) and not grouped:
            _check_tensor_axes(spec, value, path)
        return
    if isinstance(value, dict) and isinstance(spec, dict):
        for key, sub in spec.items():
            if key in value:
                _check_spec(sub, value[key], path + (key,))
        return
    if isinstance(value, (list, tuple)) and isinstance(spec, (list, tuple)):
        for i, (sub, v) in enumerate(zip(spec, value)):
            _check_spec(sub, v, path + (i,))
        return
    leaves = _children(value)
    if leaves is not None and isinstance(spec, (list, tuple)) and len(leaves) == len(spec):
        for i, (sub, v) in enumerate(zip(spec, leaves)):
            _check_spec(sub, v, path + (i,))


def check_dynamic_shapes_axes(dynamic_shapes, arg_names: list[str], values: list) -> None:
    """Raises :class:`InvalidArgumentError` when ``dynamic_shapes`` declares an axis an
    input does not have (``{"x": {5: "b"}}`` on a 2-D ``x``), naming the input."""
    if dynamic_shapes is None:
        return
    if isinstance(dynamic_shapes, dict):
        by_name = dict(zip(arg_names, values))
        for name, spec in dynamic_shapes.items():
            if name in by_name:
                _check_spec(spec, by_name[name], (name,))
    elif isinstance(dynamic_shapes, (list, tuple)) and len(dynamic_shapes) == len(values):
        names = arg_names if len(arg_names) == len(values) else [
            f"arg{i}" for i in range(len(values))]
        for name, spec, value in zip(names, dynamic_shapes, values):
            _check_spec(spec, value, (name,))


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


def describe_dimension_sources(text: str, dim_names: dict[tuple, str],
                               arg_names: list[str] | None = None) -> str:
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
