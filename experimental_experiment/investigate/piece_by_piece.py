"""Piece-by-piece export: which submodules export, which do not, and why.

The model runs once or several times with forward pre-hooks recording every
submodule's inputs; the dimensions whose size varies across the calls become dynamic.
Then each submodule, leaves first, is captured with torch.export.export (non-strict,
then strict) and converted with :func:`to_onnx`; one row per submodule tells what
worked, the first error and the time.
"""

from __future__ import annotations

import contextlib
import io
import logging
import time
from dataclasses import dataclass, field
from typing import Any

import torch

logger = logging.getLogger(__name__)


@dataclass
class PieceResult:
    """What happened to one submodule (``path`` is empty for the model itself).

    :param path: the submodule's name in the model (``""``: the model itself)
    :param cls: its class name
    :param status: ``"ok"``, ``"failed"`` or ``"not called"``
    :param strict: ``torch.export.export(strict=True)`` worked (None: not tried)
    :param non_strict: ``torch.export.export(strict=False)`` worked (None: not tried)
    :param onnx: :func:`to_onnx` worked (None: not tried)
    :param error: the first error met
    :param time_s: time spent on this submodule, in seconds
    :param max_abs_diff: largest absolute difference between onnxruntime and eager,
        over every call (None: not compared)
    :param dynamic_shapes: the dynamic shapes inferred from its calls

    .. code-block:: python

        import torch
        from experimental_experiment.investigate import export_piece_by_piece

        model = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.ReLU())
        report = export_piece_by_piece(model, [((torch.randn(2, 4),), {}),
                                               ((torch.randn(3, 4),), {})])
        piece = report["0"]  # the Linear layer
        print(piece.status, piece.cls, piece.max_abs_diff, piece.dynamic_shapes)
    """

    path: str
    cls: str
    status: str  # "ok", "failed", "not called"
    strict: bool | None = None  # torch.export.export(strict=True) worked
    non_strict: bool | None = None
    onnx: bool | None = None  # to_onnx worked
    error: str = ""
    time_s: float = 0.0
    max_abs_diff: float | None = None  # onnxruntime against eager, over every call
    dynamic_shapes: Any = None


@dataclass
class PieceByPieceReport:
    """One :class:`PieceResult` per submodule, leaves first.

    :param pieces: the results, leaves first, the model itself last

    .. code-block:: python

        import torch
        from experimental_experiment.investigate import export_piece_by_piece

        model = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.ReLU())
        report = export_piece_by_piece(model, [((torch.randn(2, 4),), {}),
                                               ((torch.randn(3, 4),), {})])
        print(report.to_markdown())
        failed = [p.path for p in report.pieces if p.status == "failed"]
    """

    pieces: list[PieceResult] = field(default_factory=list)

    def __getitem__(self, path: str) -> PieceResult:
        return next(p for p in self.pieces if p.path == path)

    def to_markdown(self) -> str:
        """A table: submodule, class, status, each attempt, time, first error."""

        def mark(v):
            return "" if v is None else ("yes" if v else "no")

        lines = [
            "| submodule | class | status | non-strict | strict | to_onnx | max diff "
            "| time (s) | error |",
            "|---|---|---|---|---|---|---|---|---|",
        ]
        for p in self.pieces:
            error = p.error.strip().splitlines()[0][:160] if p.error.strip() else ""
            lines.append(
                f"| {p.path or '(model)'} | {p.cls} | {p.status} | "
                f"{mark(p.non_strict)} | {mark(p.strict)} | {mark(p.onnx)} | "
                f"{'' if p.max_abs_diff is None else f'{p.max_abs_diff:.2g}'} | "
                f"{p.time_s:.2f} | {error.replace('|', '/')} |"
            )
        return "\n".join(lines) + "\n"


def record_inputs(
    model: torch.nn.Module, calls: list[tuple[tuple, dict]]
) -> dict[str, list[tuple[tuple, dict]]]:
    """Runs ``model(*args, **kwargs)`` for every call, returns the inputs each
    submodule received (by qualified name, ``""`` for the model)."""
    seen: dict[str, list[tuple[tuple, dict]]] = {}
    handles = []
    for name, module in model.named_modules():

        def hook(mod, args, kwargs, name=name):
            seen.setdefault(name, []).append((args, dict(kwargs)))

        handles.append(module.register_forward_pre_hook(hook, with_kwargs=True))
    try:
        with torch.no_grad():
            for args, kwargs in calls:
                model(*args, **kwargs)
    finally:
        for h in handles:
            h.remove()
    return seen


def infer_dynamic_shapes(calls: list[tuple[tuple, dict]]):
    """``(args_ds, kwargs_ds)``: ``Dim.AUTO`` on the axes of the tensor inputs whose
    size differs between calls, None elsewhere (a single call: everything static)."""

    def one(values):
        first = values[0]
        if isinstance(first, torch.Tensor):
            shapes = [v.shape for v in values if isinstance(v, torch.Tensor)]
            if len(shapes) != len(values) or len({len(s) for s in shapes}) != 1:
                return None
            axes = {
                a: torch.export.Dim.AUTO
                for a in range(len(shapes[0]))
                if len({s[a] for s in shapes}) > 1
            }
            return axes or None
        if isinstance(first, (list, tuple)) and all(
            isinstance(v, type(first)) and len(v) == len(first) for v in values
        ):
            inner = [one([v[i] for v in values]) for i in range(len(first))]
            return None if all(d is None for d in inner) else type(first)(inner)
        return None

    args0, kwargs0 = calls[0]
    args_ds = tuple(one([c[0][i] for c in calls]) for i in range(len(args0)))
    kwargs_ds = {k: one([c[1].get(k) for c in calls]) for k in kwargs0}
    return args_ds, kwargs_ds


def _leaves_first(model: torch.nn.Module) -> list[tuple[str, torch.nn.Module]]:
    order = list(model.named_modules())
    return sorted(order, key=lambda item: -item[0].count(".") - (1 if item[0] else 0))


def _try(fn) -> tuple[bool, str]:
    """Runs ``fn``; a failure is a result here: what torch.export prints on stderr when
    it fails (the partial graph) is not shown, the error message is returned."""
    try:
        with contextlib.redirect_stderr(io.StringIO()):
            fn()
        return True, ""
    except Exception as e:
        return False, f"{type(e).__name__}: {e}"


def _ds_for(module, args, kwargs, args_ds, kwargs_ds):
    """dynamic_shapes as torch.export takes them: a tuple, or a dict by parameter name
    when there are keyword inputs."""
    import inspect

    if all(d is None for d in args_ds) and all(d is None for d in kwargs_ds.values()):
        return None
    if not kwargs:
        return args_ds
    params = list(inspect.signature(module.forward).parameters.values())
    if any(p.kind == p.VAR_POSITIONAL for p in params[: len(args)]):
        return None  # *args: no name to give, kept static
    ds = {p.name: d for p, d in zip(params, args_ds)}
    named = {p.name for p in params if p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)}
    var_kw = next((p.name for p in params if p.kind == p.VAR_KEYWORD), None)
    for key, d in kwargs_ds.items():
        if key in named:
            ds[key] = d
        elif var_kw:  # received by **kwargs: nested under its name
            ds.setdefault(var_kw, {})[key] = d
    return ds


def _flat_tensors(value) -> list:
    leaves = torch.utils._pytree.tree_flatten(value)[0]
    return [t for t in leaves if isinstance(t, torch.Tensor)]


def _check(module: torch.nn.Module, onx, calls) -> float:
    """Max absolute difference between onnxruntime and eager over every call."""
    import onnxruntime

    sess = onnxruntime.InferenceSession(onx.SerializeToString(), providers=["CPUExecutionProvider"])
    names = [i.name for i in sess.get_inputs()]
    worst = 0.0
    for args, kwargs in calls:
        with torch.no_grad():
            expected = _flat_tensors(module(*args, **kwargs))
        feeds = dict(zip(names, [t.detach().numpy() for t in _flat_tensors((args, kwargs))]))
        got = sess.run(None, feeds)
        for e, g in zip(expected, got):
            worst = max(worst, float(abs(e.detach().double().numpy() - g).max(initial=0)))
    return worst


def _export_one(path: str, module: torch.nn.Module, calls) -> PieceResult:
    args, kwargs = calls[0]
    args_ds, kwargs_ds = infer_dynamic_shapes(calls)
    ds = _ds_for(module, args, kwargs, args_ds, kwargs_ds)
    result = PieceResult(path, type(module).__name__, "failed", dynamic_shapes=ds)
    begin = time.perf_counter()
    errors = []
    for strict in (False, True):
        ok, err = _try(
            lambda s=strict: torch.export.export(
                module, args, kwargs=kwargs, dynamic_shapes=ds, strict=s
            )
        )
        setattr(result, "strict" if strict else "non_strict", ok)
        if err:
            errors.append(f"{'strict' if strict else 'non-strict'}: {err}")
    if result.non_strict or result.strict:
        from ..torch_interpreter import ExportOptions, to_onnx

        options = ExportOptions(strict=not result.non_strict)
        onx = []
        ok, err = _try(
            lambda: onx.append(
                to_onnx(module, args, kwargs, dynamic_shapes=ds, export_options=options)
            )
        )
        result.onnx = ok
        if err:
            errors.append(f"to_onnx: {err}")
        else:
            ok, err = _try(lambda: setattr(result, "max_abs_diff", _check(module, onx[0], calls)))
            if err:
                result.onnx = False
                errors.append(f"onnxruntime: {err}")
    result.status = "ok" if result.onnx else "failed"
    result.error = "" if result.onnx else "\n".join(errors)
    result.time_s = time.perf_counter() - begin
    logger.info("piece %r (%s): %s", path, result.cls, result.status)
    return result


def export_piece_by_piece(
    model: torch.nn.Module,
    calls: list[tuple[tuple, dict]] | tuple,
) -> PieceByPieceReport:
    """Exports every submodule of ``model``, leaves first, with the inputs it received.

    :param model: the model
    :param calls: ``[(args, kwargs), ...]``, one entry per call (two calls with
        different sizes give dynamic dimensions), or one ``args`` tuple
    :return: a :class:`PieceByPieceReport`, ``report.to_markdown()`` for a table

    .. code-block:: python

        report = export_piece_by_piece(model, [((x1,), {}), ((x2,), {})])
        print(report.to_markdown())
    """
    if isinstance(calls, tuple):
        calls = [(calls, {})]
    seen = record_inputs(model, calls)
    report = PieceByPieceReport()
    for path, module in _leaves_first(model):
        if path not in seen:
            report.pieces.append(PieceResult(path, type(module).__name__, "not called"))
            continue
        report.pieces.append(_export_one(path, module, seen[path]))
    return report
