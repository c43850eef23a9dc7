"""Checks an exported model keeps its dynamic dimensions dynamic: runs it on other sizes.

.. code-block:: python

    from experimental_experiment.torch_interpreter import to_onnx
    from experimental_experiment.torch_interpreter.verify import verify_dynamic_shapes

    ds = ({0: "batch"},)
    onx = to_onnx(model, (x,), dynamic_shapes=ds)
    report = verify_dynamic_shapes(model, onx, (x,), dynamic_shapes=ds)
    print(report)
    assert report.ok
"""

from __future__ import annotations

import contextlib
import copy
import math
import re
from dataclasses import dataclass, field

import numpy as np
import onnx
import torch

from .dynamic_shapes import _is_tensor_spec, leaf_paths
from .errors import InvalidArgumentError


@dataclass
class Trial:
    """One run on new sizes."""

    name: str  # "+1", "+3", "x2", "sizes[0]"
    dims: dict[str, int]  # dim_param -> size used
    shapes: list[tuple]  # shapes of the inputs
    max_abs_err: float | None = None
    passed: bool = False
    error: str | None = None  # why the run failed (onnxruntime or eager)


@dataclass
class VerifyReport:
    """What :func:`verify_dynamic_shapes` found; ``str(report)`` is readable."""

    static_but_declared_dynamic: list[str] = field(default_factory=list)
    trials: list[Trial] = field(default_factory=list)
    baked_in: list[str] = field(default_factory=list)  # dims whose change breaks ONNX

    @property
    def ok(self) -> bool:
        return not self.static_but_declared_dynamic and all(
            t.passed or t.error and t.error.startswith("eager") for t in self.trials
        ) and any(t.passed for t in self.trials)

    def __str__(self) -> str:
        lines = [f"verify_dynamic_shapes: {'OK' if self.ok else 'FAILED'}"]
        for text in self.static_but_declared_dynamic:
            lines.append(f"  static in ONNX but declared dynamic: {text}")
        for t in self.trials:
            status = "pass" if t.passed else "FAIL"
            err = "" if t.max_abs_err is None else f" max_abs_err={t.max_abs_err:.3g}"
            lines.append(f"  trial {t.name:>8} {status}{err} dims={t.dims} shapes={t.shapes}")
            if t.error:
                lines.append(f"           {t.error}")
        if self.baked_in:
            lines.append(f"  dims which seem baked in: {', '.join(self.baked_in)}")
        return "\n".join(lines)


def declared_dynamic_axes(model, args: tuple, kwargs: dict | None, dynamic_shapes):
    """``[(path, leaf, {axis: spec})]`` for every leaf of the inputs, with the axes the
    user declared dynamic (strings, Dim, Dim.DYNAMIC, Dim.AUTO)."""
    kwargs = kwargs or {}
    out = []
    leaves = leaf_paths(model, args, kwargs)
    if dynamic_shapes is None:
        return [(p, leaf, {}) for p, leaf in leaves]
    top = dynamic_shapes
    if isinstance(dynamic_shapes, (list, tuple)):
        names = []
        for p, _ in leaves:
            if p[0] not in names:
                names.append(p[0])
        top = dict(zip(names, dynamic_shapes))
    for path, leaf in leaves:
        spec = top
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


def zero_one_axes(model, args: tuple, kwargs: dict | None, dynamic_shapes,
                  ) -> list[tuple[torch.Tensor, int, str]]:
    """``[(tensor, axis, description)]`` for the dimensions declared dynamic whose example
    size is 0 or 1 (``Dim.AUTO`` excepted): torch.export specializes those sizes unless
    the capture treats them as any size (``backed_size_oblivious``)."""
    bad = []
    for path, leaf, axes in declared_dynamic_axes(model, args, kwargs, dynamic_shapes):
        if not isinstance(leaf, torch.Tensor):
            continue
        for axis, d in axes.items():
            if axis < leaf.dim() and leaf.shape[axis] in (0, 1) and not _is_auto(d):
                bad.append((leaf, axis, f"{'.'.join(map(str, path))}.shape[{axis}]="
                                        f"{leaf.shape[axis]} ({d})"))
    return bad


def size_oblivious_capture(enabled: bool):
    """Context in which torch.export does not specialize the sizes 0 and 1 of backed
    dynamic dimensions (the example size is one value among others)."""
    if not enabled:
        return contextlib.nullcontext()
    return torch.fx.experimental._config.patch(backed_size_oblivious=True)


def check_zero_one(ep: torch.export.ExportedProgram, leaves: list,
                   bad: list[tuple[torch.Tensor, int, str]]) -> None:
    """Raises InvalidArgumentError when a dimension of ``bad`` was specialized by the
    capture although it was declared dynamic (``leaves``: the flattened inputs)."""
    tensors = [leaf for leaf in leaves if isinstance(leaf, torch.Tensor)]
    user = set(ep.graph_signature.user_inputs)
    vals = [n.meta.get("val") for n in ep.graph.nodes if n.op == "placeholder"
            and n.name in user and isinstance(n.meta.get("val"), torch.Tensor)]
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


def verify_dynamic_shapes(model, onx: onnx.ModelProto, args: tuple, kwargs: dict | None = None,
                          *, dynamic_shapes, sizes: list[dict[str, int]] | None = None,
                          atol: float = 1e-4, rtol: float = 1e-3) -> VerifyReport:
    """Runs ``onx`` (onnxruntime) and ``model`` (eager) on inputs whose dynamic dimensions
    change, and compares them.

    :param model: the exported module
    :param onx: the ONNX model :func:`to_onnx` returned for ``(args, kwargs)``
    :param args: example positional inputs used to export
    :param kwargs: example keyword inputs
    :param dynamic_shapes: what was given to :func:`to_onnx`
    :param sizes: ``[{dim_param: size}]`` sizes to try instead of the defaults
        (every dimension +1, +3, then x2)
    :param atol: absolute tolerance
    :param rtol: relative tolerance
    :return: a :class:`VerifyReport`, ``str(report)`` tells the shapes tried, the max
        absolute error, which dims seem baked in and the ONNX inputs or outputs static
        where the user declared a dynamic dimension
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
    base: dict[str, int] = {}
    static = {}  # (input index, axis) -> key: declared dynamic, static in ONNX
    for i, ((_path, leaf, axes), vi) in enumerate(zip(tensors, inputs)):
        dims = vi.type.tensor_type.shape.dim
        for axis, spec in axes.items():
            if axis < len(dims) and not dims[axis].dim_param:
                report.static_but_declared_dynamic.append(
                    f"input {vi.name!r} axis {axis} (fixed to {dims[axis].dim_value})")
                key = _spec_name(spec) or f"{vi.name}[{axis}]"
                static[i, axis] = key
                base.setdefault(key, int(leaf.shape[axis]))
        for d, size in zip(dims, leaf.shape):
            if d.dim_param and d.dim_param.isidentifier():
                base.setdefault(d.dim_param, int(size))
    _check_outputs(onx, report)
    trials = [(f"sizes[{i}]", s) for i, s in enumerate(sizes)] if sizes else [
        ("+1", {k: v + 1 for k, v in base.items()}),
        ("+3", {k: v + 3 for k, v in base.items()}),
        ("x2", {k: v * 2 for k, v in base.items()}),
    ]
    for name, dims in trials:
        report.trials.append(_run_trial(model, onx, args, kwargs, tensors, inputs, name,
                                        {**base, **dims}, static, atol, rtol))
    failed = [t for t in report.trials if not t.passed and not (t.error or "").startswith(
        "eager")]
    report.baked_in = sorted({k for t in failed for k, v in t.dims.items() if base.get(k) != v})
    return report


def _check_outputs(onx, report):
    """Outputs with only static dims while some input is dynamic are suspicious."""
    dynamic_inputs = any(d.dim_param for i in onx.graph.input
                         for d in i.type.tensor_type.shape.dim)
    if not dynamic_inputs:
        return
    for o in onx.graph.output:
        dims = o.type.tensor_type.shape.dim
        if len(dims) > 1 and all(d.HasField("dim_value") for d in dims):
            report.static_but_declared_dynamic.append(
                f"output {o.name!r} has a static shape {[d.dim_value for d in dims]} "
                "while some inputs are dynamic (check it does not depend on them)")


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
        value = eval(expr, {"__builtins__": {}, "Max": max, "Min": min,  # noqa: S307
                            "floor": math.floor, "ceiling": math.ceil}, dict(dims))
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


def _run_trial(model, onx, args, kwargs, tensors, inputs, name, dims, static, atol,
               rtol) -> Trial:
    from ..ext_test_case import flatten_tensors, run_onnx

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
        trial.error = f"eager failed (sizes not valid for the model): {type(e).__name__}: " \
                      f"{str(e).splitlines()[0] if str(e) else ''}"
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


__all__ = ["Trial", "VerifyReport", "check_zero_one", "size_oblivious_capture",
           "zero_one_axes", "declared_dynamic_axes",
           "verify_dynamic_shapes"]
