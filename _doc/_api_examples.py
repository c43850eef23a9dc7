"""Sphinx extension: "Examples using X" under each function and class of the API pages,
the gallery scripts that use it (sphinx-gallery's backreferences, shown by its
``minigallery`` directive), nothing when no script uses it."""

from __future__ import annotations

import json
import os


def _backreferences(app) -> dict:
    conf = getattr(app.config, "sphinx_gallery_conf", None) or {}
    folder = conf.get("backreferences_dir")
    if not folder:
        return {}
    path = os.path.join(app.srcdir, folder, "backreferences_all.json")
    if not os.path.exists(path):
        return {}
    with open(path, encoding="utf-8") as f:
        return json.load(f)


def add_examples(app, what, name, obj, options, lines):
    "Handler of ``autodoc-process-docstring``: appends the examples using *name*."
    if what not in ("function", "class", "exception"):
        return
    if not _backreferences(app).get(name):
        return
    short = name.rsplit(".", 1)[-1]
    lines.extend(
        ["", f".. rubric:: Examples using ``{short}``", "", f".. minigallery:: {name}", ""]
    )


def setup(app):
    app.connect("autodoc-process-docstring", add_examples)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
