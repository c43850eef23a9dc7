"""Higher-order operators: ``torch.cond`` -> If, ``scan`` -> Scan, ``while_loop`` -> Loop,
``map`` -> Scan.

torch.export keeps every branch or body as a GraphModule reached through a ``get_attr``
node; the interpreter gives it to the converter as is. Each body becomes an ONNX
**subgraph** (a GraphProto attribute), not a local function: If, Loop and Scan only take
subgraphs anyway (a function would still need a subgraph calling it), and a subgraph
sees the names of the outer graph, so lifted parameters, closures and the
``additional_inputs`` of a loop are used where they are, without copies nor extra
inputs. A body is converted by a new interpreter writing into a child builder
(:meth:`GraphBuilder.make_subgraph_builder`) sharing names, types, opsets and
initializers with the parent: names stay unique in the whole model and constants
created in a body become initializers of the main graph.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch

from ....xbuilder import GraphBuilder
from ..._torch_helper import torch_dtype_to_onnx
from ...errors import ConversionError, ExportError, user_source_line
from ...stages import InputPlan
from ..interpreter import Interpreter
from ..node_context import NodeContext
from ..registry import converter
from ._helpers import BOOL, INT64

higher_order = torch.ops.higher_order


class _BodyInterpreter(Interpreter):
    """Converts a body: placeholders are bound to given names (subgraph inputs, outer
    results or python values), the output node returns the names of the results."""

    def __init__(
        self, builder: GraphBuilder, gm: torch.fx.GraphModule, bound: list, parent: Interpreter
    ):
        super().__init__(builder, gm, InputPlan(), registry=parent.registry, namer=parent.namer)
        self._bound = list(bound)

    def placeholder(self, node: torch.fx.Node):
        return self._bound.pop(0)

    def output(self, node: torch.fx.Node, output_names) -> list:
        values = node.args[0]
        values = list(values) if isinstance(values, (list, tuple)) else [values]
        return [self.env[v.name] if isinstance(v, torch.fx.Node) else v for v in values]


class _Call:
    """The higher-order node being converted."""

    def __init__(self, ctx: NodeContext, kind: str):
        self.kind = kind
        self.node: torch.fx.Node = ctx.node
        self.interpreter: Interpreter = ctx.interpreter
        self.namer = self.interpreter.namer

    def label(self, i: int) -> str:
        """Name of the body given as the i-th argument (the get_attr target)."""
        arg = self.node.args[i]
        return arg.target if isinstance(arg, torch.fx.Node) else f"{self.node.name}_body{i}"

    def run(self, builder: GraphBuilder, gm: torch.fx.GraphModule, bound: list, label: str) -> list:
        """Converts ``gm`` into ``builder``; errors name the body and the user's line."""
        placeholders = [n for n in gm.graph.nodes if n.op == "placeholder"]
        if len(placeholders) != len(bound):
            raise ConversionError(
                f"{self.kind} body {label!r} has {len(placeholders)} inputs, "
                f"{len(bound)} values were given (node {self.node.format_node()})"
            )
        try:
            return _BodyInterpreter(builder, gm, bound, self.interpreter).run([])
        except ExportError as e:
            raise ConversionError(
                f"the {self.kind} body {label!r} (node {self.node.name!r}) could not be "
                f"converted\nfrom the user's code: {user_source_line(self.node)}\n"
                f"{type(e).__name__}: {e}"
            ) from e

    def new_input(self, child: GraphBuilder, node: torch.fx.Node, prefix: str) -> str:
        """A subgraph input typed like the body's placeholder ``node``."""
        val = node.meta.get("val")
        name = _fresh_name(child, f"{prefix}_{node.name}")
        if isinstance(val, torch.Tensor):
            return child.make_tensor_input(
                name, torch_dtype_to_onnx(val.dtype), self.namer.shape(val.shape)
            )
        if isinstance(val, (torch.SymInt, int)) and not isinstance(val, bool):
            return child.make_tensor_input(name, INT64, ())
        if isinstance(val, (torch.SymBool, bool)):
            return child.make_tensor_input(name, BOOL, ())
        raise ConversionError(
            f"{self.kind}: body input {node.name!r} has an unsupported value {type(val)}"
        )


def _fresh_name(g: GraphBuilder, prefix: str) -> str:
    name, k = prefix, 0
    while g.has_name(name):
        k += 1
        name = f"{prefix}_{k}"
    return name


def _placeholders(gm: torch.fx.GraphModule) -> list[torch.fx.Node]:
    return [n for n in gm.graph.nodes if n.op == "placeholder"]


def _as_name(g: GraphBuilder, value: Any) -> str:
    if isinstance(value, str):
        return value
    if isinstance(value, torch.Tensor):
        from ..._torch_helper import tensor_to_numpy

        return g.make_constant(tensor_to_numpy(value))
    if isinstance(value, bool):
        return g.make_constant(np.asarray(value, dtype=np.bool_))
    dtype = np.int64 if isinstance(value, int) else np.float32
    return g.make_constant(np.asarray(value, dtype=dtype))


def _subgraph(child: GraphBuilder, results: list, label: str):
    """Declares ``results`` as the subgraph outputs and returns the GraphProto.

    An output must be computed inside the subgraph: an outer name, a subgraph input,
    a constant or a repeated name goes through an Identity node.
    """
    produced = {o for node in child.nodes for o in node.output}
    outputs: list[str] = []
    for value in results:
        name = _as_name(child, value)
        if name not in produced or name in outputs:
            name = child.op.Identity(name)
        outputs.append(name)
    child.outputs = outputs
    return child.to_graph_proto(label)


def _tuple(result) -> tuple:
    return result if isinstance(result, tuple) else (result,)


@converter(higher_order.cond)
def higher_order_cond(
    g: GraphBuilder, pred, true_graph, false_graph, operands, *, ctx: NodeContext
):
    """cond(Tensor|SymBool pred, GraphModule true_fn, GraphModule false_fn,
    Tensor[] operands) -> Tensor[]"""
    call = _Call(ctx, "cond")
    pred = _as_name(g, pred)
    if g.get_type(pred) != BOOL:
        pred = g.op.Cast(pred, to=BOOL)
    branches = {}
    for attr, gm, i in [("then_branch", true_graph, 1), ("else_branch", false_graph, 2)]:
        child = g.make_subgraph_builder()
        label = call.label(i)
        results = call.run(child, gm, list(operands), label)
        branches[attr] = _subgraph(child, results, label)
    n_outputs = len(branches["then_branch"].output)
    return _tuple(g.op.If(pred, outputs=n_outputs, **branches))


@converter(higher_order.scan)
def higher_order_scan(
    g: GraphBuilder, combine_graph, init, xs, additional_inputs, *, ctx: NodeContext
):
    """scan(GraphModule combine_fn, Tensor[] init, Tensor[] xs,
    Tensor[] additional_inputs) -> Tensor[] (final carries, stacked outputs)

    torch.export already moved the scanned dimension first and flipped the inputs
    and outputs of a reverse scan: the ONNX Scan always iterates forward on axis 0.
    """
    call = _Call(ctx, "scan")
    return _scan(g, call, combine_graph, list(init), list(xs), list(additional_inputs))


@converter(higher_order.map_impl)
def higher_order_map(g: GraphBuilder, body_graph, xs, pos_args, *, ctx: NodeContext):
    """map_impl(GraphModule f, Tensor[] xs, Tensor[] pos_args) -> Tensor[]
    (a scan without carries)"""
    call = _Call(ctx, "map")
    return _scan(g, call, body_graph, [], list(xs), list(pos_args))


def _scan(g: GraphBuilder, call: _Call, gm, init: list, xs: list, extra: list) -> tuple:
    label = call.label(0)
    child = g.make_subgraph_builder()
    n_new = len(init) + len(xs)
    bound = [call.new_input(child, ph, label) for ph in _placeholders(gm)[:n_new]]
    results = call.run(child, gm, bound + extra, label)
    body = _subgraph(child, results, label)
    inputs = [_as_name(g, v) for v in init + xs]
    return _tuple(g.op.Scan(*inputs, body=body, num_scan_inputs=len(xs), outputs=len(results)))


@converter(higher_order.while_loop)
def higher_order_while_loop(
    g: GraphBuilder, cond_graph, body_graph, carried_inputs, additional_inputs, *, ctx: NodeContext
):
    """while_loop(GraphModule cond_fn, GraphModule body_fn, Tensor[] carried_inputs,
    Tensor[] additional_inputs) -> Tensor[]

    torch checks the condition before every iteration, ONNX Loop computes the next
    condition at the end of its body: the first one is computed before the Loop, the
    next ones at the end of the body, on the new carried values.
    """
    call = _Call(ctx, "while_loop")
    cond_label, body_label = call.label(0), call.label(1)
    carried = [_as_name(g, v) for v in carried_inputs]
    extra = list(additional_inputs)
    cond0 = _bool_scalar(g, call.run(g, cond_graph, carried + extra, cond_label)[0])
    child = g.make_subgraph_builder()
    child.make_tensor_input(_fresh_name(g, f"{body_label}_iter"), INT64, ())
    child.make_tensor_input(_fresh_name(g, f"{body_label}_cond"), BOOL, ())
    phs = _placeholders(body_graph)[: len(carried)]
    inputs = [call.new_input(child, ph, body_label) for ph in phs]
    new = call.run(child, body_graph, inputs + extra, body_label)
    cond_next = call.run(child, cond_graph, new + extra, cond_label)[0]
    body = _subgraph(child, [_bool_scalar(child, cond_next), *new], body_label)
    return _tuple(g.op.Loop(None, cond0, *carried, body=body, outputs=len(carried)))


def _bool_scalar(g: GraphBuilder, value) -> str:
    """The condition of a Loop: a bool tensor with one element."""
    name = _as_name(g, value)
    return name if g.get_type(name) == BOOL else g.op.Cast(name, to=BOOL)
