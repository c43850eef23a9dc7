"""What a converter may know about the FX node it converts.

A converter which needs more than its arguments (the expected output dtype or
shape, the node's target or arguments, the running interpreter) declares the
keyword-only parameter ``ctx``; the interpreter then passes a :class:`NodeContext`
(:func:`experimental_experiment.torch_interpreter.convert.registry.takes_context`):

.. code-block:: python

    @converter(aten.zeros_like.default)
    def aten_zeros_like(g, x, dtype=None, *, ctx: NodeContext):
        return g.op.ConstantOfShape(g.op.Shape(x), value=zero(ctx.dtype()))
"""

from __future__ import annotations

from typing import Any

import torch

from .._dims import DimNamer
from .._torch_helper import torch_dtype_to_onnx


class NodeContext:
    """The FX node a converter converts, its expected outputs and the interpreter.

    :param node: the FX node
    :param namer: renders symbolic dimensions
    :param interpreter: the running Interpreter (converters of higher-order ops call
        back into it)

    A converter receives it when it declares the keyword-only parameter ``ctx``:

    .. code-block:: python

        import torch
        from experimental_experiment.torch_interpreter import Dispatcher, to_onnx

        def my_relu(g, x, *, ctx):
            # ctx.node: the FX node, ctx.dtype(): the ONNX type of its first output,
            # ctx.shape(): its shape (strings for the dynamic dimensions)
            return g.op.Max(x, g.op.Cast(0.0, to=ctx.dtype()))

        dispatcher = Dispatcher({torch.ops.aten.relu.default: my_relu})
        onx = to_onnx(torch.nn.ReLU(), (torch.randn(3),), dispatcher=dispatcher)
    """

    # ``Any``: the Interpreter imports this module, and converters hand it on as an
    # Interpreter (a narrower Protocol would not be assignable to it)
    def __init__(self, node: torch.fx.Node, namer: DimNamer, interpreter: Any = None) -> None:
        self.node = node
        self.namer = namer
        self.interpreter = interpreter

    @property
    def val(self) -> Any:
        """``node.meta["val"]``: the fake value(s) torch computed for the node."""
        return self.node.meta.get("val")

    def _val(self, i: int):
        val = self.val
        return val[i] if isinstance(val, (list, tuple)) else val

    def torch_dtype(self, i: int = 0) -> torch.dtype:
        """Torch dtype of the i-th output."""
        val = self._val(i)
        if isinstance(val, torch.Tensor):
            return val.dtype
        if isinstance(val, (bool, torch.SymBool)):
            return torch.bool
        if isinstance(val, (int, torch.SymInt)):
            return torch.int64
        return torch.float32

    def dtype(self, i: int = 0) -> int:
        """ONNX element type of the i-th output."""
        return torch_dtype_to_onnx(self.torch_dtype(i))

    def shape(self, i: int = 0) -> tuple:
        """Shape of the i-th output: ints and strings for symbolic dims."""
        return self.namer.shape(self._val(i).shape)
