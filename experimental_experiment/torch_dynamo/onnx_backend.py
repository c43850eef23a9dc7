"""torch.compile backends running each FX graph converted to ONNX in onnxruntime.

Both are *compilers* for :func:`torch._dynamo.backends.common.aot_autograd`: it calls
them once for the forward graph and once for the backward graph (see
:func:`experimental_experiment.torch_models.training_helper.make_aot_ort`).

* :func:`onnx_custom_backend` runs the models with onnxruntime; sessions are cached
  per graph and input signature (dtype, shape or symbolic shape, device).
* :func:`onnx_debug_backend` runs them with onnx's reference evaluator, or with
  onnxruntime one node at a time (``node_by_node=True``) comparing every node with the
  reference evaluator or eager torch, and can save every intermediate result.
"""

from __future__ import annotations

import logging
import os
from collections import OrderedDict
from dataclasses import dataclass
from typing import Any, Callable

import numpy as np
import onnx
import torch
from torch._subclasses.fake_tensor import unset_fake_temporarily

from ..xbuilder import OptimizationOptions
from . import dump
from ._export import default_exporter, export_graph_module, graph_signature
from ._runner import OrtRunner, assemble, providers_for, to_numpy, verified

logger = logging.getLogger(__name__)

_CACHE: OrderedDict[str, tuple[onnx.ModelProto, OrtRunner]] = OrderedDict()
_CACHE_SIZE = 64
STATS = {"exported": 0, "cache_hits": 0}


def clear_cache() -> None:
    """Forgets every cached session and resets :data:`STATS`."""
    _CACHE.clear()
    STATS.update(exported=0, cache_hits=0)


def _boxed(fn: Callable) -> Callable:
    from torch._functorch.aot_autograd import make_boxed_func

    return make_boxed_func(fn)


@dataclass(frozen=True)
class _Settings:
    exporter: str
    target_opset: int | None
    options: OptimizationOptions | None
    providers: tuple
    session_options: Any
    use_dlpack: bool
    verbose: int

    def key(self) -> tuple:
        so = id(self.session_options) if self.session_options is not None else None
        return (self.exporter, self.target_opset, repr(self.options), repr(self.providers),
                so, self.use_dlpack)


def _session(gm: torch.fx.GraphModule, args, settings: _Settings,
             use_cache: bool) -> tuple[onnx.ModelProto, OrtRunner]:
    """Exports ``gm`` and creates its session, or finds them in the cache."""
    # aot_autograd compiles under a fake mode: the graph's constants are real tensors
    with unset_fake_temporarily():
        key = graph_signature(gm, args, settings.key()) if use_cache else None
        if key is not None and key in _CACHE:
            STATS["cache_hits"] += 1
            _CACHE.move_to_end(key)
            onx, runner = _CACHE[key]
            logger.info("onnx_custom_backend: cached session for graph %s", key[:12])
        else:
            onx, layout = export_graph_module(
                gm, args, exporter=settings.exporter, target_opset=settings.target_opset,
                options=settings.options, verbose=settings.verbose)
            STATS["exported"] += 1
            runner = OrtRunner(onx, layout, providers=list(settings.providers),
                               session_options=settings.session_options,
                               use_dlpack=settings.use_dlpack)
            logger.info("onnx_custom_backend: exported a graph (%d nodes) with %r",
                        len(onx.graph.node), settings.exporter)
            if key is not None:
                _CACHE[key] = (onx, runner)
                while len(_CACHE) > _CACHE_SIZE:
                    _CACHE.popitem(last=False)
        dump.save(onx, gm)
    return onx, runner


def _is_symbolic(gm: torch.fx.GraphModule) -> bool:
    """True if a placeholder is a SymInt or a tensor with a symbolic dimension."""
    for node in gm.graph.nodes:
        if node.op != "placeholder":
            continue
        val = node.meta.get("val")
        if isinstance(val, (torch.SymInt, torch.SymFloat)):
            return True
        if isinstance(val, torch.Tensor) and any(
                not isinstance(d, int) for d in val.shape):
            return True
    return False


class _Specializer:
    """Runs a graph with symbolic dims through ONNX models with static shapes: the
    graph is traced again (make_fx) and exported for every new input signature."""

    def __init__(self, gm: torch.fx.GraphModule, settings: _Settings, use_cache: bool):
        self.gm, self.settings, self.use_cache = gm, settings, use_cache
        self.runners: dict[tuple, OrtRunner] = {}

    def __call__(self, *args):
        key = tuple((a.dtype, tuple(a.shape), a.device) if isinstance(a, torch.Tensor)
                    else (type(a).__name__, a) for a in args)
        runner = self.runners.get(key)
        if runner is None:
            from torch.fx.experimental.proxy_tensor import make_fx

            static = make_fx(self.gm, tracing_mode="fake")(*args)
            static.graph.eliminate_dead_code()
            placeholders = [n for n in static.graph.nodes if n.op == "placeholder"]
            for node, a in zip(placeholders, args):
                if node.meta.get("val") is None:
                    node.meta["val"] = a  # a python int the graph was specialized on
            for node in static.graph.nodes:
                if node.op == "call_function":
                    node.meta.setdefault("val", None)  # getitem of a None gradient
            static.recompile()
            _, runner = _session(static, args, self.settings, self.use_cache)
            self.runners[key] = runner
        return runner(*args)


def onnx_custom_backend(graph_module: torch.fx.GraphModule, args: list, *,
                        exporter: str | None = None, target_opset: int | None = None,
                        options: OptimizationOptions | None = None,
                        providers: list | None = None, session_options=None,
                        dynamic: bool = True, verify: bool = False, use_cache: bool = True,
                        use_dlpack: bool = False, verbose: int = 0) -> Callable:
    """A torch.compile compiler: converts ``graph_module`` to ONNX, runs onnxruntime.

    :param graph_module: forward or backward graph given by aot_autograd
    :param args: its example inputs (fake tensors, SymInts)
    :param exporter: ``"custom"`` (our :func:`to_onnx`) or ``"dynamo"``
        (:func:`torch.onnx.export`); None: ``"custom"`` unless the environment variable
        ``ONNXRT_CHANGE_REWRITER`` is ``"0"``
    :param target_opset: opset of the ONNX models
    :param options: optimization options of the exporter
    :param providers: onnxruntime providers (default: from the inputs' device)
    :param session_options: :class:`onnxruntime.SessionOptions`
    :param dynamic: when the graph has symbolic dims (``torch.compile(dynamic=True)`` or
        a recompilation after a shape change), True exports one model with dynamic
        dims for every shape; False exports a model with static shapes for every new
        input signature met at run time
    :param verify: compares every call with eager execution of the graph
    :param use_cache: reuses the session of an identical graph and signature
    :param use_dlpack: exchanges tensors through DLPack even on CPU
        (default: numpy views on CPU, DLPack on other devices)
    :param verbose: verbosity
    :return: a boxed function (list of inputs -> tuple of outputs)
    """
    settings = _Settings(exporter or default_exporter(), target_opset, options,
                         tuple(providers or providers_for(args)), session_options,
                         use_dlpack, verbose)
    if not dynamic and _is_symbolic(graph_module):
        run = _Specializer(graph_module, settings, use_cache)
    else:
        _, run = _session(graph_module, args, settings, use_cache)
    if verify:
        run = verified(run, graph_module, "onnx_custom_backend")
    return _boxed(run)


def onnx_debug_backend(graph_module: torch.fx.GraphModule, args: list, *,
                       target_opset: int | None = None,
                       options: OptimizationOptions | None = None,
                       dump_intermediate: str | None = None, verify: bool = False,
                       node_by_node: bool = False, compare: str | None = None,
                       atol: float = 1e-4, rtol: float = 1e-3,
                       reports: list | None = None, verbose: int = 0) -> Callable:
    """Same as :func:`onnx_custom_backend` but runs :class:`onnx.reference.ReferenceEvaluator`,
    or onnxruntime one node at a time.

    :param dump_intermediate: a folder; every call saves the inputs and every
        intermediate result of the model in ``<folder>/graph<g>_call<c>.npz``
        (keys: the ONNX result names)
    :param verify: compares every call with eager execution of the graph
    :param node_by_node: runs every node as a model of one node in onnxruntime, in
        order, keeping every intermediate result (see
        :mod:`experimental_experiment.torch_dynamo.node_by_node`)
    :param compare: with ``node_by_node``, compares every node's outputs with
        ``"reference"`` (onnx's evaluator on the whole model) or ``"eager"`` (the
        graph module run by :class:`torch.fx.Interpreter`, for the ONNX results named
        after an FX node); the first node over ``atol + rtol * |expected|`` is logged
    :param reports: with ``node_by_node``, a list receiving one
        :class:`~experimental_experiment.torch_dynamo.node_by_node.NodeByNodeReport`
        per call (``report.first``: the first node which differs)

    .. code-block:: python

        import functools
        from torch._dynamo.backends.common import aot_autograd
        from experimental_experiment.torch_dynamo import onnx_debug_backend

        reports = []
        compiler = functools.partial(onnx_debug_backend, node_by_node=True,
                                     compare="eager", reports=reports)
        backend = aot_autograd(fw_compiler=compiler)
        torch.compile(model, backend=backend)(x)
        print(reports[0].first)  # None: every node agrees with eager
    """
    with unset_fake_temporarily():
        onx, layout = export_graph_module(graph_module, args, target_opset=target_opset,
                                          options=options, verbose=verbose)
        dump.save(onx, graph_module)
    evaluate = _node_by_node_run(onx, graph_module, layout, compare, atol, rtol, reports) \
        if node_by_node else _reference_run(onx)
    onnx_inputs = {i.name for i in onx.graph.input}
    outputs = [o.name for o in onx.graph.output]
    graph_id = _next_debug_id()
    calls = [0]

    def run(*inputs: Any):
        feeds = {n: to_numpy(a) for n, a in zip(layout.input_names, inputs)
                 if n in onnx_inputs}
        results = evaluate(feeds, inputs, bool(dump_intermediate))
        if dump_intermediate:
            os.makedirs(dump_intermediate, exist_ok=True)
            path = os.path.join(dump_intermediate, f"graph{graph_id}_call{calls[0]}.npz")
            np.savez(path, **{k: np.asarray(v) for k, v in {**feeds, **results}.items()
                              if v is not None and not isinstance(v, list)})
            calls[0] += 1
        values = [results[o] for o in outputs]
        return assemble(layout, [torch.from_numpy(np.ascontiguousarray(v)) for v in values])

    return _boxed(verified(run, graph_module, "onnx_debug_backend") if verify else run)


def _reference_run(onx: onnx.ModelProto) -> Callable:
    from onnx.reference import ReferenceEvaluator

    ref = ReferenceEvaluator(onx)
    outputs = [o.name for o in onx.graph.output]

    def evaluate(feeds, inputs, intermediate: bool) -> dict:
        if intermediate:
            return ref.run(None, feeds, intermediate=True)
        return dict(zip(outputs, ref.run(None, feeds)))

    return evaluate


def _node_by_node_run(onx, graph_module, layout, compare, atol, rtol, reports) -> Callable:
    from .node_by_node import NodeByNodeRunner

    if compare not in (None, "reference", "eager"):
        raise ValueError(f"compare must be None, 'reference' or 'eager', not {compare!r}")
    runner = NodeByNodeRunner(onx)

    def evaluate(feeds, inputs, intermediate: bool) -> dict:
        expected = _eager_values(graph_module, inputs) if compare == "eager" else compare
        report = runner.run(feeds, expected, atol=atol, rtol=rtol)
        if report.first is not None:
            logger.warning("onnx_debug_backend: %s", report)
        if reports is not None:
            reports.append(report)
        return report.results

    return evaluate


def _eager_values(gm: torch.fx.GraphModule, inputs) -> dict[str, np.ndarray]:
    """Every tensor an FX node computes, by node name, eager."""
    interp = torch.fx.Interpreter(gm, garbage_collect_values=False)
    with torch.no_grad():
        interp.run(*inputs)
    return {node.name: to_numpy(v) for node, v in interp.env.items()
            if isinstance(v, torch.Tensor) and node.op == "call_function"}


_DEBUG_IDS = [0]


def _next_debug_id() -> int:
    _DEBUG_IDS[0] += 1
    return _DEBUG_IDS[0] - 1


__all__ = ["clear_cache", "default_exporter", "onnx_custom_backend", "onnx_debug_backend"]
