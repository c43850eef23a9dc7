"""Pattern sets selected by name: ``get_pattern_list("default+onnxruntime,-Name")``."""

from __future__ import annotations

import importlib
import re
from types import MappingProxyType

from .pattern import Pattern

#: name of a set -> (module, attribute) holding its classes; a set's module is imported
#: only when the set is asked for (importing onnxruntime's patterns is wasted time for a
#: default optimization)
_SETS = MappingProxyType(
    {
        "default": (".patterns", "DEFAULT_PATTERNS"),
        "onnxruntime": (".patterns_ort", "ORT_PATTERNS"),
        "onnxruntime_extra": (".patterns_ort", "ORT_EXTRA_PATTERNS"),
    }
)


def _pattern_set(name: str) -> list:
    module, attribute = _SETS[name]
    return list(getattr(importlib.import_module(module, __package__), attribute))


def pattern_sets() -> dict[str, list]:
    """Name of a set -> the pattern classes in it (in the order they are tried)."""
    return {name: _pattern_set(name) for name in _SETS}


def _instance(p) -> Pattern:
    return p() if isinstance(p, type) else type(p)()


def get_pattern_list(patterns: str | None = "default", *, verbose: int = 0) -> list[Pattern]:
    """Returns the patterns selected by a string.

    :param patterns: sets (``"default"``, ``"onnxruntime"``) and pattern names joined by
        ``+`` or ``,``; ``-Name`` removes a pattern (or a set); ``"none"`` or None is empty
    :param verbose: verbosity given to every pattern
    :return: new pattern instances, in a deterministic order

    .. code-block:: python

        from experimental_experiment.xoptim import get_pattern_list

        pats = get_pattern_list("default+onnxruntime,-CastCastToCast")
    """
    if not patterns or patterns == "none":
        return []
    tokens = [
        (sign, token)
        for sign, token in re.findall(r"([+,-]?)\s*([A-Za-z_][A-Za-z_0-9]*)", patterns)
        if token != "none"
    ]
    if all(token in _SETS for _, token in tokens):  # only sets: only their modules
        sets = {token: _pattern_set(token) for _, token in tokens}
    else:
        sets = pattern_sets()
    known = {}
    for classes in sets.values():
        for c in classes:
            known.setdefault(_instance(c).name, c)
    selected: list = []
    for sign, token in tokens:
        if token in sets:
            group = sets[token]
        elif token in known:
            group = [known[token]]
        else:
            raise ValueError(
                f"unknown pattern or set {token!r}, sets are {sorted(sets)}, "
                f"patterns are {sorted(known)}"
            )
        names = {_instance(c).name for c in group}
        if sign == "-":
            selected = [c for c in selected if _instance(c).name not in names]
        else:
            selected.extend(
                c for c in group if _instance(c).name not in {_instance(s).name for s in selected}
            )
    result = [_instance(c) for c in selected]
    for r in result:
        r.verbose = verbose
    return result
