"""Fails if a page of the built documentation shows an error of a runpython block.

A ``runpython`` block run with ``:process:`` does not fail the build when its
code raises: the page shows ``runpythonerror`` instead. This script walks the
built HTML and exits with 1 if any page contains that marker.

Usage: ``python _doc/check_html.py [_doc/_build/html]``
"""

import os
import sys

MARKER = "runpythonerror"


def find_errors(root: str) -> list[str]:
    "Returns the HTML files under *root* containing the marker."
    found = []
    for folder, _, files in os.walk(root):
        for name in sorted(files):
            if not name.endswith(".html"):
                continue
            path = os.path.join(folder, name)
            with open(path, encoding="utf-8", errors="replace") as f:
                if MARKER in f.read():
                    found.append(path)
    return found


def main(argv: list[str]) -> int:
    root = argv[1] if len(argv) > 1 else os.path.join(os.path.dirname(__file__), "_build", "html")
    if not os.path.isdir(root):
        print(f"check_html: no folder {root!r}, build the documentation first")
        return 1
    errors = find_errors(root)
    for path in errors:
        print(f"check_html: {MARKER!r} found in {path}")
    if errors:
        return 1
    print(f"check_html: no {MARKER!r} in {root}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
