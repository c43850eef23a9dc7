"""Matches initializer names to checkpoint tensor names: the weight's recorded source,
the exact name, then seed 002's rules (dots become underscores, then one name ends with
the other, at a ``_`` boundary, when only one candidate does)."""

from __future__ import annotations


def _norm(name: str) -> str:
    return name.replace(".", "_").replace("/", "_")


def _suffixes(name: str):
    """The name and every suffix starting after a ``_``."""
    yield name
    for i, c in enumerate(name):
        if c == "_" and i + 1 < len(name):
            yield name[i + 1 :]


def match_names(
    initializers: dict[str, str | list[str] | None], checkpoint: list[str]
) -> tuple[dict[str, tuple[str, str]], dict[str, list[str]]]:
    """Returns ``({initializer: (checkpoint name, rule)}, {initializer: candidates})``,
    the second for names several checkpoint tensors could fill (left unfilled).

    ``initializers`` maps every initializer name to the weight name it was exported from
    (or None, or the list of the names of a tied weight). Rules, in order: ``source``,
    ``exact``, ``underscore``, ``suffix``. A checkpoint tensor fills at most one
    initializer.

    :param initializers: ``{initializer name: source weight name, None or list of names}``
    :param checkpoint: the names of the tensors the checkpoints hold
    :return: the matched names with the rule which matched them, and the ambiguous ones

    .. code-block:: python

        from experimental_experiment.large import match_names

        matched, ambiguous = match_names(
            {"model.layer.weight": None}, ["model.layer.weight", "lm_head.weight"])
        # matched == {"model.layer.weight": ("model.layer.weight", "exact")}
    """
    names = set(checkpoint)
    by_norm: dict[str, list[str]] = {}
    by_suffix: dict[str, list[str]] = {}
    for c in sorted(checkpoint):
        by_norm.setdefault(_norm(c), []).append(c)
        for s in _suffixes(_norm(c)):
            by_suffix.setdefault(s, []).append(c)
    matched: dict[str, tuple[str, str]] = {}
    ambiguous: dict[str, list[str]] = {}
    used: set[str] = set()
    for rule in ("source", "exact", "underscore", "suffix"):
        for init, source in initializers.items():
            if init in matched:
                continue
            cands = _candidates(rule, init, source, names, used, by_norm, by_suffix)
            cands = [c for c in cands if c not in used]
            if len(cands) == 1:
                matched[init] = (cands[0], rule)
                used.add(cands[0])
                ambiguous.pop(init, None)
            elif len(cands) > 1:
                ambiguous[init] = cands
    return matched, ambiguous


def _candidates(
    rule: str, init: str, source, names: set, used: set, by_norm: dict, by_suffix: dict
) -> list[str]:
    """Checkpoint names ``rule`` proposes for initializer ``init``."""
    if rule == "source":  # several names for a tied weight: the first found
        found = [
            c
            for c in ([source] if isinstance(source, str) else source or [])
            if c in names and c not in used
        ]
        return found[:1]
    if rule == "exact":
        return [init] if init in names else []
    if rule == "underscore":
        return by_norm.get(_norm(init), [])
    n = _norm(init)
    # the checkpoint name ends with the initializer's, or the other way
    return sorted(set(by_suffix.get(n, [])) | {c for s in _suffixes(n) for c in by_norm.get(s, [])})
