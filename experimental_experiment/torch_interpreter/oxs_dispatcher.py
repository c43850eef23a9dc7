"""A dispatcher whose converters may also be onnxscript functions."""

from __future__ import annotations

from typing import Callable

from .convert.dispatcher import Dispatcher


class OxsDispatcher(Dispatcher):
    """Like :class:`Dispatcher`, but a converter may be an onnxscript function.

    An onnxscript function (decorated with ``@onnxscript.script()``) becomes a local
    function of the model, called with the node's tensor inputs; python scalars
    and lists are given as its attributes. Plain python converters are kept as is.

    :param registered_functions: ``{operator: converter}`` as :class:`Dispatcher` takes
        them, a converter being a python function or an onnxscript function
    :param verbose: verbosity

    .. code-block:: python

        import onnxscript
        from onnxscript import opset18 as op
        from experimental_experiment.torch_interpreter.oxs_dispatcher import OxsDispatcher

        @onnxscript.script(onnxscript.values.Opset("custom", 1))
        def my_relu(x):
            return op.Max(x, op.CastLike(0, x))

        dispatcher = OxsDispatcher({torch.ops.aten.relu.default: my_relu})
    """

    def wrap(self, fn: Callable) -> Callable:
        if not hasattr(fn, "to_function_proto"):
            return fn
        proto = fn.to_function_proto()

        def call_function(g, *args, **kwargs):
            g.add_function(proto)
            inputs = [a or "" for a in args if isinstance(a, str) or a is None]
            names = list(proto.attribute) + [a.name for a in proto.attribute_proto]
            values = [a for a in args if not isinstance(a, str) and a is not None]
            attrs = dict(zip(names, values))
            attrs.update(kwargs)
            return g.make_node(proto.name, inputs, len(proto.output), domain=proto.domain, **attrs)

        call_function.__name__ = f"oxs_{proto.name}"
        return call_function
