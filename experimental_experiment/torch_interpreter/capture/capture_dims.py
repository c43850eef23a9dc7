"""Capture of dynamic dimensions: which axes the user declared dynamic, how the
capture keeps the example sizes 0 and 1 dynamic, and the check that it did.

.. code-block:: python

    small = zero_one_axes(model, args, kwargs, dynamic_shapes)
    with size_oblivious_capture(bool(small)):
        ep = torch.export.export(model, args, kwargs, dynamic_shapes=...)
    check_zero_one(ep, leaves, small)
"""

from __future__ import annotations

import contextlib
from typing import Any, Callable

import torch

from ..errors import InvalidArgumentError
from ..stages import DynamicShapes
from .dynamic_shapes import PathKey, _is_tensor_spec, grouped_dynamic_shapes, leaf_paths


def declared_dynamic_axes(
    model: Callable[..., Any], args: tuple, kwargs: dict | None, dynamic_shapes: DynamicShapes
) -> list[tuple[tuple, Any, dict]]:
    """``[(path, leaf, {axis: spec})]`` for every leaf of the inputs, with the axes the
    user declared dynamic (strings, Dim, Dim.DYNAMIC, Dim.AUTO)."""
    kwargs = kwargs or {}
    leaves = leaf_paths(model, args, kwargs)
    if dynamic_shapes is None:
        return dynamic_axes_of(leaves, None)
    # keyed by argument name, *args and **kwargs grouped as torch.export wants them
    return dynamic_axes_of(leaves, grouped_dynamic_shapes(dynamic_shapes, model, args, kwargs))


def dynamic_axes_of(leaves: list, grouped: dict | None) -> list:
    """:func:`declared_dynamic_axes` from the leaves (:func:`leaf_paths`) and the grouped
    spec (:func:`grouped_dynamic_shapes`, None when no dynamic_shapes is given)."""
    if grouped is None:
        return [(p, leaf, {}) for p, leaf in leaves]
    out = []
    for path, leaf in leaves:
        spec = grouped
        for key in path:
            spec = _child(spec, key)
            if spec is None or _is_tensor_spec(spec):
                break
        axes = {}
        if _is_tensor_spec(spec):
            items = spec.items() if isinstance(spec, dict) else enumerate(spec)
            axes = {a: d for a, d in items if _is_dynamic(d)}
        out.append((path, leaf, axes))
    return out


def _child(spec, key):
    if isinstance(key, PathKey):  # (pytree key, position among the siblings)
        key = key[0] if isinstance(spec, dict) else key[1]
    try:
        if isinstance(spec, dict):
            return spec.get(key)
        if isinstance(spec, (list, tuple)) and isinstance(key, int):
            return spec[key] if key < len(spec) else None
    except (TypeError, KeyError):
        return None
    return None


def _is_dynamic(d) -> bool:
    if d is None or isinstance(d, int):
        return False
    return "STATIC" not in str(d)


def _is_auto(d) -> bool:
    return "AUTO" in str(d)


def zero_one_axes(
    model: Callable[..., Any],
    args: tuple,
    kwargs: dict | None,
    dynamic_shapes: DynamicShapes,
) -> list[tuple[torch.Tensor, int, str]]:
    """``[(tensor, axis, description)]`` for the dimensions declared dynamic whose example
    size is 0 or 1 (``Dim.AUTO`` excepted): torch.export specializes those sizes unless
    the capture treats them as any size (``backed_size_oblivious``)."""
    return zero_one_of(declared_dynamic_axes(model, args, kwargs, dynamic_shapes))


def zero_one_of(declared: list) -> list[tuple[torch.Tensor, int, str]]:
    """:func:`zero_one_axes` from the result of :func:`declared_dynamic_axes`."""
    bad = []
    for path, leaf, axes in declared:
        if not isinstance(leaf, torch.Tensor):
            continue
        for axis, d in axes.items():
            if axis < leaf.dim() and leaf.shape[axis] in (0, 1) and not _is_auto(d):
                bad.append(
                    (
                        leaf,
                        axis,
                        f"{'.'.join(map(str, path))}.shape[{axis}]={leaf.shape[axis]} ({d})",
                    )
                )
    return bad


def size_oblivious_capture(enabled: bool) -> contextlib.AbstractContextManager[Any]:
    """Context in which torch.export does not specialize the sizes 0 and 1 of backed
    dynamic dimensions (the example size is one value among others)."""
    if not enabled:
        return contextlib.nullcontext()
    return torch.fx.experimental._config.patch(backed_size_oblivious=True)


def check_zero_one(
    ep: torch.export.ExportedProgram, leaves: list, bad: list[tuple[torch.Tensor, int, str]]
) -> None:
    """Raises InvalidArgumentError when a dimension of ``bad`` was specialized by the
    capture although it was declared dynamic (``leaves``: the flattened inputs)."""
    tensors = [leaf for leaf in leaves if isinstance(leaf, torch.Tensor)]
    user = set(ep.graph_signature.user_inputs)
    vals = [
        n.meta.get("val")
        for n in ep.graph.nodes
        if n.op == "placeholder" and n.name in user and isinstance(n.meta.get("val"), torch.Tensor)
    ]
    if len(vals) != len(tensors):
        return  # inputs not matched one to one: nothing certain to say
    index = {id(t): i for i, t in enumerate(tensors)}
    lost = [what for t, axis, what in bad if isinstance(vals[index[id(t)]].shape[axis], int)]
    if lost:
        raise InvalidArgumentError(
            "dimensions declared dynamic have an example size of 0 or 1 and torch.export "
            f"specialized them: {', '.join(lost)}. torch.export assumes a dynamic dimension "
            "is >= 2 (broadcasting makes size 1 special); the capture already ran with "
            "backed_size_oblivious=True and the model still fixes that size. Fix: export "
            "with example inputs of size >= 2 on every dynamic dimension; the ONNX model "
            "still runs on sizes 0 and 1."
        )


__all__ = [
    "check_zero_one",
    "declared_dynamic_axes",
    "size_oblivious_capture",
    "dynamic_axes_of",
    "zero_one_axes",
    "zero_one_of",
]
