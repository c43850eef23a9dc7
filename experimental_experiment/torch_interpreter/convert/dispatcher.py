"""User overrides of converters, for one export only."""

from __future__ import annotations

from typing import Callable

import torch

from .registry import _expand, takes_context


class Dispatcher:
    """Converters given by the user, tried before the built-in ones.

    :param registered_functions: ``{op: converter}``; ``op`` is a torch operator
        (``torch.ops.mylib.myop.default`` or the packet ``torch.ops.mylib.myop``), the
        object :func:`torch.library.custom_op` returns, or the operator's qualified name
        (``"mylib::myop"`` for every overload, ``"mylib::myop.default"`` for one);
        ``converter(g, *args, **kwargs)`` returns the output name(s)
    :param verbose: verbosity

    A converter receives the builder ``g`` then the operator's arguments in the order of
    its schema (tensors as ONNX names, python scalars as they are). It returns one name,
    or a tuple of names for several outputs. For an operator mutating some of its inputs
    (``mutates_args=("x",)``), it returns the operator's outputs followed by the new
    values of the mutated inputs, in the schema's order (just the new value of ``x``
    when the operator returns nothing). A converter declaring the keyword-only
    parameter ``ctx`` also receives the node's :class:`NodeContext
    <experimental_experiment.torch_interpreter.convert.node_context.NodeContext>`
    (``ctx.node``, ``ctx.dtype(i)``, ``ctx.shape(i)``).

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
        self._by_name: dict[str, Callable] = {}
        for op, fn in (registered_functions or {}).items():
            self.register(op, fn)

    def register(self, op: object, fn: Callable) -> None:
        """Adds or replaces the converter of ``op`` (an operator object or its name)."""
        if isinstance(op, str):
            if "::" not in op:
                raise TypeError(
                    f"Dispatcher key {op!r} is not a qualified operator name: write "
                    "'namespace::name' or 'namespace::name.overload', or give the "
                    "operator object (torch.ops.mylib.myop.default)"
                )
            self._by_name[op] = self.wrap(fn)
            takes_context(self._by_name[op])
            return
        op = getattr(op, "_opoverload", op)  # torch.library.custom_op's CustomOpDef
        if not is_torch_op(op) and not isinstance(op, torch._ops.HigherOrderOperator):
            raise TypeError(f"Dispatcher keys are torch operators, not {type(op).__name__}")
        fn = self.wrap(fn)
        takes_context(fn)
        for key in _expand(op):
            self._functions[key] = fn

    def wrap(self, fn: Callable) -> Callable:
        """Hook for subclasses turning another kind of function into a converter."""
        return fn

    def find(self, op: object) -> Callable | None:
        """The user's converter for ``op``, None if there is none."""
        fn = self._functions.get(op)
        if fn is not None or not self._by_name:
            return fn
        schema = getattr(op, "_schema", None)
        if schema is None:
            return None
        overload = getattr(op, "_overloadname", "") or "default"
        return self._by_name.get(f"{schema.name}.{overload}", self._by_name.get(schema.name))

    def __contains__(self, op: object) -> bool:
        return self.find(op) is not None


def is_torch_op(obj: object) -> bool:
    return isinstance(obj, (torch._ops.OpOverload, torch._ops.OpOverloadPacket))
