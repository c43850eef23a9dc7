"""Names of symbolic dimensions: torch symbols (s0, s1...) to the user's names."""

from __future__ import annotations

import re

import torch


class DimNamer:
    """Renders a dimension (int or SymInt) as an int or a readable string.

    :param names: ``{symbol: user name}`` e.g. ``{"s0": "batch"}``
    """

    def __init__(self, names: dict[str, str] | None = None):
        self.names = dict(names or {})
        #: expression -> text: str() of a sympy expression is slow and a graph
        #: repeats the same few dimensions thousands of times (Swin: 1.6 s)
        self._rendered: dict = {}

    def render(self, dim) -> int | str:
        if isinstance(dim, int):
            return dim
        if isinstance(dim, torch.SymInt):
            expr = dim.node.expr
            if expr.is_number:
                return int(expr)
            return self.render_expr(expr)
        return str(dim)

    def render_expr(self, expr) -> str:
        text = self._rendered.get(expr)
        if text is None:
            text = str(expr).replace(" ", "")
            if self.names:
                text = re.sub(
                    r"\b[a-z]+\d+\b", lambda m: self.names.get(m.group(0), m.group(0)), text
                )
            self._rendered[expr] = text
        return text

    def shape(self, shape) -> tuple:
        return tuple(self.render(d) for d in shape)
