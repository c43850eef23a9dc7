"""Errors raised by the graph builder."""

from ..errors import ExportError


class GraphBuilderError(ExportError):
    """The graph being built is inconsistent (unknown name, wrong argument...)."""
