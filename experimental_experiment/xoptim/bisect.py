"""bisect_patterns: finds the first rewrite after which a model's results change."""

from __future__ import annotations

import logging
from typing import Any, Sequence

import numpy as np
import onnx

logger = logging.getLogger(__name__)


def _run(model: onnx.ModelProto, feeds: dict[str, np.ndarray]) -> list[np.ndarray]:
    import onnxruntime

    sess = onnxruntime.InferenceSession(
        model.SerializeToString(), providers=["CPUExecutionProvider"]
    )
    return sess.run(None, feeds)


def _max_diff(expected: list, got: list) -> float:
    if len(expected) != len(got):
        return float("inf")
    diff = 0.0
    for e, r in zip(expected, got):
        e, r = np.asarray(e), np.asarray(r)
        if e.shape != r.shape or e.dtype != r.dtype:
            return float("inf")
        if e.size:
            d = np.abs(e.astype(np.float64) - r.astype(np.float64))
            d = np.where(np.isnan(e.astype(np.float64)) & np.isnan(r.astype(np.float64)), 0, d)
            diff = max(diff, float(np.nan_to_num(d, nan=np.inf).max()))
    return diff


def bisect_patterns(
    model: onnx.ModelProto | str,
    inputs: dict[str, np.ndarray] | Sequence[np.ndarray],
    *,
    patterns: str | None = "default",
    atol: float = 1e-4,
    verbose: int = 0,
) -> dict[str, Any] | None:
    """Applies the rewrites of ``patterns`` one prefix at a time (bisection on their
    number) and returns the first one after which onnxruntime's results differ from
    the unoptimized model's by more than ``atol``.

    :param model: ModelProto or filename
    :param inputs: a dict ``{name: array}`` or a list of arrays (graph input order)
    :param patterns: pattern sets, see :func:`get_pattern_list`, or a list of patterns
    :param atol: absolute tolerance
    :param verbose: logs the maximum difference after every attempt
    :return: None when every rewrite keeps the results, else a dict with ``index``
        (1-based number of rewrites applied), ``pattern``, ``nodes`` (the nodes it
        replaced), ``max_diff`` and ``model`` (the model after that rewrite);
        ``pattern`` is None when the passes alone change the results

    .. code-block:: python

        from experimental_experiment.xoptim import bisect_patterns

        culprit = bisect_patterns(model, {"x": x}, atol=1e-4)
        if culprit:
            print(culprit["pattern"], culprit["nodes"])
    """
    from .api import optimize_model
    from .optimizer import RewriteLog

    if isinstance(model, str):  # external data checked before it is read
        from ..xbuilder.model_container import load_model

        model = load_model(model)
    if not isinstance(inputs, dict):
        inputs = {i.name: v for i, v in zip(model.graph.input, inputs)}
    expected = _run(model, inputs)

    def attempt(k: int | None):
        log = RewriteLog()
        opt = optimize_model(model, patterns=patterns, max_rewrites=k, log=log)
        diff = _max_diff(expected, _run(opt, inputs))
        if verbose:
            logger.info("[bisect_patterns] %s rewrites: max diff %g", len(log), diff)
        return diff, log, opt

    diff, log, _ = attempt(None)
    if diff <= atol:
        return None
    d0, _, m0 = attempt(0)
    if d0 > atol:
        return {"index": 0, "pattern": None, "nodes": [], "max_diff": d0, "model": m0}
    lo, hi = 0, len(log)
    found = (diff, log, None)
    while hi - lo > 1:
        mid = (lo + hi) // 2
        res = attempt(mid)
        if res[0] > atol:
            hi, found = mid, res
        else:
            lo = mid
    if found[2] is None:
        found = attempt(hi)
    d, hlog, m = found
    name, nodes = hlog[-1] if hlog else (None, [])
    return {"index": hi, "pattern": name, "nodes": nodes, "max_diff": d, "model": m}
