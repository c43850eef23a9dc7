"""Converts the FX graphs a torch.compile backend receives into ONNX models.

Two exporters: ``"custom"`` (:func:`to_onnx`, reads the graph as it is, keeps symbolic
dims) and ``"dynamo"`` (:func:`torch.onnx.export`, re-captures the graph module with
:func:`torch.export.export`). The custom one is the default: the other one is slower
(a second capture) and fails on most backward graphs (SymInt inputs are refused by
torch.export, ``*_backward`` aten ops have no ONNX function in torch.onnx).
"""

from __future__ import annotations

import hashlib
import os
from dataclasses import dataclass

import onnx
import torch

from ..torch_interpreter.onnx_export import to_onnx
from ..xbuilder import OptimizationOptions

EXPORTERS = ("custom", "dynamo")


@dataclass(frozen=True)
class GraphLayout:
    """How the graph's inputs and outputs map to the ONNX model's.

    :param input_names: placeholder names in order (ONNX input names for ``custom``)
    :param outputs: kind of each output: ``tensor``, ``int`` (a SymInt computed by the
        model), ``none`` or ``const`` (a python value known at compile time)
    :param constants: the value of each ``const`` output (None elsewhere)
    """

    input_names: tuple[str, ...]
    outputs: tuple[str, ...]
    constants: tuple


def graph_layout(gm: torch.fx.GraphModule) -> GraphLayout:
    """Kinds of the graph's outputs and names of its placeholders."""
    names = tuple(n.name for n in gm.graph.nodes if n.op == "placeholder")
    out = next(n for n in gm.graph.nodes if n.op == "output").args[0]
    out = out if isinstance(out, (list, tuple)) else [out]
    kinds, consts = [], []
    for o in out:
        const = None
        if o is None:
            kind = "none"
        elif not isinstance(o, torch.fx.Node):
            kind, const = "const", o
        elif isinstance(o.meta.get("val"), torch.Tensor):
            kind = "tensor"
        else:
            kind = "int"
        kinds.append(kind)
        consts.append(const)
    return GraphLayout(names, tuple(kinds), tuple(consts))


def default_exporter() -> str:
    """The exporter used when none is given: ``"custom"`` unless the environment
    variable ``ONNXRT_CHANGE_REWRITER`` is ``"0"`` (then ``"dynamo"``)."""
    return "dynamo" if os.environ.get("ONNXRT_CHANGE_REWRITER", "") == "0" else "custom"


def export_graph_module(
    gm: torch.fx.GraphModule,
    args,
    *,
    exporter: str = "custom",
    target_opset: int | None = None,
    options: OptimizationOptions | None = None,
    verbose: int = 0,
) -> tuple[onnx.ModelProto, GraphLayout]:
    """Converts a graph module received by a backend; returns the model and its layout.

    The ONNX outputs are the ``tensor`` and ``int`` outputs of the layout, in order.
    """
    layout = graph_layout(gm)
    if exporter == "custom":
        kept = [k in ("tensor", "int") for k in layout.outputs]
        gm = _drop_outputs(gm, kept)
        names = [f"output_{i}" for i, k in enumerate(kept) if k]
        onx = to_onnx(
            gm,
            tuple(args),
            input_names=list(layout.input_names),
            options=options,
            target_opset=target_opset,
            verbose=verbose,
            output_names=names,
        )
    elif exporter == "dynamo":
        onx = _torch_onnx_export(gm, args, target_opset, verbose)
    else:
        raise ValueError(f"unknown exporter {exporter!r}, expected one of {EXPORTERS}")
    return onx, layout


def _drop_outputs(gm: torch.fx.GraphModule, kept: list[bool]) -> torch.fx.GraphModule:
    """A copy of ``gm`` whose output node only keeps the outputs marked in ``kept``
    (None outputs and python constants do not go through onnxruntime)."""
    if all(kept):
        return gm
    graph = torch.fx.Graph()
    env = {}
    for node in gm.graph.nodes:
        if node.op == "output":
            values = node.args[0]
            values = values if isinstance(values, (list, tuple)) else [values]
            graph.output(tuple(env[v.name] for v, k in zip(values, kept) if k))
        else:
            env[node.name] = graph.node_copy(node, lambda n: env[n.name])
    return torch.fx.GraphModule(gm, graph)


def _torch_onnx_export(gm, args, target_opset, verbose):
    """torch.onnx.export: a second capture of the graph module with torch.export."""
    if any(isinstance(a, torch.SymInt) for a in args):
        raise NotImplementedError(
            "exporter='dynamo' (torch.onnx.export) cannot export a graph with SymInt "
            "inputs (torch.export refuses them): use exporter='custom' "
            "(ONNXRT_CHANGE_REWRITER=1 or unset) for dynamic graphs"
        )
    prog = torch.onnx.export(
        gm,
        tuple(args),
        dynamo=True,
        opset_version=target_opset or 18,
        verbose=bool(verbose),
        optimize=True,
    )
    return prog.model_proto


def graph_signature(gm: torch.fx.GraphModule, args, settings: tuple) -> str:
    """A key identifying the graph, its inputs (dtype, shape or symbolic shape, device)
    and the backend settings: two calls with the same key get the same ONNX model."""
    h = hashlib.sha256(gm.code.encode())
    for node in gm.graph.nodes:
        if node.op == "placeholder":
            h.update(repr(_value_signature(node.meta.get("val"))).encode())
        elif node.op == "get_attr":
            value = gm
            for part in node.target.split("."):
                value = getattr(value, part)
            if isinstance(value, torch.Tensor):
                h.update(repr(_value_signature(value)).encode())
                h.update(
                    value.detach().cpu().contiguous().view(-1).view(torch.uint8).numpy().tobytes()
                )
    for a in args:
        h.update(repr(_value_signature(a)).encode())
    h.update(repr(settings).encode())
    return h.hexdigest()


def _value_signature(value):
    if isinstance(value, torch.Tensor):
        return ("T", str(value.dtype), tuple(str(d) for d in value.shape), value.device.type)
    if isinstance(value, (torch.SymInt, torch.SymFloat, torch.SymBool)):
        return ("S", str(value.node.expr))
    return (type(value).__name__, value if isinstance(value, (int, float, bool)) else None)
