"""Checks the built documentation: runpython errors and broken internal links.

* A ``runpython`` block run with ``:process:`` does not fail the build when its
  code raises: the page shows ``runpythonerror`` instead.
* A link (``href`` or ``src``) to a local file must point to a file of the
  built site, and a ``#fragment`` in a link to a page must name an ``id`` of
  that page (external links are not checked: no internet here).

Exits with 1 and lists the problems if there is any.

Usage: ``python _doc/check_html.py [_doc/_build/html]``
"""

from __future__ import annotations

import os
import sys
from html.parser import HTMLParser
from urllib.parse import unquote, urlsplit

MARKER = "runpythonerror"
LINK_ATTRIBUTES = {"a": "href", "link": "href", "img": "src", "script": "src", "iframe": "src"}


class _PageParser(HTMLParser):
    "Collects the ids of a page and the local links it contains."

    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.ids: set[str] = set()
        self.links: list[str] = []

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        for key in ("id", "name"):
            if attrs.get(key):
                self.ids.add(attrs[key])
        link = attrs.get(LINK_ATTRIBUTES.get(tag, ""))
        if link and not urlsplit(link).scheme and not link.startswith("//"):
            self.links.append(link)


def _html_files(root: str) -> list[str]:
    return sorted(
        os.path.join(folder, name)
        for folder, _, files in os.walk(root)
        for name in files
        if name.endswith(".html")
    )


def find_errors(root: str) -> list[str]:
    "Returns the HTML files under *root* containing the marker."
    found = []
    for path in _html_files(root):
        with open(path, encoding="utf-8", errors="replace") as f:
            if MARKER in f.read():
                found.append(path)
    return found


def _parse(path: str, cache: dict) -> _PageParser:
    if path not in cache:
        parser = _PageParser()
        with open(path, encoding="utf-8", errors="replace") as f:
            parser.feed(f.read())
        cache[path] = parser
    return cache[path]


def find_broken_links(root: str) -> list[str]:
    """Returns one line ``page: link (reason)`` per broken internal link."""
    cache: dict[str, _PageParser] = {}
    broken = []
    for page in _html_files(root):
        for link in sorted(set(_parse(page, cache).links)):
            parts = urlsplit(link)
            target = page
            if parts.path:
                target = os.path.normpath(
                    os.path.join(os.path.dirname(page), unquote(parts.path))
                )
                if os.path.isdir(target):
                    target = os.path.join(target, "index.html")
            rel = os.path.relpath(page, root)
            if not os.path.exists(target):
                broken.append(f"{rel}: {link} (no such file)")
            elif parts.fragment and target.endswith(".html"):
                if unquote(parts.fragment) not in _parse(target, cache).ids:
                    broken.append(f"{rel}: {link} (no such anchor)")
    return broken


def main(argv: list[str]) -> int:
    root = argv[1] if len(argv) > 1 else os.path.join(os.path.dirname(__file__), "_build", "html")
    if not os.path.isdir(root):
        print(f"check_html: no folder {root!r}, build the documentation first")
        return 1
    errors = find_errors(root)
    for path in errors:
        print(f"check_html: {MARKER!r} found in {path}")
    broken = find_broken_links(root)
    for line in broken:
        print(f"check_html: broken link in {line}")
    if errors or broken:
        return 1
    n_pages = len(_html_files(root))
    print(f"check_html: {n_pages} pages, no {MARKER!r}, no broken internal link in {root}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
