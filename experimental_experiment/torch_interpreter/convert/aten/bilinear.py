"""nn.functional.bilinear as one Einsum."""

from __future__ import annotations

from ....xbuilder import GraphBuilder
from ..registry import converter
from ._helpers import aten


@converter(aten.bilinear.default)
def aten_bilinear(g: GraphBuilder, x1: str, x2: str, weight: str, bias: str | None = None) -> str:
    """bilinear(Tensor input1, Tensor input2, Tensor weight, Tensor? bias=None) -> Tensor

    ``y[..., o] = sum_ij x1[..., i] * weight[o, i, j] * x2[..., j] + bias[o]``"""
    y = g.op.Einsum(x1, weight, x2, equation="...i,oij,...j->...o")
    return g.op.Add(y, bias) if bias else y
