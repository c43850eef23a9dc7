"""torch.compile backends running each FX graph converted to ONNX in onnxruntime."""

from __future__ import annotations

import logging
import os
from typing import Any, Callable

import numpy as np
import onnx
import torch

from ..torch_interpreter._torch_helper import tensor_to_numpy
from ..torch_interpreter.onnx_export import to_onnx
from ..xbuilder import OptimizationOptions
from . import dump

logger = logging.getLogger(__name__)


def _output_layout(gm: torch.fx.GraphModule) -> list[str]:
    """Kind of each output of the graph: 'tensor', 'none', 'int'."""
    out = next(n for n in gm.graph.nodes if n.op == "output").args[0]
    out = out if isinstance(out, (list, tuple)) else [out]
    kinds = []
    for o in out:
        if o is None:
            kinds.append("none")
        elif isinstance(o, torch.fx.Node) and isinstance(o.meta.get("val"), torch.Tensor):
            kinds.append("tensor")
        else:
            kinds.append("int")
    return kinds


def export_graph_module(gm: torch.fx.GraphModule, args, *, exporter: str = "custom",
                        target_opset: int | None = None,
                        options: OptimizationOptions | None = None,
                        verbose: int = 0) -> tuple[onnx.ModelProto, list[str]]:
    """Converts a graph module received by a backend; returns the model and layout."""
    layout = _output_layout(gm)
    names = [None if k == "none" else f"output_{i}" for i, k in enumerate(layout)]
    if exporter == "custom":
        onx = to_onnx(gm, tuple(args), options=options, target_opset=target_opset,
                      verbose=verbose, output_names=[n for n in names if n])
    elif exporter == "dynamo":
        onx = _torch_onnx_export(gm, args, target_opset)
    else:
        raise ValueError(f"unknown exporter {exporter!r}, expected 'custom' or 'dynamo'")
    return onx, layout


def _torch_onnx_export(gm, args, target_opset):
    # torch.onnx.export re-captures the graph module with torch.export
    prog = torch.onnx.export(gm, tuple(args), dynamo=True, opset_version=target_opset or 18,
                             verbose=False, optimize=True)
    return prog.model_proto


class OrtRunner:
    """Calls an InferenceSession with torch tensors and returns torch tensors."""

    def __init__(self, onx: onnx.ModelProto, layout: list[str], *,
                 providers: list[str] | None = None, session_options=None,
                 graph_module: torch.fx.GraphModule | None = None, verify: bool = False):
        import onnxruntime

        self.session = onnxruntime.InferenceSession(
            onx.SerializeToString(), session_options,
            providers=providers or ["CPUExecutionProvider"],
        )
        self.input_names = [i.name for i in onx.graph.input]
        self.layout = layout
        self.graph_module = graph_module
        self.verify = verify

    def __call__(self, *args) -> tuple:
        feeds = {name: _to_numpy(a) for name, a in zip(self.input_names, args)}
        results = iter(self.session.run(None, feeds))
        outputs = []
        for kind in self.layout:
            if kind == "none":
                outputs.append(None)
            elif kind == "int":
                outputs.append(int(next(results)))
            else:
                outputs.append(torch.from_numpy(np.ascontiguousarray(next(results))))
        if self.verify and self.graph_module is not None:
            _verify(self.graph_module, args, outputs)
        return tuple(outputs)


def _to_numpy(value) -> np.ndarray:
    if isinstance(value, torch.Tensor):
        return tensor_to_numpy(value)
    return np.asarray(value, dtype=np.int64 if isinstance(value, int) else np.float32)


def _verify(gm, args, outputs) -> None:
    expected = gm(*args)
    expected = expected if isinstance(expected, (list, tuple)) else [expected]
    for i, (e, o) in enumerate(zip(expected, outputs)):
        if isinstance(e, torch.Tensor):
            torch.testing.assert_close(o, e.detach(), atol=1e-4, rtol=1e-3,
                                       msg=lambda m, i=i: f"output {i}: {m}")


def onnx_custom_backend(graph_module: torch.fx.GraphModule, args: list, *,
                        exporter: str | None = None, target_opset: int | None = None,
                        options: OptimizationOptions | None = None,
                        providers: list[str] | None = None, session_options=None,
                        verify: bool = False, verbose: int = 0) -> Callable:
    """A torch.compile compiler: converts ``graph_module`` to ONNX and runs onnxruntime.

    Use it through :func:`torch._dynamo.backends.common.aot_autograd` (see
    :func:`experimental_experiment.torch_models.training_helper.make_aot_ort`) so that
    forward and backward graphs are both converted.

    :param exporter: ``"custom"`` (our :func:`to_onnx`) or ``"dynamo"``
        (:func:`torch.onnx.export`); default: ``"custom"`` unless the environment
        variable ``ONNXRT_CHANGE_REWRITER`` is ``"0"``
    :param verify: compares every call with eager execution of the graph
    """
    exporter = exporter or default_exporter()
    onx, layout = export_graph_module(graph_module, args, exporter=exporter,
                                      target_opset=target_opset, options=options,
                                      verbose=verbose)
    dump.save(onx, graph_module)
    runner = OrtRunner(onx, layout, providers=providers, session_options=session_options,
                       graph_module=graph_module, verify=verify)
    from torch._functorch.aot_autograd import make_boxed_func

    return make_boxed_func(runner)


def default_exporter() -> str:
    """``custom`` unless ``ONNXRT_CHANGE_REWRITER=0`` asks for torch.onnx.export."""
    return "dynamo" if os.environ.get("ONNXRT_CHANGE_REWRITER", "") == "0" else "custom"


def onnx_debug_backend(graph_module: torch.fx.GraphModule, args: list, *,
                       target_opset: int | None = None, verbose: int = 0) -> Callable:
    """Same as :func:`onnx_custom_backend` but runs onnx's reference evaluator."""
    from onnx.reference import ReferenceEvaluator

    onx, layout = export_graph_module(graph_module, args, target_opset=target_opset,
                                      verbose=verbose)
    dump.save(onx, graph_module)
    ref = ReferenceEvaluator(onx)
    names = [i.name for i in onx.graph.input]

    def run(*inputs: Any):
        res = iter(ref.run(None, {n: _to_numpy(a) for n, a in zip(names, inputs)}))
        return tuple(None if k == "none" else int(next(res)) if k == "int"
                     else torch.from_numpy(np.ascontiguousarray(next(res))) for k in layout)

    from torch._functorch.aot_autograd import make_boxed_func

    return make_boxed_func(run)
