"""Where each ONNX node comes from: the FX node, its aten op and the user's line,
written in the node's ``metadata_props`` (read back by
:mod:`experimental_experiment.investigate.discrepancies`)."""

from __future__ import annotations

import torch
from onnx import NodeProto

from ..errors import user_source_line

FX_NODE = "fx_node"  # name of the FX node
FX_TARGET = "fx_target"  # the aten op it calls
SOURCE = "source"  # the user's line ("File ..., line N, in f: code")


def _one_line(node: torch.fx.Node) -> str:
    text = user_source_line(node)
    return " ".join(part.strip() for part in text.splitlines()) if text else ""


def tag_nodes(nodes: list[NodeProto], node: torch.fx.Node) -> None:
    """Adds the FX node's name, target and source line to ``nodes`` (the ONNX nodes
    its converter created); a node already tagged keeps its first origin."""
    if not nodes:
        return
    values = {FX_NODE: node.name, FX_TARGET: str(node.target), SOURCE: _one_line(node)}
    for onnx_node in nodes:
        if any(p.key == FX_NODE for p in onnx_node.metadata_props):
            continue
        for key, value in values.items():
            prop = onnx_node.metadata_props.add()
            prop.key, prop.value = key, value


def node_origin(node: NodeProto) -> dict[str, str]:
    """The metadata :func:`tag_nodes` wrote (empty if none)."""
    return {p.key: p.value for p in node.metadata_props if p.key in (FX_NODE, FX_TARGET, SOURCE)}
