"""Typed values passed from one stage of the exporter to the next (capture to
conversion to result), so that no stage imports another one to read its output.

.. code-block:: python

    plan = InputPlan(inputs={"x": "x"})
    outputs = OutputSpec([OutputSlot("output_0"), OutputSlot("cache_updated", True)])
    print(outputs.names)  # ['output_0', 'cache_updated']
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Union

#: What ``dynamic_shapes`` may be: a dict keyed by argument name, a tuple or a list
#: (one spec per positional argument), or None (every dimension static).
DynamicShapes = Union[dict[str, Any], tuple[Any, ...], list[Any], None]


@dataclass
class InputPlan:
    """What each placeholder becomes: a graph input, an initializer or nothing."""

    inputs: dict[str, str] = field(default_factory=dict)  # placeholder -> input name
    initializers: dict[str, tuple[str, Any]] = field(default_factory=dict)
    skipped: set[str] = field(default_factory=set)


@dataclass
class ExampleInputs:
    """The example inputs checked: ``args`` a tuple, ``kwargs`` a dict."""

    args: tuple
    kwargs: dict


@dataclass
class OutputSlot:
    """One output of the captured graph: its ONNX name (None: dropped, no ONNX output);
    ``mutation``: the new value of a buffer or input the model mutates in place."""

    name: str | None
    mutation: bool = False


@dataclass
class OutputSpec:
    """Every output of the captured graph, in the graph's order."""

    slots: list[OutputSlot] = field(default_factory=list)

    @property
    def names(self) -> list[str | None]:
        """The ONNX name of every output, None for the dropped ones."""
        return [s.name for s in self.slots]

    @property
    def mutations(self) -> list[bool]:
        """For every kept output, whether it is the new value of a mutated tensor."""
        return [s.mutation for s in self.slots if s.name is not None]


@dataclass
class PreparedProgram:
    """What the capture gives the conversion: the graph module, the input plan, the
    namer of symbolic dimensions (``DimNamer``) and the outputs."""

    graph_module: Any
    plan: InputPlan
    namer: Any
    outputs: OutputSpec


@dataclass
class SerializationPlan:
    """How the model leaves the exporter, decided once from the user's options.

    :param container: ``large_model=True``: a ``ModelContainer`` is returned
    :param filename: where the model is saved, or None
    :param threshold: size in bytes from which weights go to external data
    :param weight_free: the model's weights have no data (set before the capture)
    :param external: the weights go to external data (set after the conversion)
    """

    container: bool = False
    filename: str | None = None
    threshold: int = 1024
    weight_free: bool = False
    external: bool = False

    @property
    def may_be_weight_free(self) -> bool:
        """A model without weight data can only be returned as a container or saved."""
        return self.container or bool(self.filename)

    @property
    def forces_external(self) -> bool:
        """External data whatever the size of the weights."""
        return self.container or self.weight_free


__all__ = [
    "ExampleInputs",
    "InputPlan",
    "OutputSlot",
    "OutputSpec",
    "PreparedProgram",
    "SerializationPlan",
]
