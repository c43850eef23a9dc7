"""Every Python code block of the site compiles: a reader copies them.

The blocks come from the pages (``.. code-block:: python``, ``.. runpython::``,
``>>>`` sessions), the docstrings of the package (the API pages show them) and the
gallery scripts. A failure names the file and the line of the block.
"""

import ast
import os
import re
import textwrap

import pytest

ROOT = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
DOC = os.path.join(ROOT, "_doc")
PACKAGE = os.path.join(ROOT, "experimental_experiment")
# generated folders of the documentation
SKIPPED = {"_build", "_build_quick", "_backrefs", "auto_examples", "auto_recipes"}
DIRECTIVE = re.compile(
    r"^(?P<indent>\s*)\.\. (?:(?:code-block|code|sourcecode)::\s*(?:python3?|py)|runpython::)\s*$"
)
# a literal block (``::``) is highlighted as python: it is checked when it imports
LITERAL = re.compile(r"^(?P<indent>\s*)(?!\.\. )\S?.*::\s*$")
IMPORT = re.compile(r"^\s*(import \w|from [\w.]+ import )", re.M)
PROMPT = re.compile(r"^\s*(>>>|\.\.\.)( |$)")


def _block_end(lines: list[str], start: int, indent: int) -> int:
    end = start
    while end < len(lines) and (
        not lines[end].strip() or len(lines[end]) - len(lines[end].lstrip()) > indent
    ):
        end += 1
    return end


def directive_blocks(text: str) -> list[tuple[int, str]]:
    """The code of every python code-block and runpython directive: ``(line index of
    its first line, code)``."""
    lines = text.splitlines()
    blocks = []
    for i, line in enumerate(lines):
        m = DIRECTIVE.match(line)
        if not m:
            continue
        end = _block_end(lines, i + 1, len(m.group("indent").expandtabs()))
        first = i + 1
        # options (":showcode:", ":linenos:") come before a blank line
        while first < end and lines[first].strip().startswith(":"):
            first += 1
        while first < end and not lines[first].strip():
            first += 1
        if first < end:
            blocks.append((first, textwrap.dedent("\n".join(lines[first:end]))))
    return blocks


def literal_blocks(text: str) -> list[tuple[int, str]]:
    """The code of every literal block (``::``) which imports something."""
    lines = text.splitlines()
    blocks = []
    for i, line in enumerate(lines):
        m = LITERAL.match(line)
        if not m or DIRECTIVE.match(line) or line.lstrip().startswith(".. "):
            continue
        end = _block_end(lines, i + 1, len(m.group("indent").expandtabs()))
        first = i + 1
        while first < end and not lines[first].strip():
            first += 1
        code = textwrap.dedent("\n".join(lines[first:end]))
        if first < end and IMPORT.search(code) and not PROMPT.match(lines[first]):
            blocks.append((first, code))
    return blocks


def all_blocks(text: str) -> list[tuple[int, str]]:
    "Directive blocks, literal blocks and sessions of a page or a docstring."
    return directive_blocks(text) + literal_blocks(text) + session_blocks(text)


def session_blocks(text: str) -> list[tuple[int, str]]:
    """The code of every ``>>>`` session (consecutive prompt lines, outputs left out)."""
    blocks, current, start = [], [], 0
    for i, line in enumerate([*text.splitlines(), ""]):
        if PROMPT.match(line):
            if not current:
                start = i
            current.append(PROMPT.sub("", line, count=1))
        elif current and not line.strip().startswith(">>>"):
            if current:
                blocks.append((start, textwrap.dedent("\n".join(current))))
            current = []
    return blocks


def docstrings(path: str) -> list[tuple[int, str]]:
    """``(line index of the string's first line, raw text)`` of every docstring."""
    with open(path, encoding="utf-8") as f:
        tree = ast.parse(f.read())
    found = []
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            body = node.body
            if (
                body
                and isinstance(body[0], ast.Expr)
                and isinstance(body[0].value, ast.Constant)
                and isinstance(body[0].value.value, str)
            ):
                found.append((body[0].value.lineno - 1, body[0].value.value))
    return found


def _files(folder: str, suffix: str) -> list[str]:
    return sorted(
        os.path.join(d, n)
        for d, subs, names in os.walk(folder)
        if not subs.__setitem__(slice(None), [s for s in subs if s not in SKIPPED])
        for n in names
        if n.endswith(suffix)
    )


def code_blocks() -> list[tuple[str, int, str]]:
    """``(file relative to the repository, line number, code)`` of every block."""
    blocks = []
    for path in _files(DOC, ".rst"):
        with open(path, encoding="utf-8") as f:
            text = f.read()
        blocks.extend((path, i + 1, code) for i, code in all_blocks(text))
    for path in _files(PACKAGE, ".py"):
        for offset, text in docstrings(path):
            blocks.extend((path, offset + i + 1, code) for i, code in all_blocks(text))
    for gallery in ("examples", "recipes"):
        for path in _files(os.path.join(DOC, gallery), ".py"):
            with open(path, encoding="utf-8") as f:
                blocks.append((path, 1, f.read()))
    return [(os.path.relpath(p, ROOT), line, code) for p, line, code in blocks]


def compile_errors(blocks) -> list[str]:
    "One line ``file:line: error`` per block that does not compile."
    errors = []
    for path, line, code in blocks:
        try:
            # blank lines before the code: the error names the file's line numbers
            compile("\n" * (line - 1) + code, path, "exec")
        except SyntaxError as e:
            errors.append(f"{path}:{e.lineno}: {e.msg}")
    return errors


def test_extraction():
    rst = textwrap.dedent("""\
        Title

        .. code-block:: python
            :linenos:

            import torch
            with torch.no_grad():
                # only a comment

        Text.

        .. runpython::
            :showcode:

            print(1)

        >>> x = 1
        >>> if x:
        ...     print(x)
        1

        A shell command::

            pip install onnx

        Python::

            from x import y
            with y():
                # only a comment
        """)
    blocks = all_blocks(rst)
    assert [i for i, _ in blocks] == [5, 14, 27, 16]
    assert blocks[1][1] == "print(1)\n"
    assert blocks[3][1] == "x = 1\nif x:\n    print(x)"
    errors = compile_errors([("page.rst", i + 1, code) for i, code in blocks])
    assert errors == [
        "page.rst:8: expected an indented block after 'with' statement on line 7",
        "page.rst:30: expected an indented block after 'with' statement on line 29",
    ]


def test_site_code_blocks_compile():
    blocks = code_blocks()
    assert len(blocks) > 50, "the pages, docstrings and gallery scripts were not found"
    errors = compile_errors(blocks)
    if errors:
        pytest.fail(
            f"{len(errors)} code block(s) of the site do not compile:\n" + "\n".join(errors)
        )
