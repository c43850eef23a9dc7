"""Capture errors that read in words: long symbolic expressions of torch's messages
(``((((((s100//4)) + 1)//2)) ...``, thousands of characters for Swin) become the
dimensions they are made of, and the model's line that failed is named."""

from __future__ import annotations

import linecache
import os
import re
from typing import Callable

import torch

from .shape_guards import GuardRecorder

_SYMBOL = re.compile(r"\bs\d+\b")
#: a parenthesized group longer than this is summarized
MAX_EXPRESSION = 80


def symbol_descriptions(
    recorder: GuardRecorder | None, describe: Callable[[str], str]
) -> dict[str, str]:
    """``{'s53': "x.shape[2]"}`` for the symbols of the shape environments the recorder
    saw; ``describe(source_name)`` writes a source (``L['x'].size()[2]``) for the user."""
    names: dict[str, str] = {}
    for env in getattr(recorder, "envs", []) or []:
        for symbol, sources in env.var_to_sources.items():
            if sources:
                names.setdefault(str(symbol), describe(sources[0].name))
    return names


def shorten_symbolic(text: str, symbols: dict[str, str]) -> str:
    """Replaces every outermost parenthesized group longer than :data:`MAX_EXPRESSION`
    characters that mentions a size symbol by ``(an expression of <dimensions>)``."""
    out, depth, start, last = [], 0, 0, 0
    for i, c in enumerate(text):
        if c == "(":
            if depth == 0:
                start = i
            depth += 1
        elif c == ")" and depth:
            depth -= 1
            if depth == 0 and i + 1 - start > MAX_EXPRESSION:
                group = text[start : i + 1]
                found = sorted(set(_SYMBOL.findall(group)), key=lambda s: int(s[1:]))
                if found:
                    what = ", ".join(symbols.get(s, s) for s in found)
                    out.append(text[last:start])
                    out.append(f"(an expression of {what}, {len(group)} characters)")
                    last = i + 1
    out.append(text[last:])
    return "".join(out)


def _library_dirs() -> tuple[str, ...]:
    here = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    return (os.path.dirname(torch.__file__) + os.sep, here + os.sep)


def failing_line(error: BaseException) -> str | None:
    """``file:line: code`` of the innermost frame of ``error``'s traceback outside torch
    and this package: the model's line (transformers' modeling file included)."""
    excluded = _library_dirs()
    found = None
    tb = error.__traceback__
    while tb is not None:
        name = tb.tb_frame.f_code.co_filename
        if not name.startswith("<") and not os.path.abspath(name).startswith(excluded):
            found = (name, tb.tb_lineno)
        tb = tb.tb_next
    if found is None:
        return None
    code = linecache.getline(found[0], found[1]).strip()
    return f"{found[0]}:{found[1]}" + (f": {code}" if code else "")


__all__ = ["failing_line", "shorten_symbolic", "symbol_descriptions"]
