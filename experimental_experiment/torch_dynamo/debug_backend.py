"""A torch.compile backend running the ONNX models with onnx's reference evaluator."""

from __future__ import annotations

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


@dataclass(frozen=True)
class DebugOptions:
    """Options of :class:`OnnxDebugBackend`, the keywords of :func:`onnx_debug_backend`."""

    target_opset: int | None = None
    options: OptimizationOptions | None = None
    dump_intermediate: str | None = None
    verify: bool = False
    verbose: int = 0


class OnnxDebugBackend:
    """A torch.compile compiler running :class:`onnx.reference.ReferenceEvaluator`.

    The instance numbers the graphs it compiles (``graph<g>`` in the dumped files).

    .. code-block:: python

        compiler = OnnxDebugBackend(DebugOptions(dump_intermediate="dump"))
        backend = aot_autograd(fw_compiler=compiler, bw_compiler=compiler)
    """

    def __init__(self, options: DebugOptions | None = None):
        self.options = options or DebugOptions()
        self.graphs = 0

    def __call__(self, graph_module: torch.fx.GraphModule, args: list) -> Callable:
        return self.compile(graph_module, args)

    def compile(self, graph_module: torch.fx.GraphModule, args: list,
                options: DebugOptions | None = None) -> Callable:
        """Returns the boxed function running ``graph_module``."""
        from onnx.reference import ReferenceEvaluator

        opts = options or self.options
        with unset_fake_temporarily():
            onx, layout = export_graph_module(graph_module, args,
                                              target_opset=opts.target_opset,
                                              options=opts.options, verbose=opts.verbose)
            dump.save(onx, graph_module)
        ref = ReferenceEvaluator(onx)
        onnx_inputs = {i.name for i in onx.graph.input}
        outputs = [o.name for o in onx.graph.output]
        graph_id, self.graphs = self.graphs, self.graphs + 1
        calls = [0]

        def run(*inputs: Any):
            feeds = {n: to_numpy(a) for n, a in zip(layout.input_names, inputs)
                     if n in onnx_inputs}
            if not opts.dump_intermediate:
                values = ref.run(None, feeds)
            else:
                results = ref.run(None, feeds, intermediate=True)
                _save_npz(opts.dump_intermediate, f"graph{graph_id}_call{calls[0]}.npz",
                          {**feeds, **results})
                calls[0] += 1
                values = [results[o] for o in outputs]
            return assemble(layout, [torch.from_numpy(np.ascontiguousarray(v))
                                     for v in values])

        return boxed(verified(run, graph_module, "onnx_debug_backend")
                     if opts.verify else run)


def _save_npz(folder: str, name: str, arrays: dict) -> None:
    os.makedirs(folder, exist_ok=True)
    np.savez(os.path.join(folder, name),
             **{k: np.asarray(v) for k, v in arrays.items() if v is not None})


_DEFAULT = OnnxDebugBackend()


def onnx_debug_backend(graph_module: torch.fx.GraphModule, args: list, *,
                       target_opset: int | None = None,
                       options: OptimizationOptions | None = None,
                       dump_intermediate: str | None = None, verify: bool = False,
                       verbose: int = 0) -> Callable:
    """Same as :func:`onnx_custom_backend
    <experimental_experiment.torch_dynamo.onnx_custom_backend>` but runs
    :class:`onnx.reference.ReferenceEvaluator` (through a default
    :class:`OnnxDebugBackend`).

    :param dump_intermediate: a folder; every call saves the inputs and every
        intermediate result of the model in ``<folder>/graph<g>_call<c>.npz``
        (keys: the ONNX result names)
    :param verify: compares every call with eager execution of the graph
    """
    opts = DebugOptions(target_opset, options, dump_intermediate, verify, verbose)
    return _DEFAULT.compile(graph_module, args, opts)
