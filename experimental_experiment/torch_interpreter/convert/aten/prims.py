"""``prims`` operators that aot_autograd leaves in the graphs a backend receives."""

from __future__ import annotations

import torch

from ....xbuilder import GraphBuilder
from ..node_context import NodeContext
from ..registry import converter
from ._helpers import cast_to

prims = torch.ops.prims


@converter(prims.convert_element_type.default)
def prims_convert_element_type(g: GraphBuilder, x, dtype, *, ctx: NodeContext):
    """convert_element_type(Tensor a, ScalarType dtype) -> Tensor"""
    return cast_to(g, x, ctx.dtype())
