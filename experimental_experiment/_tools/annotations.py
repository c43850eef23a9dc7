"""Measures how many parameters of the package's public functions are annotated
(``ast`` only, nothing is imported).

A public function is a function or method whose name does not start with ``_``
(``__init__`` and ``__call__`` included), defined at module level or in a public
class of a public module (no part of the dotted name starts with ``_``).
``self`` and ``cls`` are not counted, ``*args`` and ``**kwargs`` are.

::

    python -m experimental_experiment._tools.annotations xoptim torch_interpreter/capture

A part is a subpackage or a sub-folder path (``torch_interpreter/capture``).
A part listed in :data:`CORES` gets a second line, its core, which leaves out the
sub-folders that hold generated-like code (one converter per aten op, patches).
"""

from __future__ import annotations

import ast
import os
import sys
from dataclasses import dataclass
from typing import Iterator, Sequence

from .architecture import package_root

_PUBLIC_DUNDERS = frozenset({"__init__", "__call__"})

#: Sub-folders (relative to the part) left out of a part's core.
CORES: dict[str, tuple[str, ...]] = {"torch_interpreter": ("convert/aten", "patches")}


@dataclass(frozen=True)
class Share:
    """Annotated parameters and return types of the public functions of one part."""

    part: str
    params: int
    annotated_params: int
    returns: int
    annotated_returns: int

    @property
    def ratio(self) -> float:
        """Share of annotated parameters (1 when there is none)."""
        return self.annotated_params / self.params if self.params else 1.0

    @property
    def return_ratio(self) -> float:
        """Share of annotated return types (1 when there is none)."""
        return self.annotated_returns / self.returns if self.returns else 1.0


def _public(name: str) -> bool:
    return not name.startswith("_") or name in _PUBLIC_DUNDERS


def _public_module(root: str, path: str) -> bool:
    rel = os.path.relpath(path, root)[:-3].split(os.sep)
    if rel[-1] == "__init__":
        rel = rel[:-1]
    return not any(p.startswith("_") for p in rel)


def _functions(tree: ast.Module) -> Iterator[tuple[ast.FunctionDef | ast.AsyncFunctionDef, bool]]:
    """Yields the public functions and whether they are methods."""
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and _public(node.name):
            yield node, False
        elif isinstance(node, ast.ClassDef) and not node.name.startswith("_"):
            for sub in node.body:
                if isinstance(sub, (ast.FunctionDef, ast.AsyncFunctionDef)) and _public(sub.name):
                    yield (
                        sub,
                        not any(
                            isinstance(d, ast.Name) and d.id == "staticmethod"
                            for d in sub.decorator_list
                        ),
                    )


def _count(fct: ast.FunctionDef | ast.AsyncFunctionDef, method: bool) -> tuple[int, int]:
    args = fct.args
    positional = [*args.posonlyargs, *args.args]
    if method and positional and positional[0].arg in ("self", "cls"):
        positional = positional[1:]
    every = [*positional, *args.kwonlyargs]
    every.extend(a for a in (args.vararg, args.kwarg) if a is not None)
    return len(every), sum(a.annotation is not None for a in every)


def _excluded(dirpath: str, skipped: Sequence[str]) -> bool:
    return any(dirpath == s or dirpath.startswith(s + os.sep) for s in skipped)


def share(part: str, root: str | None = None, exclude: Sequence[str] = ()) -> Share:
    """Counts the annotated parameters of the public functions of one subpackage.

    :param part: subpackage name, ``xoptim`` for ``experimental_experiment/xoptim``,
        or a sub-folder path, ``torch_interpreter/capture``
    :param root: the package's folder, the installed one by default
    :param exclude: sub-folders of the part left out, relative to it
        (``convert/aten``)
    :return: the counts
    """
    root = root or package_root()
    folder = os.path.join(root, *part.split("/"))
    skipped = [os.path.join(folder, *e.split("/")) for e in exclude]
    params = annotated = returns = annotated_returns = 0
    for dirpath, _, names in os.walk(folder):
        if _excluded(dirpath, skipped):
            continue
        for name in sorted(names):
            path = os.path.join(dirpath, name)
            if not name.endswith(".py") or not _public_module(root, path):
                continue
            with open(path, encoding="utf-8") as f:
                tree = ast.parse(f.read(), path)
            for fct, method in _functions(tree):
                n, a = _count(fct, method)
                params += n
                annotated += a
                if fct.name != "__init__":
                    returns += 1
                    annotated_returns += fct.returns is not None
    return Share(part, params, annotated, returns, annotated_returns)


def core_share(part: str, root: str | None = None) -> Share:
    """Counts the annotated parameters of a part's core, the part less the
    sub-folders :data:`CORES` lists for it (the whole part if it has none).

    :param part: subpackage name, ``torch_interpreter``
    :param root: the package's folder, the installed one by default
    :return: the counts, named ``part (core)``
    """
    s = share(part, root, exclude=CORES.get(part, ()))
    return Share(f"{part} (core)", s.params, s.annotated_params, s.returns, s.annotated_returns)


def _line(s: Share) -> str:
    return (
        f"{s.part:26s} parameters {s.annotated_params}/{s.params} ({s.ratio:.0%}) "
        f"returns {s.annotated_returns}/{s.returns} ({s.return_ratio:.0%})\n"
    )


def main(argv: Sequence[str] | None = None) -> None:
    """Prints the shares of the subpackages given on the command line, followed
    by the core of those listed in :data:`CORES`."""
    parts = list(argv if argv is not None else sys.argv[1:]) or [
        "xbuilder",
        "xoptim",
        "torch_interpreter",
    ]
    for p in parts:
        sys.stdout.write(_line(share(p)))
        if p in CORES:
            sys.stdout.write(_line(core_share(p)))


if __name__ == "__main__":
    main()
