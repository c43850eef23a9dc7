"""The converter registry: one converter per torch operator object."""

from __future__ import annotations

import inspect
import weakref
from dataclasses import dataclass
from typing import Callable

import torch

Converter = Callable[..., object]

# op -> list of (min_opset, converter), highest min_opset first
_REGISTRY: dict[object, list[tuple[int, Converter]]] = {}
#: name of the keyword-only parameter receiving the node's NodeContext
CONTEXT_PARAMETER = "ctx"
# converter -> does it declare the keyword-only parameter ``ctx``
_TAKES_CONTEXT: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def takes_context(fn: Converter) -> bool:
    """Tells if converter ``fn`` declares the keyword-only parameter ``ctx``
    (:class:`NodeContext
    <experimental_experiment.torch_interpreter.convert.node_context.NodeContext>`); the
    signature is read once per function."""
    try:
        return _TAKES_CONTEXT[fn]
    except (KeyError, TypeError):
        pass
    try:
        param = inspect.signature(fn).parameters.get(CONTEXT_PARAMETER)
    except (TypeError, ValueError):  # a builtin without a signature
        param = None
    found = param is not None and param.kind is inspect.Parameter.KEYWORD_ONLY
    try:
        _TAKES_CONTEXT[fn] = found
    except TypeError:  # not weakly referenceable: read again next time
        pass
    return found


def call_converter(fn: Converter, g, args, kwargs, ctx):
    """Calls ``fn(g, *args, **kwargs)``, with ``ctx=ctx`` if ``fn`` declares it."""
    if takes_context(fn):
        return fn(g, *args, **kwargs, **{CONTEXT_PARAMETER: ctx})
    return fn(g, *args, **kwargs)


def converter(*ops, min_opset: int = 1):
    """Registers the decorated function as the converter of ``ops``.

    ``ops`` are torch operator objects (``aten.relu.default``) or packets
    (``aten.relu``, every overload). A variant with a higher ``min_opset`` wins when
    the target opset allows it. A converter needing the node it converts (output
    dtype or shape, target, arguments) declares the keyword-only parameter ``ctx``.
    """

    def register(fn: Converter) -> Converter:
        takes_context(fn)
        for op in ops:
            for key in _expand(op):
                entries = _REGISTRY.setdefault(key, [])
                entries.append((min_opset, fn))
                entries.sort(key=lambda e: -e[0])
        return fn

    return register


def _expand(op) -> list:
    if isinstance(op, torch._ops.OpOverloadPacket):
        return [getattr(op, name) for name in op.overloads()]
    return [op]


@dataclass(frozen=True)
class ConverterLookup:
    """The converter found for an operator, or the reason there is none."""

    converter: Converter | None
    reason: str = ""

    def __bool__(self) -> bool:
        return self.converter is not None


def lookup_converter(op, opset: int) -> ConverterLookup:
    """The converter of ``op`` for ``opset``, or why there is none.

    .. code-block:: python

        found = lookup_converter(torch.ops.aten.relu.default, 18)
        fn = found.converter if found else None  # found.reason says why not
    """
    entries = _REGISTRY.get(op, ())
    for min_opset, fn in entries:
        if opset >= min_opset:
            return ConverterLookup(fn)
    if entries:
        need = min(m for m, _ in entries)
        return ConverterLookup(None, f"the converters of {op} need opset >= {need}, the "
                                     f"export targets opset {opset} (raise target_opset)")
    packet = getattr(op, "overloadpacket", None)
    others = sorted(str(k) for k in _REGISTRY if packet is not None
                    and getattr(k, "overloadpacket", None) is packet)
    if others:
        return ConverterLookup(None, f"no converter for the overload {op}, only for "
                                     f"{', '.join(others)}")
    return ConverterLookup(None, f"no converter is registered for {op}")


def find_converter(op, opset: int) -> Converter | None:
    """The converter of ``op`` for ``opset``, None if there is none
    (:func:`lookup_converter` also says why)."""
    return lookup_converter(op, opset).converter


def registered_ops() -> list:
    """Every operator with a converter, sorted by name."""
    return sorted(_REGISTRY, key=str)
