"""Sphinx extension: on the Modules page (``api/modules.rst``), a module shows the first
paragraph of its docstring, what it is for; the rest of the docstring speaks of its
internals, which the site does not document (its functions are not on the API pages)."""

from __future__ import annotations

MODULES_PAGE = "api/modules"


def first_paragraph(app, what, name, obj, options, lines):
    "Handler of ``autodoc-process-docstring``: keeps the lines before the first blank one."
    if what != "module" or app.env.docname != MODULES_PAGE:
        return
    for i, line in enumerate(lines):
        if not line.strip() and i > 0:
            del lines[i:]
            break
    if lines and lines[-1].rstrip().endswith("::"):
        # the literal block it announced is gone
        lines[-1] = lines[-1].rstrip()[:-1]


def setup(app):
    app.connect("autodoc-process-docstring", first_paragraph)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
