"""The troubleshooting page, generated from the code: every exception and warning class
the package defines, found by reading its sources (a class added tomorrow appears
without any list to update), with the message a user sees, its cause and its fix.

Every such class has a docstring made of a summary line, a paragraph starting with
``Cause:`` and one starting with ``Fix:`` (``_unittests/ut_investigate/
test_troubleshooting.py`` checks it). The message comes from
:mod:`experimental_experiment.investigate.error_triggers`, which raises the error on a
small case when that is cheap.

.. code-block:: python

    from experimental_experiment.investigate.troubleshooting import (
        error_classes, troubleshooting_rst)

    print([e.name for e in error_classes()])
    print(troubleshooting_rst())  # what the page shows
"""

from __future__ import annotations

import ast
import builtins
import importlib
import inspect
import os
from dataclasses import dataclass

PACKAGE = "experimental_experiment"
_BUILTIN_EXCEPTIONS = {
    name
    for name, obj in vars(builtins).items()
    if isinstance(obj, type) and issubclass(obj, BaseException)
}


@dataclass(frozen=True)
class ErrorClass:
    """One exception or warning class of the package and what its docstring says."""

    cls: type
    summary: str
    cause: str
    fix: str

    @property
    def name(self) -> str:
        return self.cls.__name__

    @property
    def path(self) -> str:
        """Where a user imports it from: ``module.Class``."""
        return f"{self.cls.__module__}.{self.cls.__qualname__}"

    @property
    def is_warning(self) -> bool:
        return issubclass(self.cls, Warning)


def _package_root() -> str:
    return os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _candidates(root: str) -> list[tuple[str, str]]:
    """(module, class name) of the classes deriving, by name, from a builtin exception
    or from another such class of the package (read with ast, nothing imported)."""
    classes = []  # (module, class name, base names)
    for folder, _, files in os.walk(root):
        for f in sorted(files):
            if not f.endswith(".py"):
                continue
            path = os.path.join(folder, f)
            rel = os.path.relpath(path, os.path.dirname(root))[:-3].replace(os.sep, ".")
            module = rel[: -len(".__init__")] if rel.endswith(".__init__") else rel
            with open(path, encoding="utf-8") as fh:
                tree = ast.parse(fh.read(), filename=path)
            for node in tree.body:
                if isinstance(node, ast.ClassDef):
                    bases = {
                        b.id if isinstance(b, ast.Name) else getattr(b, "attr", "")
                        for b in node.bases
                    }
                    classes.append((module, node.name, bases))
    known = set(_BUILTIN_EXCEPTIONS)
    found: dict[tuple[str, str], None] = {}
    changed = True
    while changed:  # a class deriving from a package error defined in another file
        changed = False
        for module, name, bases in classes:
            if (module, name) not in found and bases & known:
                found[(module, name)] = None
                known.add(name)
                changed = True
    return sorted(found)


def parse_docstring(doc: str | None) -> tuple[str, str, str]:
    """(summary, cause, fix) of a docstring; empty strings for what it lacks."""
    paragraphs = [
        " ".join(line.strip() for line in p.strip().splitlines())
        for p in inspect.cleandoc(doc or "").split("\n\n")
    ]
    paragraphs = [p for p in paragraphs if p]
    summary = (
        paragraphs[0] if paragraphs and not paragraphs[0].startswith(("Cause:", "Fix:")) else ""
    )
    cause = " ".join(p[len("Cause:") :].strip() for p in paragraphs if p.startswith("Cause:"))
    fix = " ".join(p[len("Fix:") :].strip() for p in paragraphs if p.startswith("Fix:"))
    return summary, cause, fix


def error_classes(root: str | None = None) -> list[ErrorClass]:
    """Every exception and warning class defined in the package, sorted by name."""
    root = root or _package_root()
    package = os.path.basename(root)
    out = []
    for module, name in _candidates(root):
        cls = getattr(importlib.import_module(module), name, None)
        if not (isinstance(cls, type) and issubclass(cls, BaseException)):
            continue
        if cls.__module__ != module or not module.startswith(package):
            continue  # re-exported elsewhere
        doc = cls.__dict__.get("__doc__")
        out.append(ErrorClass(cls, *parse_docstring(doc)))
    return sorted(out, key=lambda e: (e.is_warning, e.name))


def missing_cause_or_fix(classes: list[ErrorClass]) -> list[str]:
    """``module.Class: what is missing`` for every class whose docstring lacks a
    summary, a ``Cause:`` or a ``Fix:`` paragraph."""
    bad = []
    for e in classes:
        lacks = [k for k in ("summary", "cause", "fix") if not getattr(e, k)]
        if lacks:
            bad.append(f"{e.path}: no {', '.join(lacks)} in its docstring")
    return bad


def _anchor(e: ErrorClass) -> str:
    return f"l-error-{e.name.lower()}"


def _literal(text: str) -> list[str]:
    """A message as a block of plain text (no syntax highlighting)."""
    lines = [line.rstrip() for line in text.strip().splitlines()] or ["(empty message)"]
    return [".. code-block:: text", ""] + ["    " + line for line in lines] + [""]


def _section(e: ErrorClass, message: str | None) -> list[str]:
    bases = ", ".join(f"``{b.__name__}``" for b in e.cls.__bases__)
    kind = "Warning" if e.is_warning else "Error"
    lines = [
        f".. _{_anchor(e)}:",
        "",
        e.name,
        "-" * len(e.name),
        "",
        f"``{e.path}`` (derives from {bases}). {e.summary}",
        "",
    ]
    if message:
        lines += [
            f"**{kind} message** (raised on a small case when this page was built):",
            "",
        ] + _literal(message)
    else:
        lines += [
            "*No small case raises it on this page*: the cause below says when it happens.",
            "",
        ]
    return lines + [f"**Cause.** {_capital(e.cause)}", "", f"**Fix.** {_capital(e.fix)}", ""]


def _capital(text: str) -> str:
    return text[:1].upper() + text[1:]


def _index_table(rows: list[tuple[str, str, str]]) -> list[str]:
    """A list-table: the message's first words (a link to its section), its meaning."""
    lines = [
        ".. list-table::",
        "    :header-rows: 1",
        "    :widths: 35 65",
        "",
        "    * - the message starts with",
        "      - what it means",
    ]
    for starts, anchor, meaning in rows:
        lines += [f"    * - :ref:`{starts} <{anchor}>`", f"      - {meaning}"]
    return lines + [""]


def index_rst() -> str:
    """The index of the page: every error class of the package, then torch.export's
    frequent errors, each with the words its message starts with (nothing is run)."""
    from .error_triggers import TORCH_EXPORT_CASES

    rows = [(e.name, _anchor(e), e.summary) for e in error_classes()]
    rows += [(c.starts, c.anchor, c.when) for c in TORCH_EXPORT_CASES]
    return "\n".join(_index_table(rows))


def troubleshooting_rst(trigger: bool = True) -> str:
    """The reStructuredText of the package errors part of the troubleshooting page,
    one section per class (``trigger=False`` skips the triggers and shows no
    message)."""
    from .error_triggers import raise_and_capture

    lines = []
    for e in error_classes():
        lines += _section(e, raise_and_capture(e.cls) if trigger else None)
    return "\n".join(lines)


def torch_export_rst() -> str:
    """The reStructuredText of torch.export's frequent errors, each raised on a small
    model when the page is built, with what to do."""
    from .error_triggers import TORCH_EXPORT_CASES, capture_message

    lines = []
    for case in TORCH_EXPORT_CASES:
        message = capture_message(case.trigger)
        lines += [f".. _{case.anchor}:", "", case.title, "-" * len(case.title), "", case.when, ""]
        lines += ["**Message** (raised when this page was built, first lines):", ""]
        lines += _literal(message or "(no error with the installed torch)")
        lines += [f"**What to do.** {case.fix}", ""]
    return "\n".join(lines)


__all__ = [
    "ErrorClass",
    "error_classes",
    "index_rst",
    "missing_cause_or_fix",
    "parse_docstring",
    "torch_export_rst",
    "troubleshooting_rst",
]
