"""The API pages: every public module is declared (the module index lists it), every
function and class shown describes its parameters and shows a short example.

``INCOMPLETE_PARAMETERS`` and ``NO_EXAMPLE`` list the entries still to document: an
entry documented since must leave the list (the test says so), a new entry cannot
join it silently.
"""

import glob
import importlib
import inspect
import os
import re

import pytest

ROOT = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
API = os.path.join(ROOT, "_doc", "api")
ENTRY = re.compile(r"^\.\. auto(?:function|class|exception)::\s*(\S+)", re.M)
MODULE = re.compile(r"^\.\. (?:automodule|module|py:module)::\s*(\S+)", re.M)
EXAMPLE = re.compile(r"(\.\. code-block::|>>>|\.\. runpython::|::\s*$)", re.M)

INCOMPLETE_PARAMETERS: set[str] = set()
NO_EXAMPLE: set[str] = set()


def _read(pattern: re.Pattern) -> list[str]:
    found = []
    for path in sorted(glob.glob(os.path.join(ROOT, "_doc", "**", "*.rst"), recursive=True)):
        with open(path, encoding="utf-8") as f:
            found.extend(pattern.findall(f.read()))
    return found


def public_modules() -> list[str]:
    "Every module and package of the package whose path has no part starting with _."
    names = []
    package = os.path.join(ROOT, "experimental_experiment")
    for folder, subs, files in os.walk(package):
        subs[:] = sorted(s for s in subs if not s.startswith("_"))
        dotted = os.path.relpath(folder, ROOT).replace(os.sep, ".")
        names.extend(
            dotted if f == "__init__.py" else f"{dotted}.{f[:-3]}"
            for f in sorted(files)
            if f.endswith(".py") and (f == "__init__.py" or not f.startswith("_"))
        )
    return names


def resolve(name: str):
    "The object of a dotted name (a module, then attributes)."
    parts = name.split(".")
    for i in range(len(parts), 0, -1):
        try:
            obj = importlib.import_module(".".join(parts[:i]))
        except ImportError:
            continue
        for part in parts[i:]:
            obj = getattr(obj, part)
        return obj
    raise ImportError(name)


def undescribed_parameters(obj) -> list[str]:
    "The parameters of a function or a class (its constructor) its docstring omits."
    if inspect.isclass(obj) and issubclass(obj, BaseException):
        return []
    try:
        parameters = inspect.signature(obj).parameters.values()
    except (TypeError, ValueError):
        return []
    doc = inspect.getdoc(obj) or ""
    return [
        p.name
        for p in parameters
        if p.name not in ("self", "cls")
        and p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)
        and not re.search(rf"(:param\s+(\w+\s+)?{p.name}:|^\s*{p.name}\s*(\(.*\))?:)", doc, re.M)
    ]


def test_public_modules_in_module_index():
    declared = set(_read(MODULE))
    missing = [
        m for m in public_modules() if m not in declared and m != "experimental_experiment.__main__"
    ]
    assert not missing, (
        f"modules missing from the module index, add them to _doc/api/modules.rst: {missing}"
    )


def test_undescribed_parameters():
    entries = _read(ENTRY)
    assert "experimental_experiment.torch_interpreter.to_onnx" in entries
    problems = []
    for name in entries:
        missing = undescribed_parameters(resolve(name))
        if missing and name not in INCOMPLETE_PARAMETERS:
            problems.append(f"{name}: parameters {missing} are not described")
        if not missing and name in INCOMPLETE_PARAMETERS:
            problems.append(f"{name} is documented now: remove it from INCOMPLETE_PARAMETERS")
    if problems:
        pytest.fail("\n".join(problems))


def test_examples():
    problems = []
    for name in _read(ENTRY):
        obj = resolve(name)
        if inspect.isclass(obj) and issubclass(obj, BaseException):
            continue  # errors and warnings: their message is the example
        has_example = bool(EXAMPLE.search(inspect.getdoc(obj) or ""))
        if not has_example and name not in NO_EXAMPLE:
            problems.append(f"{name}: no example (a code-block in its docstring)")
        if has_example and name in NO_EXAMPLE:
            problems.append(f"{name} has an example now: remove it from NO_EXAMPLE")
    if problems:
        pytest.fail("\n".join(problems))
