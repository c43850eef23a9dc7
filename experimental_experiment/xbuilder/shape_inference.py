"""The builder's shape and type rules, public for the passes that add nodes to a builder
outside its ``make_node`` (the optimizer inside subgraphs and local functions)."""

from ._shape_rules import infer_node

__all__ = ["infer_node"]
