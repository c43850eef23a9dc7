"""optimize / optimize_model: the optimizer on any ONNX model."""

from __future__ import annotations

import onnx

from .._deprecation import deprecated
from ..verbosity import verbose_logging
from ..xbuilder import OptimizationOptions
from .loader import model_to_builder
from .optimizer import RewriteLog, optimize_builder
from .report import OptimizationResult


def optimize(
    model: onnx.ModelProto | str,
    *,
    patterns: str | None = "default",
    verbose: int = 0,
    options: OptimizationOptions | None = None,
    max_rewrites: int | None = None,
) -> OptimizationResult:
    """Optimizes an ONNX model and returns an :class:`OptimizationResult` (the model,
    the report, the rewrites applied); the parameters are those of
    :func:`optimize_model`.

    :param model: a ModelProto or a filename
    :param patterns: pattern sets, see :func:`get_pattern_list`, or a list of
        :class:`Pattern` instances
    :param verbose: verbosity (logging)
    :param options: passes to run (``options.patterns`` is replaced by ``patterns``)
    :param max_rewrites: stops after that many rewrites (see :func:`bisect_patterns`)
    :return: an :class:`OptimizationResult` (the input model is not modified)

    .. code-block:: python

        import onnx
        from experimental_experiment.xoptim import optimize

        res = optimize(onnx.load("model.onnx"))
        print([e.name for e in res.report if e.applied], len(res.rewrites))
    """
    log = RewriteLog()
    with verbose_logging(verbose):
        model, report = _optimize_model(model, patterns, verbose, options, max_rewrites, log)
    return OptimizationResult(model, report, list(log))


def optimize_model(
    model: onnx.ModelProto | str,
    *,
    patterns: str | None = "default",
    verbose: int = 0,
    return_report: bool = False,
    options: OptimizationOptions | None = None,
    max_rewrites: int | None = None,
    log: RewriteLog | None = None,
):
    """Optimizes an ONNX model: passes (identity, unused, constant folding, CSE,
    duplicated initializers) and pattern rewriting.

    :param model: a ModelProto or a filename
    :param patterns: pattern sets, see :func:`get_pattern_list`, or a list of
        :class:`Pattern` instances
    :param verbose: verbosity (logging)
    :param return_report: deprecated (removed in 0.3), returns ``(model, report)``:
        ``optimize(...)`` returns the model and the report as ``.model`` and ``.report``
    :param options: passes to run (``options.patterns`` is replaced by ``patterns``)
    :param max_rewrites: stops after that many rewrites (see :func:`bisect_patterns`)
    :param log: receives the applied rewrites
    :return: the optimized ModelProto (the input model is not modified)

    Subgraphs (If, Loop, Scan) and local functions are optimized too (see
    :func:`optimize_builder`), ``options.subgraphs=False`` or ``options.functions=False``
    leaves them as they are.

    .. code-block:: python

        import onnx
        from experimental_experiment.xoptim import optimize_model

        opt = optimize_model(onnx.load("model.onnx"))
        print(len(opt.graph.node))
    """
    if return_report:
        deprecated("optimize_model(..., return_report=True)", "optimize(...).report")
    with verbose_logging(verbose):
        out, report = _optimize_model(model, patterns, verbose, options, max_rewrites, log)
    return (out, report) if return_report else out


def _optimize_model(model, patterns, verbose, options, max_rewrites, log):
    if isinstance(model, str):  # external data checked before it is read
        from ..xbuilder.model_container import load_model

        model = load_model(model)
    copy = onnx.ModelProto()
    copy.CopyFrom(model)
    g = model_to_builder(copy, verbose=verbose)
    base = options or OptimizationOptions()
    opts = OptimizationOptions(**{**base.__dict__, "patterns": patterns, "verbose": verbose})
    report = optimize_builder(g, opts, max_rewrites=max_rewrites, log=log)
    out = g.to_onnx(optimize=False)
    out.graph.name = model.graph.name or out.graph.name
    if model.ir_version and model.ir_version > out.ir_version:
        out.ir_version = model.ir_version
    for prop in model.metadata_props:
        out.metadata_props.add().CopyFrom(prop)
    return out, report
