"""Writes the intersphinx inventories the documentation links to, built offline.

Intersphinx downloads ``objects.inv`` from each project's site; the build runs
without internet, so ``_doc/conf.py`` reads small local inventories written by this
script from the names listed in ``tools/inventories.txt``: one object a line,
``project name role [page]``. ``page`` is the page (with its ``#anchor`` if it is
not the object's name) relative to the project's site; without it, the project's
default page pattern applies (``{name}`` is replaced by the object's name).

Usage: ``python tools/make_inventories.py [--output _doc/_static/inventories]``;
add a line to ``tools/inventories.txt`` when the site references a new object
(``check_html.py`` reports a dead cross-reference) and run it again.
"""

from __future__ import annotations

import argparse
import os
import zlib

HERE = os.path.dirname(os.path.abspath(__file__))
NAMES = os.path.join(HERE, "inventories.txt")
OUTPUT = os.path.normpath(os.path.join(HERE, "..", "_doc", "_static", "inventories"))

# project: (site, version, default page of an object)
PROJECTS = {
    "python": ("https://docs.python.org/3/", "3", "library/{module}.html#{name}"),
    "torch": ("https://docs.pytorch.org/docs/stable/", "2.13", "generated/{name}.html#{name}"),
    "onnx": ("https://onnx.ai/onnx/", "1.23", "api/{module_tail}.html#{name}"),
    "onnxruntime": ("https://onnxruntime.ai/docs/api/python/", "1.32", "api_summary.html#{name}"),
    "numpy": ("https://numpy.org/doc/stable/", "2", "reference/generated/{name}.html#{name}"),
}
# sphinx's roles of the python domain and the object types they resolve to
ROLES = {
    "func": "function",
    "class": "class",
    "meth": "method",
    "mod": "module",
    "data": "data",
    "attr": "attribute",
    "exc": "exception",
    "obj": "data",
}


def read_names(path: str = NAMES) -> dict[str, list[tuple[str, str, str]]]:
    """Reads the list: ``{project: [(name, object type, page), ...]}``."""
    entries: dict[str, list[tuple[str, str, str]]] = {p: [] for p in PROJECTS}
    with open(path, encoding="utf-8") as f:
        for number, line in enumerate(f, 1):
            line = line.split("  #")[0].strip()
            if not line or line.startswith("#"):
                continue
            project, name, role, *page = line.split()
            if project not in PROJECTS or role not in ROLES or len(page) > 1:
                raise ValueError(
                    f"{path}:{number}: expected 'project name role [page]' with a project "
                    f"in {sorted(PROJECTS)} and a role in {sorted(ROLES)}, got {line!r}"
                )
            entries[project].append((name, ROLES[role], page[0] if page else ""))
    return entries


def object_page(project: str, name: str, page: str) -> str:
    "The page (and anchor) of an object relative to its project's site."
    if page and "#" in page:
        return page
    if page:
        return f"{page}#{name}"
    module = name.split(".")[0]
    module_tail = name.split(".")[1] if name.count(".") >= 2 else "classes"
    return PROJECTS[project][2].format(name=name, module=module, module_tail=module_tail)


def inventory_bytes(project: str, entries: list[tuple[str, str, str]]) -> bytes:
    "An inventory in sphinx's format (version 2): a header, then zlib-compressed lines."
    _, version, _ = PROJECTS[project]
    header = (
        f"# Sphinx inventory version 2\n# Project: {project}\n# Version: {version}\n"
        "# The remainder of this file is compressed using zlib.\n"
    )
    lines = "".join(
        f"{name} py:{objtype} 1 {object_page(project, name, page)} -\n"
        for name, objtype, page in sorted(set(entries))
    )
    return header.encode() + zlib.compress(lines.encode(), 9)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--output", default=OUTPUT)
    parser.add_argument("--names", default=NAMES)
    args = parser.parse_args(argv)
    os.makedirs(args.output, exist_ok=True)
    for project, entries in read_names(args.names).items():
        path = os.path.join(args.output, f"{project}.inv")
        with open(path, "wb") as f:
            f.write(inventory_bytes(project, entries))
        print(f"{path}: {len(entries)} objects")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
