"""Python shown on the hand-written pages compiles when copied: ``code-block:: python``,
``runpython`` and the literal blocks (``::``) that hold python code."""

import ast
import glob
import os
import re
import textwrap

import pytest

DOC = os.path.join(
    os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))), "_doc"
)
PAGES = sorted(
    glob.glob(os.path.join(DOC, "*.rst")) + glob.glob(os.path.join(DOC, "tutorial", "*.rst"))
)
_PYTHON_START = re.compile(r"^(import |from \S+ import |with |def |class |[a-z_]+ = )")


def code_blocks(text: str) -> list[tuple[int, str]]:
    """(line number, code) of every python block of a reStructuredText text."""
    lines = text.splitlines()
    blocks = []
    for i, line in enumerate(lines):
        stripped = line.rstrip()
        directive = re.match(r"\s*\.\. (code-block|code|sourcecode):: python", stripped)
        runpython = re.match(r"\s*\.\. runpython::", stripped)
        literal = stripped.endswith("::") and not stripped.lstrip().startswith("..")
        if not (directive or runpython or literal):
            continue
        indent = len(line) - len(line.lstrip())
        j = i + 1
        while j < len(lines) and lines[j].strip().startswith(":"):
            j += 1  # the directive's options
        body = []
        while j < len(lines) and (
            not lines[j].strip() or len(lines[j]) - len(lines[j].lstrip()) > indent
        ):
            body.append(lines[j])
            j += 1
        code = textwrap.dedent("\n".join(body)).strip("\n")
        if literal and not _PYTHON_START.match(code):
            continue  # a message, a shell command or a table
        blocks.append((i + 1, code))
    return blocks


def test_code_blocks_finds_python_only():
    text = textwrap.dedent("""
        Text::

            with torch.no_grad():
                # comment only

        A message::

            CaptureError: could not capture

        .. code-block:: python

            x = 1
        """)
    blocks = code_blocks(text)
    assert [b[1] for b in blocks] == ["with torch.no_grad():\n    # comment only", "x = 1"]
    with pytest.raises(SyntaxError):
        ast.parse(blocks[0][1])


@pytest.mark.parametrize("page", PAGES, ids=lambda p: os.path.relpath(p, DOC))
def test_python_blocks_compile(page):
    with open(page, encoding="utf-8") as f:
        text = f.read()
    for lineno, code in code_blocks(text):
        try:
            ast.parse(code)
        except SyntaxError as e:
            raise AssertionError(f"{os.path.relpath(page, DOC)}:{lineno}: {e}\n{code}") from e
