"""Errors raised by the graph builder."""


class GraphBuilderError(RuntimeError):
    """The graph being built is inconsistent (unknown name, wrong argument...)."""
