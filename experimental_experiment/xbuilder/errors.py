"""Errors raised by the graph builder."""

from ..errors import ExportError


class GraphBuilderError(ExportError):
    """The graph being built is inconsistent (unknown name, wrong argument...).

    Cause: a converter or a pattern used a value name the graph does not have, gave
    a name twice, or passed an attribute the builder cannot encode.

    Fix: in your own converter, use the names the builder gives (its arguments and
    what ``g.op.X`` returns), never hand-written strings (:ref:`l-design-extending`)."""
