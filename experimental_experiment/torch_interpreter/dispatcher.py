"""User overrides of converters, for one export only."""

from __future__ import annotations

from typing import Callable

import torch

from .registry import _expand


class Dispatcher:
    """Converters given by the user, tried before the built-in ones.

    :param registered_functions: ``{op: converter}``; ``op`` is a torch operator
        (``torch.ops.mylib.myop.default`` or the packet ``torch.ops.mylib.myop``)
        and ``converter(g, *args, **kwargs)`` returns the output name(s)
    :param verbose: verbosity

    .. code-block:: python

        import torch
        from experimental_experiment.torch_interpreter import Dispatcher, to_onnx

        def my_relu(g, x):
            return g.op.Max(x, 0.0)

        dispatcher = Dispatcher({torch.ops.aten.relu.default: my_relu})
        onx = to_onnx(torch.nn.ReLU(), (torch.randn(3),), dispatcher=dispatcher)
    """

    def __init__(self, registered_functions: dict | None = None, verbose: int = 0):
        self.verbose = verbose
        self._functions: dict[object, Callable] = {}
        for op, fn in (registered_functions or {}).items():
            self.register(op, fn)

    def register(self, op, fn: Callable) -> None:
        """Adds or replaces the converter of ``op``."""
        if isinstance(op, str):
            raise TypeError(
                f"Dispatcher keys are torch operators, not strings ({op!r}); "
                "use e.g. torch.ops.mylib.myop.default"
            )
        for key in _expand(op):
            self._functions[key] = self.wrap(fn)

    def wrap(self, fn: Callable) -> Callable:
        """Hook for subclasses turning another kind of function into a converter."""
        return fn

    def find(self, op) -> Callable | None:
        """The user's converter for ``op``, None if there is none."""
        return self._functions.get(op)

    def __contains__(self, op) -> bool:
        return op in self._functions


def is_torch_op(obj) -> bool:
    return isinstance(obj, (torch._ops.OpOverload, torch._ops.OpOverloadPacket))
