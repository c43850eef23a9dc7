"""Helpers about FX graph modules given by torch.compile backends."""

from __future__ import annotations

import torch


def create_input_names(graph_module: torch.fx.GraphModule, args) -> list[str]:
    """Input names for ``graph_module`` called with ``args``: its placeholders' names.

    .. code-block:: python

        names = create_input_names(graph_module, args)
        onx = to_onnx(graph_module, tuple(args), input_names=names)
    """
    placeholders = [n for n in graph_module.graph.nodes if n.op == "placeholder"]
    if len(placeholders) != len(args):
        raise ValueError(
            f"the graph module has {len(placeholders)} placeholders but {len(args)} "
            "arguments were given"
        )
    return [p.name for p in placeholders]
