"""The converter registry: the converters of torch operators, by operator and variant.

``ConverterRegistry`` holds the built-in converters (``DEFAULT_REGISTRY``, filled
by the ``@converter`` decorators of ``aten/``). ``ConverterRegistry.layered`` puts the
user's ``Dispatcher`` on top of it
without changing it: the interpreter receives that layered registry and makes one
lookup per node, the user's converter answering first.

A converter is registered for a **variant** of its operator: ``""`` (plain tensors) or
``"complex"`` (the node reads or produces complex tensors, carried as real pairs, see
``convert/pairs.py``); ``lookup_node`` picks the variant from the node.
"""

from __future__ import annotations

import inspect
import weakref
from dataclasses import dataclass
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, Callable, Mapping, Protocol, Sequence

import torch

from .pairs import uses_complex

if TYPE_CHECKING:
    from ...xbuilder import GraphBuilder
    from .node_context import NodeContext

Converter = Callable[..., object]
#: (min_opset, converter) variants of one operator, highest min_opset first
Variants = tuple[tuple[int, Converter], ...]
#: the variant of a node reading or producing complex tensors
COMPLEX = "complex"
#: name of the keyword-only parameter receiving the node's NodeContext
CONTEXT_PARAMETER = "ctx"
# converter -> does it declare the keyword-only parameter ``ctx``
_TAKES_CONTEXT: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def takes_context(fn: Converter) -> bool:
    """Tells if converter ``fn`` declares the keyword-only parameter ``ctx``
    (``NodeContext``); the
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


def call_converter(
    fn: Converter,
    g: GraphBuilder,
    args: Sequence[Any],
    kwargs: dict[str, Any],
    ctx: NodeContext,
) -> object:
    """Calls ``fn(g, *args, **kwargs)``, with ``ctx=ctx`` if ``fn`` declares it."""
    if takes_context(fn):
        return fn(g, *args, **kwargs, **{CONTEXT_PARAMETER: ctx})
    return fn(g, *args, **kwargs)


def _expand(op: object) -> list:
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


class Registry(Protocol):
    """What the interpreter asks a registry (``ConverterRegistry`` or
    ``LayeredRegistry``)."""

    def lookup(self, op: object, opset: int, variant: str = "") -> ConverterLookup: ...

    def lookup_node(self, node: torch.fx.Node, opset: int) -> ConverterLookup: ...

    def find(self, op: object, opset: int, variant: str = "") -> Converter | None: ...


class ConverterRegistry:
    """Converters by (operator, variant), each with the lowest opset it needs.

    .. code-block:: python

        import torch
        from experimental_experiment.torch_interpreter.convert.registry import (
            ConverterRegistry)

        reg = ConverterRegistry()

        @reg.converter(torch.ops.aten.relu.default)
        def relu(g, x):
            return g.op.Relu(x)

        found = reg.lookup(torch.ops.aten.relu.default, 18)
        fn = found.converter if found else None  # found.reason says why not
    """

    def __init__(self):
        self._entries: dict[tuple[object, str], Variants] = {}

    @property
    def entries(self) -> Mapping[tuple[object, str], Variants]:
        """``{(op, variant): ((min_opset, converter), ...)}``, read-only."""
        return MappingProxyType(self._entries)

    def register(self, op: object, fn: Converter, *, min_opset: int = 1, variant: str = "") -> None:
        """Registers ``fn`` for ``op`` (an operator or a packet: every overload)."""
        takes_context(fn)
        for key in _expand(op):
            old = self._entries.get((key, variant), ())
            self._entries[(key, variant)] = tuple(
                sorted((*old, (min_opset, fn)), key=lambda e: -e[0])
            )

    def converter(
        self, *ops: object, min_opset: int = 1, variant: str = ""
    ) -> Callable[[Converter], Converter]:
        """Decorator registering the function as the converter of ``ops``
        (:func:`converter`)."""

        def register(fn: Converter) -> Converter:
            for op in ops:
                self.register(op, fn, min_opset=min_opset, variant=variant)
            return fn

        return register

    def copy(self) -> ConverterRegistry:
        """A new registry starting with the same converters; registering into one
        does not change the other."""
        new = ConverterRegistry()
        new._entries = dict(self._entries)  # the variants are tuples, shared as is
        return new

    def variants(self, op: object, variant: str = "") -> Variants:
        """The (min_opset, converter) registered for ``op``, highest min_opset first."""
        return self._entries.get((op, variant), ())

    def ops(self, variant: str = "") -> list:
        """Every operator with a converter for ``variant``, sorted by name."""
        return sorted((op for op, v in self._entries if v == variant), key=str)

    def lookup(self, op: object, opset: int, variant: str = "") -> ConverterLookup:
        """The converter of ``op`` for ``opset`` and ``variant``, or why there is none."""
        entries = self.variants(op, variant)
        for min_opset, fn in entries:
            if opset >= min_opset:
                return ConverterLookup(fn)
        if entries:
            need = min(m for m, _ in entries)
            return ConverterLookup(
                None,
                f"the converters of {op} need opset >= {need}, "
                f"the export targets opset {opset} (raise "
                "target_opset)",
            )
        if variant == COMPLEX:
            return ConverterLookup(
                None,
                (
                    f"no converter of {op} for complex tensors (complex values are real "
                    "pairs with a trailing dimension 2, see convert/pairs.py); rewrite this "
                    "step with torch.view_as_real or register a converter"
                ),
            )
        packet = getattr(op, "overloadpacket", None)
        others = sorted(
            str(k)
            for k, v in self._entries
            if v == variant and packet is not None and getattr(k, "overloadpacket", None) is packet
        )
        if others:
            return ConverterLookup(
                None, f"no converter for the overload {op}, only for {', '.join(others)}"
            )
        return ConverterLookup(None, f"no converter is registered for {op}")

    def lookup_node(self, node: torch.fx.Node, opset: int) -> ConverterLookup:
        """The converter of the FX node: the complex variant of its target when the
        node reads or produces a complex tensor."""
        return self.lookup(node.target, opset, COMPLEX if uses_complex(node) else "")

    def find(self, op: object, opset: int, variant: str = "") -> Converter | None:
        """The converter of ``op``, None if there is none."""
        return self.lookup(op, opset, variant).converter

    def layered(self, user: UserConverters | None) -> ConverterRegistry | LayeredRegistry:
        """This registry under the user's converters ``user`` (a ``Dispatcher``, or
        anything with ``find(op)``); itself if ``user`` is None."""
        return self if user is None else LayeredRegistry(self, user)


class UserConverters(Protocol):
    """What ``LayeredRegistry`` asks of the user's converters (``Dispatcher``)."""

    def find(self, op: object) -> Converter | None: ...


class LayeredRegistry:
    """The user's converters on top of a ``ConverterRegistry``, which it does not
    change: for any variant, the user's converter of an operator wins.

    :param base: the built-in converters
    :param user: the user's converters, an object with ``find(op) -> converter | None``
        (``Dispatcher``)
    """

    def __init__(self, base: ConverterRegistry, user: UserConverters):
        self.base = base
        self.user = user

    def lookup(self, op: object, opset: int, variant: str = "") -> ConverterLookup:
        fn = self.user.find(op)
        return ConverterLookup(fn) if fn is not None else self.base.lookup(op, opset, variant)

    def lookup_node(self, node: torch.fx.Node, opset: int) -> ConverterLookup:
        fn = self.user.find(node.target)
        return ConverterLookup(fn) if fn is not None else self.base.lookup_node(node, opset)

    def find(self, op: object, opset: int, variant: str = "") -> Converter | None:
        return self.lookup(op, opset, variant).converter


#: the built-in converters (``aten/``)
DEFAULT_REGISTRY = ConverterRegistry()


def converter(
    *ops: object, min_opset: int = 1, variant: str = ""
) -> Callable[[Converter], Converter]:
    """Registers the decorated function as the converter of ``ops`` in
    ``DEFAULT_REGISTRY``.

    ``ops`` are torch operator objects (``aten.relu.default``) or packets
    (``aten.relu``, every overload). A variant with a higher ``min_opset`` wins when
    the target opset allows it. ``variant="complex"`` registers the converter of nodes
    reading or producing complex tensors. A converter needing the node it converts
    (output dtype or shape, target, arguments) declares the keyword-only parameter
    ``ctx``.
    """
    return DEFAULT_REGISTRY.converter(*ops, min_opset=min_opset, variant=variant)


def lookup_converter(op: object, opset: int) -> ConverterLookup:
    """The built-in converter of ``op`` for ``opset``, or why there is none.

    .. code-block:: python

        found = lookup_converter(torch.ops.aten.relu.default, 18)
        fn = found.converter if found else None  # found.reason says why not
    """
    return DEFAULT_REGISTRY.lookup(op, opset)


def find_converter(op: object, opset: int) -> Converter | None:
    """The built-in converter of ``op`` for ``opset``, None if there is none
    (:func:`lookup_converter` also says why)."""
    return DEFAULT_REGISTRY.find(op, opset)


def registered_ops() -> list:
    """Every operator with a built-in converter, sorted by name."""
    return DEFAULT_REGISTRY.ops()
