"""Higher-order operators torch.export leaves around plain code: inlined."""

from __future__ import annotations

import torch

from ....xbuilder import GraphBuilder
from ...errors import UnsupportedOpError
from ...stages import InputPlan
from ..interpreter import Interpreter
from ..node_context import NodeContext
from ..registry import converter


class _Inliner(Interpreter):
    """Converts a submodule's nodes into the same builder, its placeholders bound to
    the given names; returns the names of its outputs."""

    def __init__(self, g: GraphBuilder, gm: torch.fx.GraphModule, inputs, parent: Interpreter):
        super().__init__(g, gm, InputPlan(), registry=parent.registry, namer=parent.namer)
        self._inputs = list(inputs)

    def placeholder(self, node: torch.fx.Node):
        return self._inputs.pop(0)

    def output(self, node: torch.fx.Node, output_names):
        values = node.args[0]
        values = values if isinstance(values, (list, tuple)) else [values]
        return [self.env[v.name] if isinstance(v, torch.fx.Node) else v for v in values]


def inline_submodule(
    g: GraphBuilder, submod: torch.fx.GraphModule, args, *, ctx: NodeContext
) -> tuple:
    """Converts ``submod(*args)`` in place; returns its outputs' names."""
    return tuple(_Inliner(g, submod, args, ctx.interpreter).run([]))


@converter(torch.ops.higher_order.wrap_with_set_grad_enabled)
def wrap_with_set_grad_enabled(g: GraphBuilder, enabled: bool, submod, *args, ctx: NodeContext):
    """wrap_with_set_grad_enabled(bool enabled, GraphModule body, *args) -> tuple

    A block run under ``torch.no_grad()`` / ``torch.enable_grad()``: the grad mode
    does not change what inference computes, the body is inlined."""
    return inline_submodule(g, submod, args, ctx=ctx)


@converter(torch.ops.higher_order.wrap_with_autocast)
def wrap_with_autocast(
    g: GraphBuilder,
    device_type: str,
    dtype,
    enabled: bool,
    cache_enabled,
    submod,
    *args,
    ctx: NodeContext,
):
    """wrap_with_autocast(str device_type, dtype, bool enabled, bool cache_enabled,
    GraphModule body, *args) -> tuple

    Only ``torch.autocast(..., enabled=False)`` is supported (inlined): an enabled
    autocast changes dtypes at dispatch time without leaving casts in the body."""
    if enabled:
        raise UnsupportedOpError(
            f"torch.autocast({device_type!r}, dtype={dtype}) enabled in the model: the "
            "captured body has no explicit casts; export without autocast"
        )
    return inline_submodule(g, submod, args, ctx=ctx)
