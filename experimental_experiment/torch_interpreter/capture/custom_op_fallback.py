"""Custom operators with no converter: their Python implementation is traced instead.

A ``torch.library.custom_op`` stays one node in the captured graph (or one
``auto_functionalized`` node when it mutates its inputs). When neither the user's
Dispatcher nor the registry converts it, :func:`inline_custom_ops` captures the model
again while the operator calls its Python implementation directly: the capture records
the aten operators the implementation runs (in-place ones are functionalized as usual).
An implementation the capture cannot trace (numpy, data-dependent python) leaves the
first graph as it was, and the typed error about the missing converter stays.

.. code-block:: python

    @torch.library.custom_op("mylib::gelu_like", mutates_args=())
    def gelu_like(x: torch.Tensor, alpha: float) -> torch.Tensor:
        return x * torch.sigmoid(alpha * x)

    onx = to_onnx(model_calling_gelu_like, (x,))  # Mul, Sigmoid, Mul; a log line says so
"""

from __future__ import annotations

import contextlib
import logging
import operator
from typing import Any, Callable, Iterator

import torch

from ..convert.registry import find_converter

logger = logging.getLogger(__name__)

_AUTO_FUNCTIONALIZED = ("auto_functionalized", "auto_functionalized_v2")


def _is_custom(op) -> bool:
    return isinstance(op, torch._ops.OpOverload) and op.namespace not in (
        "aten",
        "prims",
        "_c10d_functional",
        "c10d",
        "quantized_decomposed",
    )


def unconverted_custom_ops(
    ep: torch.export.ExportedProgram,
    opset: int,
    can_convert: Callable[[object], bool] | None = None,
) -> list:
    """Custom operators the graph calls (directly or through ``auto_functionalized``)
    with no converter, in the order of their first call."""
    found: dict = {}
    for node in ep.graph.nodes:
        if node.op != "call_function" or node.target is operator.getitem:
            continue
        op = node.target
        if getattr(op, "__name__", "") in _AUTO_FUNCTIONALIZED and node.args:
            op = node.args[0]
        if not _is_custom(op) or (can_convert is not None and can_convert(op)):
            continue
        if find_converter(op, opset) is None:
            found.setdefault(op, None)
    return list(found)


def python_implementation(op: torch._ops.OpOverload) -> Callable | None:
    """The function decorated by ``torch.library.custom_op``, None if unknown."""
    from torch._library.custom_ops import OPDEFS

    opdef = OPDEFS.get(op._schema.name)
    return getattr(opdef, "_init_fn", None)


@contextlib.contextmanager
def calling_implementations(
    ops: dict[torch._ops.OpOverload, Callable[..., Any]],
) -> Iterator[None]:
    """Within the context, ``op(...)`` (``torch.ops.ns.name`` or the decorated function)
    runs the Python implementation ``ops[op]`` instead of dispatching to the kernel."""
    saved = []
    try:
        for op, impl in ops.items():
            for obj in (op, op.overloadpacket):
                saved.append((obj, obj.__dict__.get("_op")))
                object.__setattr__(obj, "_op", impl)
        yield
    finally:
        for obj, old in reversed(saved):
            if old is None:
                obj.__dict__.pop("_op", None)
            else:
                object.__setattr__(obj, "_op", old)


def inline_custom_ops(
    ep: torch.export.ExportedProgram,
    recapture: Callable[[], object],
    opset: int,
    can_convert: Callable[[object], bool] | None = None,
    record: list | None = None,
) -> torch.export.ExportedProgram:
    """Captures again (``recapture()``) with the custom operators of ``ep`` which have
    no converter replaced by their Python implementation; returns ``ep`` unchanged when
    there is none or when the new capture fails. ``record`` receives ``(operator,
    reason)`` for every inlined operator (the export report's decompositions)."""
    ops = {op: python_implementation(op) for op in unconverted_custom_ops(ep, opset, can_convert)}
    ops = {op: impl for op, impl in ops.items() if impl is not None}
    if not ops:
        return ep
    names = ", ".join(str(op) for op in ops)
    try:
        with calling_implementations(ops):
            new_ep = recapture()
    except Exception as e:  # the implementation is not traceable: the error stays
        logger.info(
            "the Python implementation of %s could not be traced (%s: %s); a converter is needed",
            names,
            type(e).__name__,
            str(e).strip().splitlines()[0] if str(e).strip() else "",
        )
        return ep
    for op in ops:
        if record is not None:
            record.append(
                (
                    str(op),
                    "custom op with no converter: its Python "
                    "implementation was traced (a Dispatcher entry keeps "
                    "it as one node)",
                )
            )
        logger.warning(
            "custom op %s has no converter: its Python implementation was traced and "
            "inlined into aten operators. To keep it as one node, register a converter: "
            "to_onnx(..., dispatcher=Dispatcher({torch.ops.%s.%s.%s: fn}))",
            op,
            op.namespace,
            op._schema.name.split("::")[-1],
            op._overloadname,
        )
    return new_ep
