"""A temporary patch (``Patch``) and ``apply_patches``, which applies a list
of them and restores the originals; :mod:`.shared` shares them between threads."""

from __future__ import annotations

import builtins
import contextlib
import dataclasses
import logging
import types
from typing import Any, Callable

logger = logging.getLogger(__name__)


@dataclasses.dataclass(frozen=True)
class Patch:
    """Replaces ``owner.attribute`` by ``factory(original)`` while active.

    :param owner: a module or a class
    :param attribute: name of the attribute to replace
    :param factory: builds the replacement from the original value
    :param doc: the error it fixes (shown with ``verbose``)
    """

    owner: Any
    attribute: str
    factory: Callable[[Any], Any]
    doc: str = ""

    @property
    def name(self) -> str:
        owner = getattr(self.owner, "__name__", type(self.owner).__name__)
        return f"{owner}.{self.attribute}"


def _owns(owner: Any, attribute: str) -> bool:
    """Whether ``owner`` holds ``attribute`` itself (a class may inherit it, a module
    may only see it among the builtins, ``len`` for example)."""
    if isinstance(owner, (type, types.ModuleType)):
        return attribute in vars(owner)
    return True


def _current(owner: Any, attribute: str, had: bool) -> Any:
    """The value ``owner.attribute`` has now: a builtin for a module that does not
    define it (the name its functions see)."""
    if not had and isinstance(owner, types.ModuleType):
        return getattr(builtins, attribute)
    return getattr(owner, attribute)


@contextlib.contextmanager
def apply_patches(patches: list[Patch], verbose: int = 0):
    """Applies the patches, restores every original on exit, even on an exception
    (also when one of them fails to apply); yields the names of the patches applied.

    Not shared between threads: :func:`bypass_export_some_errors
    <experimental_experiment.torch_interpreter.onnx_export_errors.bypass_export_some_errors>`
    applies them through :mod:`.shared`, which counts its users."""
    done: list[tuple[Patch, Any, bool]] = []
    try:
        for patch in patches:
            had = _owns(patch.owner, patch.attribute)
            original = _current(patch.owner, patch.attribute, had)
            # restored as stored: a staticmethod stays one
            stored = vars(patch.owner)[patch.attribute] if had else original
            setattr(patch.owner, patch.attribute, patch.factory(original))
            done.append((patch, stored, had))
            if verbose:
                logger.warning("[bypass_export_some_errors] patched %s", patch.name)
        yield [p.name for p, _, _ in done]
    finally:
        for patch, original, had in reversed(done):
            if had:
                setattr(patch.owner, patch.attribute, original)
            else:
                # the attribute came from a base class (or the builtins of a module):
                # remove the override
                delattr(patch.owner, patch.attribute)
