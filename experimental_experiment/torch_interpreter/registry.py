"""The converter registry: one converter per torch operator object."""

from __future__ import annotations

from typing import Callable

import torch

Converter = Callable[..., object]

# op -> list of (min_opset, converter), highest min_opset first
_REGISTRY: dict[object, list[tuple[int, Converter]]] = {}


def converter(*ops, min_opset: int = 1):
    """Registers the decorated function as the converter of ``ops``.

    ``ops`` are torch operator objects (``aten.relu.default``) or packets
    (``aten.relu``, every overload). A variant with a higher ``min_opset`` wins when
    the target opset allows it.
    """

    def register(fn: Converter) -> Converter:
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


def find_converter(op, opset: int) -> Converter | None:
    """The converter of ``op`` for ``opset``, None if there is none."""
    for min_opset, fn in _REGISTRY.get(op, ()):
        if opset >= min_opset:
            return fn
    return None


def registered_ops() -> list:
    """Every operator with a converter, sorted by name."""
    return sorted(_REGISTRY, key=str)
