"""The user's inputs read once: how the example values bind to ``forward``, their
flattened leaves and names, ``dynamic_shapes`` checked, grouped and normalized, the
dimension names, the dynamic axes whose example size is 0 or 1. Built by
``read_user_inputs`` at the start of the capture; every later step reads it
instead of parsing the signature or ``dynamic_shapes`` again.

.. code-block:: python

    import torch
    from experimental_experiment.torch_interpreter.capture.user_inputs import (
        read_user_inputs,
    )

    inputs = read_user_inputs(torch.nn.Linear(4, 2), (torch.randn(3, 4),), {},
                              ({0: "batch"},))
    print(inputs.arg_names, inputs.dim_names)  # ['input'] {(('input',), 0): 'batch'}
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable

import torch

from ..stages import DynamicShapes
from .capture_dims import dynamic_axes_of, zero_one_of
from .dynamic_shapes import (
    argument_names,
    grouped_dynamic_shapes,
    leaf_paths,
    symbol_names,
    torch_dynamic_shapes,
)
from .input_checks import check_dynamic_shapes_axes, describe_dimension_sources
from .signature import ArgumentLayout


@dataclass
class UserInputs:
    """The example inputs and their ``dynamic_shapes``, as every step of the capture
    reads them.

    :param args: positional example values
    :param kwargs: keyword example values
    :param layout: where each value goes among the arguments of ``forward``
    :param leaves: ``(path, leaf)`` for every leaf of ``args + kwargs``
    :param spec: ``dynamic_shapes`` as the user gave it
    :param torch_spec: ``dynamic_shapes`` as torch.export takes them (names replaced by
        ``Dim.DYNAMIC``), None when not given
    :param dim_names: ``{(leaf path, axis): name}``, the names the user gave dimensions
    :param declared: ``[(path, leaf, {axis: spec})]``, the axes declared dynamic
    :param small: ``[(tensor, axis, description)]``, declared dynamic axes whose
        example size is 0 or 1
    """

    args: tuple
    kwargs: dict
    layout: ArgumentLayout
    leaves: list[tuple[tuple, Any]]
    spec: Any = None
    torch_spec: Any = None
    dim_names: dict[tuple, str] = field(default_factory=dict)
    declared: list = field(default_factory=list)
    small: list[tuple[torch.Tensor, int, str]] = field(default_factory=list)

    @property
    def values(self) -> list:
        """One value per argument: ``args`` then the values of ``kwargs``."""
        return list(self.args) + list(self.kwargs.values())

    @property
    def arg_names(self) -> list[str]:
        """One name per value: the parameter, ``xs_<i>`` for ``*xs``, the keyword."""
        return argument_names(self.layout)

    @property
    def paths(self) -> list[tuple]:
        """The path of every leaf."""
        return [p for p, _ in self.leaves]

    @property
    def leaf_names(self) -> list[str]:
        """The user-facing name of every leaf (``x``, ``cache_key_0``)."""
        return ["_".join(str(getattr(k, "key", k)) for k in p) for p in self.paths]

    def symbol_names(self, placeholders: list) -> dict[str, str]:
        """``{torch symbol: user name}`` from the placeholders of the user inputs."""
        return symbol_names(placeholders, self.paths, self.dim_names)

    def describe(self, text: str) -> str:
        """``text`` with torch's ``L['x'].size()[0]`` written with the user's names."""
        return describe_dimension_sources(text, self.dim_names, self.arg_names)


def read_user_inputs(
    model: Callable[..., Any], args: tuple, kwargs: dict, dynamic_shapes: DynamicShapes
) -> UserInputs:
    """Reads the inputs once: the signature (one :class:`ArgumentLayout`), then
    ``dynamic_shapes``, checked against the inputs and grouped by argument, the only
    form the later steps read. Raises the errors of :func:`check_dynamic_shapes_axes`
    and :func:`grouped_dynamic_shapes` for a spec that does not match the inputs."""
    layout = ArgumentLayout(model, args, kwargs)
    leaves = leaf_paths(model, args, kwargs, layout=layout)
    inputs = UserInputs(args, kwargs, layout, leaves, spec=dynamic_shapes)
    check_dynamic_shapes_axes(dynamic_shapes, inputs.arg_names, inputs.values)
    grouped = None
    if dynamic_shapes is not None:
        grouped = grouped_dynamic_shapes(dynamic_shapes, model, args, kwargs, layout=layout)
        inputs.torch_spec, inputs.dim_names = torch_dynamic_shapes(grouped, type(dynamic_shapes))
    inputs.declared = dynamic_axes_of(leaves, grouped)
    inputs.small = zero_one_of(inputs.declared)
    return inputs


__all__ = ["UserInputs", "read_user_inputs"]
