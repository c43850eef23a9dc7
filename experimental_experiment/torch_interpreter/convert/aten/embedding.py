"""Embedding lookups."""

from __future__ import annotations

from ....xbuilder import GraphBuilder
from ..registry import converter
from ._helpers import aten


@converter(aten.embedding.default)
def aten_embedding(
    g: GraphBuilder,
    weight: str,
    indices: str,
    padding_idx: int | str = -1,
    scale_grad_by_freq: bool = False,
    sparse: bool = False,
) -> str:
    """embedding(Tensor weight, Tensor indices, SymInt padding_idx=-1,
    bool scale_grad_by_freq=False, bool sparse=False) -> Tensor

    padding_idx only changes the gradient: a row lookup at inference.
    """
    return g.op.Gather(weight, indices, axis=0)
