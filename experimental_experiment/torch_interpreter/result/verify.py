"""Checks an exported model keeps its dynamic dimensions dynamic: runs it on other sizes.

.. code-block:: python

    from experimental_experiment.torch_interpreter import to_onnx
    from experimental_experiment.torch_interpreter.result.verify import verify_dynamic_shapes

    ds = ({0: "batch"},)
    onx = to_onnx(model, (x,), dynamic_shapes=ds)
    report = verify_dynamic_shapes(model, onx, (x,), dynamic_shapes=ds)
    print(report)
    assert report.ok
"""

from __future__ import annotations

import copy
import math
import re
from dataclasses import dataclass, field
from typing import Any, Callable

import numpy as np
import onnx
import torch

from ...runtime import flatten_tensors, run_onnx
from ..capture.capture_dims import declared_dynamic_axes
from ..capture.dynamic_shapes import leaf_paths
from ..errors import InvalidArgumentError
from ..stages import DynamicShapes


@dataclass
class Trial:
    """One run on new sizes."""

    name: str  # "+1", "+3", "x2", "sizes[0]"
    dims: dict[str, int]  # dim_param -> size used
    shapes: list[tuple]  # shapes of the inputs
    max_abs_err: float | None = None
    passed: bool = False
    error: str | None = None  # why the run failed (onnxruntime or eager)
    # why the sizes are outside the valid ranges the export reported (a difference
    # there is what the export warned about, not a silent error)
    outside: str | None = None


@dataclass
class VerifyReport:
    """What :func:`verify_dynamic_shapes` found; ``str(report)`` is readable.

    :param static_but_declared_dynamic: the ONNX inputs or outputs with a static
        dimension where the user declared a dynamic one
    :param trials: one ``Trial`` for every set of sizes tried
    :param baked_in: the dimensions whose change breaks the ONNX model

    .. code-block:: python

        report = verify_dynamic_shapes(model, onx, (x,), dynamic_shapes=({0: "batch"},))
        if not report.ok:
            print(report)
    """

    static_but_declared_dynamic: list[str] = field(default_factory=list)
    trials: list[Trial] = field(default_factory=list)
    baked_in: list[str] = field(default_factory=list)  # dims whose change breaks ONNX

    @property
    def ok(self) -> bool:
        return (
            not self.static_but_declared_dynamic
            and all(
                t.passed or t.outside or t.error and t.error.startswith("eager")
                for t in self.trials
            )
            and any(t.passed for t in self.trials)
        )

    def __str__(self) -> str:
        lines = [f"verify_dynamic_shapes: {'OK' if self.ok else 'FAILED'}"]
        for text in self.static_but_declared_dynamic:
            lines.append(f"  static in ONNX but declared dynamic: {text}")
        for t in self.trials:
            status = "pass" if t.passed else ("outside" if t.outside else "FAIL")
            err = "" if t.max_abs_err is None else f" max_abs_err={t.max_abs_err:.3g}"
            lines.append(f"  trial {t.name:>8} {status}{err} dims={t.dims} shapes={t.shapes}")
            if t.error:
                lines.append(f"           {t.error}")
            if t.outside:
                lines.append(f"           outside the valid range the export reported: {t.outside}")
        if self.baked_in:
            lines.append(f"  dims which seem baked in: {', '.join(self.baked_in)}")
        return "\n".join(lines)


def verify_dynamic_shapes(
    model: Callable[..., Any],
    onx: onnx.ModelProto,
    args: tuple,
    kwargs: dict | None = None,
    *,
    dynamic_shapes: DynamicShapes,
    sizes: list[dict[str, int]] | None = None,
    atol: float = 1e-4,
    rtol: float = 1e-3,
) -> VerifyReport:
    """Runs ``onx`` (onnxruntime) and ``model`` (eager) on inputs whose dynamic dimensions
    change, and compares them.

    :param model: the exported module
    :param onx: the ONNX model :func:`to_onnx` returned for ``(args, kwargs)``
    :param args: example positional inputs used to export
    :param kwargs: example keyword inputs
    :param dynamic_shapes: what was given to :func:`to_onnx`
    :param sizes: ``[{dim_param: size}]`` sizes to try instead of the defaults
        (every dimension +1, +3, then x2, then, for every dimension whose valid range
        the export wrote in ``metadata_props['dynamic_dimension_ranges']``, its bounds
        and the sizes just outside them)
    :param atol: absolute tolerance
    :param rtol: relative tolerance
    :return: a :class:`VerifyReport`, ``str(report)`` tells the shapes tried, the max
        absolute error, which dims seem baked in and the ONNX inputs or outputs static
        where the user declared a dynamic dimension

    .. code-block:: python

        import torch
        from experimental_experiment.torch_interpreter import to_onnx
        from experimental_experiment.torch_interpreter.result.verify import verify_dynamic_shapes

        model = torch.nn.Linear(4, 2)
        x = torch.randn(3, 4)
        ds = ({0: torch.export.Dim("batch")},)
        onx = to_onnx(model, (x,), dynamic_shapes=ds)
        report = verify_dynamic_shapes(model, onx, (x,), dynamic_shapes=ds)
        print(report)
        assert report.ok
    """
    kwargs = kwargs or {}
    report = VerifyReport()
    declared = declared_dynamic_axes(model, args, kwargs, dynamic_shapes)
    tensors = [(p, leaf, axes) for p, leaf, axes in declared if isinstance(leaf, torch.Tensor)]
    inputs = list(onx.graph.input)
    if len(inputs) != len(tensors):
        raise InvalidArgumentError(
            f"the ONNX model has {len(inputs)} inputs, the arguments {len(tensors)} tensors"
        )
    base, static = _base_sizes(tensors, inputs, report)
    _check_outputs(onx, report)
    trials = (
        [(f"sizes[{i}]", s) for i, s in enumerate(sizes)]
        if sizes
        else [
            ("+1", {k: v + 1 for k, v in base.items()}),
            ("+3", {k: v + 3 for k, v in base.items()}),
            ("x2", {k: v * 2 for k, v in base.items()}),
        ]
    )
    ranges = valid_ranges(onx)
    if not sizes:
        trials += _boundary_trials(ranges, base)
    for name, dims in trials:
        trial = _run_trial(
            model, onx, args, kwargs, tensors, inputs, name, {**base, **dims}, static, atol, rtol
        )
        trial.outside = _outside(ranges, trial.dims)
        report.trials.append(trial)
    failed = [
        t
        for t in report.trials
        if not t.passed and not t.outside and "eager" != (t.error or "")[:5]
    ]
    report.baked_in = sorted({k for t in failed for k, v in t.dims.items() if base.get(k) != v})
    return report


def valid_ranges(onx: onnx.ModelProto) -> dict[str, tuple[int | None, int | None, int]]:
    """``{dim_param: (min, max, step)}`` of the dimensions whose valid sizes the export wrote
    in the model's metadata (see :mod:`guard_ranges`)."""
    import json

    from ..capture.guard_ranges import METADATA_KEY

    text = next((p.value for p in onx.metadata_props if p.key == METADATA_KEY), None)
    if not text:
        return {}
    names = {vi.name: vi for vi in onx.graph.input}
    ranges = {}
    for dimension, entry in json.loads(text).items():
        m = re.fullmatch(r"(.+)\.shape\[(\d+)\]", dimension)
        vi = names.get(m.group(1)) if m else None
        if vi is None:
            continue
        dims = vi.type.tensor_type.shape.dim
        axis = int(m.group(2))
        if axis < len(dims) and dims[axis].dim_param:
            ranges[dims[axis].dim_param] = (
                entry.get("min"),
                entry.get("max"),
                entry.get("step") or 1,
            )
    return ranges


def _boundary_trials(ranges: dict, base: dict) -> list[tuple[str, dict[str, int]]]:
    """Each bound of a valid range (must pass) and the size just outside it."""
    trials = []
    for name, (low, high, _step) in sorted(ranges.items()):
        if name not in base:
            continue
        for label, size in (
            (f"{name}=min", low),
            (f"{name}=min-1", None if low is None else low - 1),
            (f"{name}=max", high),
            (f"{name}=max+1", None if high is None else high + 1),
        ):
            if size is not None and size >= 2 and size != base[name]:
                trials.append((label, {name: size}))
    return trials


def _outside(ranges: dict, dims: dict[str, int]) -> str | None:
    out = [
        f"{k}={v} not in [{low if low is not None else 0}, "
        f"{high if high is not None else 'inf'}]"
        + (f" with {k} % {step} == {low % step}" if step > 1 else "")
        for k, v in dims.items()
        if k in ranges
        for low, high, step in [ranges[k]]
        if (low is not None and v < low)
        or (high is not None and v > high)
        or (step > 1 and low is not None and (v - low) % step)
    ]
    return ", ".join(out) or None


def _base_sizes(tensors, inputs, report) -> tuple[dict[str, int], dict]:
    """The example size of every dimension name; ``{(input index, axis): name}`` for the
    dimensions declared dynamic but static in the ONNX model (added to ``report``)."""
    base: dict[str, int] = {}
    static = {}
    for i, ((_path, leaf, axes), vi) in enumerate(zip(tensors, inputs)):
        dims = vi.type.tensor_type.shape.dim
        for axis, spec in axes.items():
            if axis < len(dims) and not dims[axis].dim_param:
                report.static_but_declared_dynamic.append(
                    f"input {vi.name!r} axis {axis} (fixed to {dims[axis].dim_value})"
                )
                key = _spec_name(spec) or f"{vi.name}[{axis}]"
                static[i, axis] = key
                base.setdefault(key, int(leaf.shape[axis]))
        for d, size in zip(dims, leaf.shape):
            if d.dim_param and d.dim_param.isidentifier():
                base.setdefault(d.dim_param, int(size))
    return base, static


def _check_outputs(onx, report):
    """Outputs with only static dims while some input is dynamic are suspicious."""
    dynamic_inputs = any(d.dim_param for i in onx.graph.input for d in i.type.tensor_type.shape.dim)
    if not dynamic_inputs:
        return
    for o in onx.graph.output:
        dims = o.type.tensor_type.shape.dim
        if len(dims) > 1 and all(d.HasField("dim_value") for d in dims):
            report.static_but_declared_dynamic.append(
                f"output {o.name!r} has a static shape {[d.dim_value for d in dims]} "
                "while some inputs are dynamic (check it does not depend on them)"
            )


def _spec_name(spec) -> str | None:
    if isinstance(spec, str):
        return spec
    name = getattr(spec, "__name__", None)
    return name if isinstance(name, str) else None


def _new_shape(vi, leaf, dims: dict[str, int], static: dict) -> tuple:
    shape = []
    for axis, (d, size) in enumerate(zip(vi.type.tensor_type.shape.dim, leaf.shape)):
        if static.get(axis) is not None:
            shape.append(dims[static[axis]])
        elif d.dim_param:
            value = _eval_dim(d.dim_param, dims)
            shape.append(int(size) if value is None else value)
        else:
            shape.append(int(size))
    return tuple(shape)


def _eval_dim(expr: str, dims: dict[str, int]) -> int | None:
    if expr in dims:
        return dims[expr]
    if not re.fullmatch(r"[\w\s+\-*/()%,]+", expr):
        return None
    try:
        value = eval(
            expr,
            {
                "__builtins__": {},
                "Max": max,
                "Min": min,  # noqa: S307
                "floor": math.floor,
                "ceiling": math.ceil,
            },
            dict(dims),
        )
    except Exception:
        return None
    return int(value)


def _like(leaf: torch.Tensor, shape: tuple, gen: torch.Generator) -> torch.Tensor:
    if leaf.dtype == torch.bool:
        return torch.rand(shape, generator=gen) > 0.5
    if leaf.dtype.is_floating_point:
        return torch.randn(shape, generator=gen).to(leaf.dtype)
    if leaf.numel() == 0:
        return torch.zeros(shape, dtype=leaf.dtype)
    lo, hi = int(leaf.min()), int(leaf.max())
    return torch.randint(lo, hi + 1, shape, generator=gen).to(leaf.dtype)


def _run_trial(model, onx, args, kwargs, tensors, inputs, name, dims, static, atol, rtol) -> Trial:
    gen = torch.Generator().manual_seed(len(name))
    new = {}
    for i, ((path, leaf, _), vi) in enumerate(zip(tensors, inputs)):
        fixed = {a: k for (j, a), k in static.items() if j == i}
        new[path] = _like(leaf, _new_shape(vi, leaf, dims, fixed), gen)
    new_args, new_kwargs = _replace_leaves(model, args, kwargs, new)
    shapes = [tuple(t.shape) for t in new.values()]
    trial = Trial(name, {k: v for k, v in dims.items()}, shapes)
    try:
        with torch.no_grad():
            expected = flatten_tensors(copy.deepcopy(model)(*new_args, **new_kwargs))
    except Exception as e:
        trial.error = (
            f"eager failed (sizes not valid for the model): {type(e).__name__}: "
            f"{str(e).splitlines()[0] if str(e) else ''}"
        )
        return trial
    try:
        got = run_onnx(onx, list(new.values()))
    except Exception as e:
        trial.error = f"onnxruntime failed: {type(e).__name__}: {_first_line(e)}"
        return trial
    n = min(len(expected), len(got))
    err = 0.0
    for e, g in zip(expected[:n], got[:n]):
        e = e.detach().float().numpy() if e.dtype != torch.bool else e.numpy()
        if e.shape != np.asarray(g).shape:
            trial.error = f"shape mismatch: onnx {np.asarray(g).shape}, eager {e.shape}"
            return trial
        diff = np.abs(e.astype(np.float64) - np.asarray(g).astype(np.float64))
        err = max(err, float(diff.max()) if diff.size else 0.0)
        if diff.size and not np.all(diff <= atol + rtol * np.abs(e.astype(np.float64))):
            trial.error = "values differ"
    trial.max_abs_err = err
    trial.passed = trial.error is None and len(expected) <= len(got)
    return trial


def _first_line(e: Exception) -> str:
    text = str(e).strip()
    return text.splitlines()[0][:300] if text else ""


def _replace_leaves(model, args, kwargs, new: dict) -> tuple[tuple, dict]:
    """args and kwargs with the tensors replaced by ``new[path]``."""
    paths = leaf_paths(model, args, kwargs)
    flat_args, spec = torch.utils._pytree.tree_flatten((args, kwargs))
    leaves = [new.get(p, leaf) for p, leaf in paths]
    if len(leaves) != len(flat_args):
        raise InvalidArgumentError("cannot rebuild the inputs from their leaves")
    new_args, new_kwargs = torch.utils._pytree.tree_unflatten(leaves, spec)
    return tuple(new_args), dict(new_kwargs)


__all__ = ["Trial", "VerifyReport", "valid_ranges", "verify_dynamic_shapes"]
