"""How the example inputs bind to the parameters of ``forward``: named parameters,
``*args`` and ``**kwargs``.

torch.export groups the values of ``*xs`` under ``xs`` (a tuple) and the values of
``**kw`` under ``kw`` (a dict). torch 2.13 does not capture a ``**kw`` forward when
``dynamic_shapes`` is given (its range constraints see the keywords twice), so the
capture runs with a ``forward`` whose signature names each keyword the example passes
(:func:`explicit_keywords`): those keywords become top-level arguments.
"""

from __future__ import annotations

import contextlib
import inspect
import logging
from typing import Any, Callable, Iterator

logger = logging.getLogger(__name__)

_P = inspect.Parameter


def parameters(model: Callable[..., Any]) -> list[inspect.Parameter] | None:
    """The parameters of ``model.forward`` (``model`` itself for a function)."""
    forward = getattr(model, "forward", model)
    try:
        return list(inspect.signature(forward).parameters.values())
    except (TypeError, ValueError):
        return None


class PathKey(tuple):
    """One step of a leaf path: ``(key, index)``, the pytree key (a dict key, an
    attribute, a flattened name like ``key_0``) and the position among the siblings.
    The user's dynamic_shapes may address the leaf either way: a dict by key, a
    registered class (a transformers cache) by a list of one entry per child."""

    def __new__(cls, key, index: int):
        return super().__new__(cls, (key, index))

    def matches(self, value: object, by_index: bool = True) -> bool:
        return value == self[0] or (
            by_index and isinstance(value, int) and not isinstance(value, bool) and value == self[1]
        )


class ArgumentLayout:
    """Where every value of ``args + kwargs`` goes among the arguments of the capture.

    * ``prefixes[i]``: ``(name,)`` for a named parameter or a keyword of ``**kw``,
      ``(xs, PathKey(j, j))`` for the j-th value of ``*xs``
    * ``bound``: the top-level argument names, in the order torch.export binds them
      (keywords of ``**kw`` are top-level, see :func:`explicit_keywords`)
    * ``var_pos``, ``var_kw``: the names of ``*xs`` and ``**kw`` (or None),
      ``extra_kw``: the keywords of the example received by ``**kw``
    """

    def __init__(self, model: Callable[..., Any], args: tuple, kwargs: dict):
        params = parameters(model)
        self.var_pos = self.var_kw = None
        self.extra_kw: list[str] = []
        if params is None:
            self.prefixes = [(f"arg{i}",) for i in range(len(args) + len(kwargs))]
            self.bound = [p[0] for p in self.prefixes]
            return
        pos = [p.name for p in params if p.kind in (_P.POSITIONAL_ONLY, _P.POSITIONAL_OR_KEYWORD)]
        self.var_pos = next((p.name for p in params if p.kind == _P.VAR_POSITIONAL), None)
        self.var_kw = next((p.name for p in params if p.kind == _P.VAR_KEYWORD), None)
        named = {p.name for p in params if p.kind in (_P.POSITIONAL_OR_KEYWORD, _P.KEYWORD_ONLY)}
        prefixes: list[tuple] = [(name,) for name in pos[: len(args)]]
        for j in range(len(args) - len(prefixes)):
            prefixes.append((self.var_pos, PathKey(j, j)) if self.var_pos else (f"args_{j}",))
        prefixes += [(k,) for k in kwargs]
        if self.var_kw:
            self.extra_kw = [k for k in kwargs if k not in named]
        self.prefixes = prefixes
        order = [p.name for p in params]
        tops = list(dict.fromkeys(p[0] for p in prefixes))
        self.bound = sorted(tops, key=lambda k: order.index(k) if k in order else len(order))

    def torch_names(self) -> list[str]:
        """The top-level names as torch.export sees the original ``forward``
        (the keywords of ``**kw`` grouped under its name)."""
        names = [n for n in self.bound if n not in self.extra_kw]
        return names + [self.var_kw] if self.extra_kw else names


@contextlib.contextmanager
def explicit_keywords(
    model: Callable[..., Any], args: tuple, kwargs: dict, layout: ArgumentLayout | None = None
) -> Iterator[None]:
    """Within the context, ``model.forward`` has a signature naming every keyword of
    ``kwargs`` that ``**kw`` would receive (keyword-only parameters), so torch.export
    sees them as top-level arguments. Nothing changes for a forward without ``**kw``
    (``layout``: the arguments' layout when already known).
    """
    layout = layout or ArgumentLayout(model, args, kwargs)
    if not layout.extra_kw or not hasattr(model, "forward"):
        yield
        return
    forward = model.forward
    params = [p for p in parameters(model) or [] if p.kind != _P.VAR_KEYWORD]
    params += [_P(k, _P.KEYWORD_ONLY) for k in layout.extra_kw]

    def call(*a, **kw):
        return forward(*a, **kw)

    call.__signature__ = inspect.Signature(params)
    logger.info("**%s receives %s: captured as keyword arguments", layout.var_kw, layout.extra_kw)
    own = model.__dict__.get("forward")
    object.__setattr__(model, "forward", call)
    try:
        yield
    finally:
        if own is None:
            del model.__dict__["forward"]
        else:
            model.__dict__["forward"] = own
