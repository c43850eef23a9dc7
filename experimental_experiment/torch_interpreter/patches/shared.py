"""Process-wide state of the patches: applied once while any user needs them, restored
in reverse order when the last user leaves, whatever the order in which threads enter
and leave.

A patch replaces a module or class attribute: it is global to the process, so two
threads (or two nested ``with`` blocks) sharing it cannot each save and restore the
attribute on their own (the second one would save the first one's replacement and put it
back for good). Here every *layer* (a list of ``Patch``, or a context such as
the cache registration) is entered once, counted, and kept on one stack:

* a user entering takes a reference on the layers already holding what it needs and
  enters a new layer on top for what is missing;
* a user leaving drops its references, then the layers on top of the stack nobody
  uses any more are exited, the last entered first. A layer nobody uses but below a
  layer still in use stays applied until that one is exited: attributes are never
  restored out of order;
* a layer failing on entry undoes what it applied before the exception leaves, and
  the references already taken by that user are dropped the same way.

A lock guards the bookkeeping only, never the user's code: threads export in parallel.
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import threading
from typing import Any, Callable

from .apply import Patch, apply_patches

logger = logging.getLogger(__name__)

_LOCK = threading.RLock()


@dataclasses.dataclass
class _Layer:
    key: tuple  # ("context", name) or ("patches", source, (id(owner), attribute)...)
    names: list[str]
    stack: contextlib.ExitStack
    value: Any = None
    users: int = 0


# the layers applied now, the first entered first
_LAYERS: list[_Layer] = []


def active_names() -> list[str]:
    """The names of what every layer applied, in the order they were applied."""
    with _LOCK:
        return [name for layer in _LAYERS for name in layer.names]


def _enter(
    key: tuple, names: Callable[[Any], list[str]], context: contextlib.AbstractContextManager
) -> _Layer:
    """Enters ``context`` as a new layer on top of the stack (the lock is held); a
    failure leaves nothing applied (the context undoes its partial work).
    ``names(value)`` lists what the context applied from what it yields."""
    stack = contextlib.ExitStack()
    with stack:
        value = stack.enter_context(context)
        layer = _Layer(key, list(names(value)), stack.pop_all(), value)
    _LAYERS.append(layer)
    return layer


def _release(held: list[_Layer]) -> None:
    """Drops one reference on every layer of ``held`` and exits the unused layers on
    top of the stack (last entered first); raises the first error after all exits."""
    for layer in held:
        layer.users -= 1
    errors = []
    while _LAYERS and _LAYERS[-1].users <= 0:
        layer = _LAYERS.pop()
        try:
            layer.stack.close()
        except BaseException as e:  # noqa: BLE001 - the other layers are still restored
            errors.append(e)
    if errors:
        raise errors[0]


class SharedPatches:
    """What one user of the shared patches holds (see the module's docstring)."""

    def __init__(self):
        self.held: list[_Layer] = []

    def context(
        self,
        key: str,
        factory: Callable[[], contextlib.AbstractContextManager],
        names: Callable[[Any], list[str]],
    ) -> Any:
        """Takes a reference on the layer ``key`` (entering ``factory()`` if no user
        holds it); returns what the context yields; ``names(value)``: what it applied
        (:func:`active_patches <experimental_experiment.torch_interpreter.patches.active_patches>`
        lists them)."""
        with _LOCK:
            layer = next((la for la in _LAYERS if la.key == ("context", key)), None)
            if layer is None:
                layer = _enter(("context", key), names, factory())
            layer.users += 1
            self.held.append(layer)
            return layer.value

    def patches(
        self, source: str, get_patches: Callable[[], list[Patch]], verbose: int = 0
    ) -> None:
        """Takes a reference on every layer of patches made for ``source``; the
        patches of ``get_patches()`` (called under the lock) that no layer holds yet
        (a model module imported since) are applied as a new layer."""
        with _LOCK:
            mine = [la for la in _LAYERS if la.key[:2] == ("patches", source)]
            applied = {k for la in _LAYERS if la.key[:1] == ("patches",) for k in la.key[2:]}
            missing = [p for p in get_patches() if (id(p.owner), p.attribute) not in applied]
            for layer in mine:
                layer.users += 1
                self.held.append(layer)
            if missing:
                key = ("patches", source, *((id(p.owner), p.attribute) for p in missing))
                layer = _enter(key, lambda done: done, apply_patches(missing, verbose=verbose))
                layer.users += 1
                self.held.append(layer)

    def release(self) -> None:
        """Drops every reference this user holds."""
        with _LOCK:
            held, self.held = self.held, []
            _release(held)


@contextlib.contextmanager
def shared_patches():
    """Yields a :class:`SharedPatches`; every reference it took is dropped on exit,
    also when taking one failed."""
    user = SharedPatches()
    try:
        yield user
    finally:
        user.release()
