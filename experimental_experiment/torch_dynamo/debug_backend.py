"""A torch.compile backend running the ONNX models with onnx's reference evaluator, or
with onnxruntime one node at a time (:mod:`experimental_experiment.torch_dynamo.node_by_node`)."""

from __future__ import annotations

import logging
import os
from dataclasses import dataclass
from typing import Any, Callable

import numpy as np
import torch
from torch._subclasses.fake_tensor import unset_fake_temporarily

from ..xbuilder import OptimizationOptions
from . import dump
from ._export import export_graph_module
from ._runner import assemble, boxed, to_numpy, verified

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class DebugOptions:
    """Options of :class:`OnnxDebugBackend`, the keywords of :func:`onnx_debug_backend`.

    :param target_opset: opset of the ONNX models (None: the default opset)
    :param options: optimization options of the exporter
    :param dump_intermediate: a folder; every call saves the inputs and every
        intermediate result in ``<folder>/graph<g>_call<c>.npz``
    :param verify: compares every call with eager execution of the graph
    :param verbose: verbosity
    :param node_by_node: runs every node as a model of one node in onnxruntime
    :param compare: with ``node_by_node``, compares every node's outputs with
        ``"reference"`` or ``"eager"`` (None: no comparison)
    :param atol: absolute tolerance of ``compare``
    :param rtol: relative tolerance of ``compare``
    :param reports: with ``node_by_node``, a list receiving one report per call

    .. code-block:: python

        from experimental_experiment.torch_dynamo import DebugOptions, OnnxDebugBackend

        reports = []
        options = DebugOptions(node_by_node=True, compare="eager", reports=reports)
        compiler = OnnxDebugBackend(options)
    """

    target_opset: int | None = None
    options: OptimizationOptions | None = None
    dump_intermediate: str | None = None
    verify: bool = False
    verbose: int = 0
    node_by_node: bool = False
    compare: str | None = None
    atol: float = 1e-4
    rtol: float = 1e-3
    reports: list | None = None


class OnnxDebugBackend:
    """A torch.compile compiler running :class:`onnx.reference.ReferenceEvaluator`,
    or onnxruntime one node at a time (``DebugOptions(node_by_node=True)``).

    The instance numbers the graphs it compiles (``graph<g>`` in the dumped files).

    :param options: :class:`DebugOptions` (default: all defaults)

    .. code-block:: python

        compiler = OnnxDebugBackend(DebugOptions(dump_intermediate="dump"))
        backend = aot_autograd(fw_compiler=compiler, bw_compiler=compiler)
    """

    def __init__(self, options: DebugOptions | None = None):
        self.options = options or DebugOptions()
        self.graphs = 0

    def __call__(self, graph_module: torch.fx.GraphModule, args: list) -> Callable:
        return self.compile(graph_module, args)

    def compile(
        self, graph_module: torch.fx.GraphModule, args: list, options: DebugOptions | None = None
    ) -> Callable:
        """Returns the boxed function running ``graph_module``."""
        opts = options or self.options
        if opts.compare not in (None, "reference", "eager"):
            raise ValueError(f"compare must be None, 'reference' or 'eager', not {opts.compare!r}")
        with unset_fake_temporarily():
            onx, layout = export_graph_module(
                graph_module,
                args,
                target_opset=opts.target_opset,
                options=opts.options,
                verbose=opts.verbose,
            )
            dump.save(onx, graph_module)
        evaluate = (
            _node_by_node_run(onx, graph_module, opts) if opts.node_by_node else _reference_run(onx)
        )
        onnx_inputs = {i.name for i in onx.graph.input}
        outputs = [o.name for o in onx.graph.output]
        graph_id, self.graphs = self.graphs, self.graphs + 1
        calls = [0]

        def run(*inputs: Any):
            feeds = {n: to_numpy(a) for n, a in zip(layout.input_names, inputs) if n in onnx_inputs}
            results = evaluate(feeds, inputs, bool(opts.dump_intermediate))
            if opts.dump_intermediate:
                _save_npz(
                    opts.dump_intermediate,
                    f"graph{graph_id}_call{calls[0]}.npz",
                    {**feeds, **results},
                )
                calls[0] += 1
            return assemble(
                layout, [torch.from_numpy(np.ascontiguousarray(results[o])) for o in outputs]
            )

        return boxed(verified(run, graph_module, "onnx_debug_backend") if opts.verify else run)


def _reference_run(onx) -> Callable:
    from onnx.reference import ReferenceEvaluator

    ref = ReferenceEvaluator(onx)
    outputs = [o.name for o in onx.graph.output]

    def evaluate(feeds, inputs, intermediate: bool) -> dict:
        if intermediate:
            return ref.run(None, feeds, intermediate=True)
        return dict(zip(outputs, ref.run(None, feeds)))

    return evaluate


def _node_by_node_run(onx, graph_module, opts: DebugOptions) -> Callable:
    from .node_by_node import NodeByNodeRunner

    runner = NodeByNodeRunner(onx)

    def evaluate(feeds, inputs, intermediate: bool) -> dict:
        expected = _eager_values(graph_module, inputs) if opts.compare == "eager" else opts.compare
        report = runner.run(feeds, expected, atol=opts.atol, rtol=opts.rtol)
        if report.first is not None:
            logger.warning("onnx_debug_backend: %s", report)
        if opts.reports is not None:
            opts.reports.append(report)
        return report.results

    return evaluate


def _eager_values(gm: torch.fx.GraphModule, inputs) -> dict[str, np.ndarray]:
    """Every tensor an FX node computes, by node name, eager."""
    interp = torch.fx.Interpreter(gm, garbage_collect_values=False)
    with torch.no_grad():
        interp.run(*inputs)
    return {
        node.name: to_numpy(v)
        for node, v in interp.env.items()
        if isinstance(v, torch.Tensor) and node.op == "call_function"
    }


def _save_npz(folder: str, name: str, arrays: dict) -> None:
    os.makedirs(folder, exist_ok=True)
    np.savez(
        os.path.join(folder, name),
        **{
            k: np.asarray(v) for k, v in arrays.items() if v is not None and not isinstance(v, list)
        },
    )


_DEFAULT = OnnxDebugBackend()


def onnx_debug_backend(
    graph_module: torch.fx.GraphModule,
    args: list,
    *,
    target_opset: int | None = None,
    options: OptimizationOptions | None = None,
    dump_intermediate: str | None = None,
    verify: bool = False,
    node_by_node: bool = False,
    compare: str | None = None,
    atol: float = 1e-4,
    rtol: float = 1e-3,
    reports: list | None = None,
    verbose: int = 0,
) -> Callable:
    """Same as :func:`onnx_custom_backend
    <experimental_experiment.torch_dynamo.onnx_custom_backend>` but runs
    :class:`onnx.reference.ReferenceEvaluator`, or onnxruntime one node at a time
    (through a default :class:`OnnxDebugBackend`).

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
    :param graph_module: forward or backward graph given by aot_autograd
    :param args: its example inputs (fake tensors, SymInts)
    :param target_opset: opset of the ONNX models
    :param options: optimization options of the exporter
    :param atol: absolute tolerance of ``verify`` and ``compare``
    :param rtol: relative tolerance of ``verify`` and ``compare``
    :param verbose: verbosity
    :return: a boxed function (list of inputs -> tuple of outputs)

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
    opts = DebugOptions(
        target_opset,
        options,
        dump_intermediate,
        verify,
        verbose,
        node_by_node,
        compare,
        atol,
        rtol,
        reports,
    )
    return _DEFAULT.compile(graph_module, args, opts)
