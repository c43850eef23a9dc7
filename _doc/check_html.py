"""Checks the built documentation; exits with 1 and lists the problems if there is any.

Site checks (they need the whole built folder):

* ``broken-link``: a link (``href`` or ``src``) to a local file must point to a file
  of the built site, and a ``#fragment`` must name an ``id`` of that page (external
  links are not checked: no internet here).
* ``placeholder-thumbnail``: a gallery thumbnail must be a picture made by its
  example, not sphinx-gallery's ``no_image`` (or ``broken_example``) picture.

Page checks (one small function each, on the text of one page):

* ``dead-xref``: a ``:func:``/``:class:``/``:meth:`` role Sphinx could not resolve
  renders as ``<code class="xref ...">`` outside any link.
* ``machine-path``: an absolute path of the machine that built the site
  (``/tmp/``, ``/work/``, ``/home/``, ``/root/``, ``site-packages``) in the text.
* ``long-float``: a number with more than 6 significant digits in a table cell.
* ``runpython``: ``runpythonerror`` (a ``runpython`` block run with ``:process:``
  whose code raised: the build still passes) or the ``<<<`` / ``>>>`` markers shown
  as text.
* ``tier-headings``: a gallery index (``auto_*/index.html``) whose scripts have tiers
  must group its cards under headings naming them (101, 102, 201, 301).

Usage: ``python _doc/check_html.py [_doc/_build/html] [--allow CHECK ...]``; an
allowed check still lists its problems but does not fail.
"""

from __future__ import annotations

import argparse
import os
import re
import sys
from html.parser import HTMLParser
from typing import NamedTuple
from urllib.parse import unquote, urlsplit

MARKER = "runpythonerror"
LINK_ATTRIBUTES = {"a": "href", "link": "href", "img": "src", "script": "src", "iframe": "src"}
VOID_TAGS = {
    "area",
    "base",
    "br",
    "col",
    "embed",
    "hr",
    "img",
    "input",
    "link",
    "meta",
    "source",
    "track",
    "wbr",
}
# text inside these is not shown as prose
CODE_TAGS = {"pre", "code", "script", "style", "textarea"}
TIERS = ("101", "102", "201", "301")
MAX_SIGNIFICANT_DIGITS = 6


class Element(NamedTuple):
    "An open element: tag, classes, a serial number telling two elements apart."

    tag: str
    classes: frozenset
    serial: int


class _PageParser(HTMLParser):
    """Collects the ids, the local links, the images and every piece of text of a
    page with the elements it is inside."""

    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.ids: set[str] = set()
        self.links: list[str] = []
        self.card_links: list[str] = []  # links of sphinx-gallery's cards
        self.images: list[tuple[str, tuple[Element, ...]]] = []
        self.texts: list[tuple[str, tuple[Element, ...]]] = []
        self._stack: list[Element] = []
        self._serial = 0

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        for key in ("id", "name"):
            if attrs.get(key):
                self.ids.add(attrs[key])
        link = attrs.get(LINK_ATTRIBUTES.get(tag, ""))
        if link and not urlsplit(link).scheme and not link.startswith("//"):
            self.links.append(link)
            if any("sphx-glr-thumbcontainer" in e.classes for e in self._stack):
                self.card_links.append(link)
        if tag == "img":
            self.images.append((attrs.get("src") or "", tuple(self._stack)))
        if tag not in VOID_TAGS:
            classes = frozenset((attrs.get("class") or "").split())
            self._serial += 1
            self._stack.append(Element(tag, classes, self._serial))

    def handle_startendtag(self, tag, attrs):
        self.handle_starttag(tag, attrs)
        if tag not in VOID_TAGS:
            self._stack.pop()

    def handle_endtag(self, tag):
        for i in range(len(self._stack) - 1, -1, -1):
            if self._stack[i].tag == tag:
                del self._stack[i:]
                return

    def handle_data(self, data):
        self.texts.append((data, tuple(self._stack)))


def parse_page(text: str) -> _PageParser:
    "Parses the text of one page."
    parser = _PageParser()
    parser.feed(text)
    parser.close()
    return parser


def _prose(page: _PageParser) -> str:
    "The text of a page outside code, scripts and styles."
    return " ".join(t for t, stack in page.texts if not any(e.tag in CODE_TAGS for e in stack))


# page checks: (relative path, parsed page) -> list of problems


def check_dead_xrefs(rel: str, page: _PageParser) -> list[str]:
    """A cross-reference Sphinx did not resolve: an element of class ``xref``
    outside any ``<a>``."""
    found: dict[int, list[str]] = {}
    for text, stack in page.texts:
        if any(e.tag == "a" for e in stack):
            continue
        xref = next((e for e in stack if "xref" in e.classes), None)
        if xref is not None:
            found.setdefault(xref.serial, []).append(text)
    return [f"dead cross-reference {''.join(parts).strip()!r}" for parts in found.values()]


_PATH = re.compile(
    r"(?<![\w.:/~-])/(?:tmp|work|home|root)/[^\s'\"<>)\]]*|[^\s'\"<>(\[]*"
    r"(?:site|dist)-packages[^\s'\"<>)\]]*"
)


def check_machine_paths(rel: str, page: _PageParser) -> list[str]:
    """An absolute path of the building machine anywhere in the text (code outputs
    included; scripts and styles excluded)."""
    text = " ".join(
        t for t, stack in page.texts if not any(e.tag in ("script", "style") for e in stack)
    )
    return [f"machine path {m!r}" for m in sorted(set(_PATH.findall(text)))]


_FLOAT = re.compile(r"(?<![\w.])[-+]?(\d+\.\d+)(?:[eE][-+]?\d+)?(?![\d.])")


def significant_digits(number: str) -> int:
    "Significant digits of a decimal number as written (``0.00120`` has 3)."
    mantissa = re.split("[eE]", number.lstrip("+-"))[0]
    return len(mantissa.replace(".", "").lstrip("0"))


def check_long_floats(rel: str, page: _PageParser) -> list[str]:
    """A number with more than 6 significant digits in a table cell."""
    cells = " ".join(t for t, stack in page.texts if any(e.tag in ("td", "th") for e in stack))
    long = {
        m.group(0)
        for m in _FLOAT.finditer(cells)
        if significant_digits(m.group(0)) > MAX_SIGNIFICANT_DIGITS
    }
    return [
        f"{n!r} has more than {MAX_SIGNIFICANT_DIGITS} significant digits in a table"
        for n in sorted(long)
    ]


def check_runpython_markers(rel: str, page: _PageParser) -> list[str]:
    """``runpythonerror`` anywhere, ``<<<`` or ``>>>`` shown as prose."""
    problems = []
    if any(MARKER in e.classes for _, stack in page.texts for e in stack) or any(
        MARKER in t for t, _ in page.texts
    ):
        problems.append(f"{MARKER!r}: a runpython block raised")
    prose = _prose(page)
    problems.extend(f"runpython marker {m!r} shown as text" for m in ("<<<", ">>>") if m in prose)
    return problems


_GALLERY_INDEX = re.compile(r"^auto_[^/\\]+[/\\]index\.html$")
_TIER = re.compile(r"_(101|102|201|301)\.html")


def check_tier_headings(rel: str, page: _PageParser) -> list[str]:
    """A gallery index whose cards have tiers (the suffix of the script's name:
    ``plot_topic_101.py``) must have a heading for each of them (the recipes, named
    by exporter, have none)."""
    if not _GALLERY_INDEX.match(rel):
        return []
    headings = " ".join(
        t for t, stack in page.texts if any(re.fullmatch("h[1-6]", e.tag) for e in stack)
    )
    named = {t for t in TIERS if re.search(rf"\b{t}\b", headings)}
    card_tiers = set(_TIER.findall(" ".join(page.card_links)))
    if not card_tiers:
        return []
    if not named:
        return [f"gallery index without tier headings ({', '.join(TIERS)})"]
    return [
        f"gallery index has cards of tier {t} but no heading for it"
        for t in sorted(card_tiers - named)
    ]


PAGE_CHECKS = {
    "dead-xref": check_dead_xrefs,
    "machine-path": check_machine_paths,
    "long-float": check_long_floats,
    "runpython": check_runpython_markers,
    "tier-headings": check_tier_headings,
}
SITE_CHECKS = ("broken-link", "placeholder-thumbnail")


def _html_files(root: str) -> list[str]:
    return sorted(
        os.path.join(folder, name)
        for folder, _, files in os.walk(root)
        for name in files
        if name.endswith(".html")
    )


def _parse(path: str, cache: dict) -> _PageParser:
    if path not in cache:
        with open(path, encoding="utf-8", errors="replace") as f:
            cache[path] = parse_page(f.read())
    return cache[path]


def find_errors(root: str) -> list[str]:
    "Returns the HTML files under *root* containing the runpython error marker."
    found = []
    for path in _html_files(root):
        with open(path, encoding="utf-8", errors="replace") as f:
            if MARKER in f.read():
                found.append(path)
    return found


def _local_target(page: str, link: str) -> str:
    parts = urlsplit(link)
    if not parts.path:
        return page
    target = os.path.normpath(os.path.join(os.path.dirname(page), unquote(parts.path)))
    return os.path.join(target, "index.html") if os.path.isdir(target) else target


def find_broken_links(root: str, cache: dict | None = None) -> list[str]:
    """Returns one line ``page: link (reason)`` per broken internal link."""
    cache = {} if cache is None else cache
    broken = []
    for page in _html_files(root):
        for link in sorted(set(_parse(page, cache).links)):
            target = _local_target(page, link)
            fragment = urlsplit(link).fragment
            rel = os.path.relpath(page, root)
            if not os.path.exists(target):
                broken.append(f"{rel}: {link} (no such file)")
            elif fragment and target.endswith(".html"):
                if unquote(fragment) not in _parse(target, cache).ids:
                    broken.append(f"{rel}: {link} (no such anchor)")
    return broken


def _fingerprint(path: str, size: int = 24) -> list[int]:
    "Grey levels of the picture's non-white part scaled to size x size."
    from PIL import Image, ImageOps

    with Image.open(path) as img:
        grey = img.convert("L")
    box = ImageOps.invert(grey).point(lambda v: 255 if v > 8 else 0).getbbox()
    return list((grey.crop(box) if box else grey).resize((size, size)).tobytes())


def _placeholders() -> list[list[int]]:
    import sphinx_gallery

    static = os.path.join(os.path.dirname(sphinx_gallery.__file__), "_static")
    return [_fingerprint(os.path.join(static, n)) for n in ("no_image.png", "broken_example.png")]


def is_placeholder(path: str, placeholders: list | None = None) -> bool:
    """Tells if the picture is one of sphinx-gallery's placeholders, scaled or not
    (mean difference of grey levels under 8 on 255)."""
    fp = _fingerprint(path)
    return any(
        sum(abs(a - b) for a, b in zip(fp, ref)) / len(fp) < 8
        for ref in placeholders or _placeholders()
    )


def find_placeholder_thumbnails(root: str, cache: dict | None = None) -> list[str]:
    """Returns one line ``page: image`` per gallery thumbnail that is sphinx-gallery's
    placeholder picture (``no_image``, ``broken_example``), whatever its size."""
    cache = {} if cache is None else cache
    found = []
    placeholders = None
    for page in _html_files(root):
        for src, _ in _parse(page, cache).images:
            name = os.path.basename(urlsplit(src).path)
            if not (name.endswith("_thumb.png") or name in ("no_image.png", "broken_example.png")):
                continue
            target = _local_target(page, src)
            if not os.path.exists(target):
                continue
            placeholders = placeholders or _placeholders()
            if is_placeholder(target, placeholders):
                found.append(f"{os.path.relpath(page, root)}: {src}")
    return sorted(set(found))


def run_checks(root: str) -> dict[str, list[str]]:
    "Every check on the site under *root*: ``{check: [problem, ...]}``."
    cache: dict = {}
    problems = {
        "broken-link": find_broken_links(root, cache),
        "placeholder-thumbnail": find_placeholder_thumbnails(root, cache),
    }
    for name in PAGE_CHECKS:
        problems[name] = []
    for path in _html_files(root):
        rel = os.path.relpath(path, root)
        page = _parse(path, cache)
        for name, check in PAGE_CHECKS.items():
            problems[name].extend(f"{rel}: {p}" for p in check(rel, page))
    return problems


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument(
        "root", nargs="?", default=os.path.join(os.path.dirname(__file__), "_build", "html")
    )
    parser.add_argument(
        "--allow",
        action="append",
        default=[],
        choices=[*SITE_CHECKS, *PAGE_CHECKS],
        help="lists the problems of this check without failing",
    )
    args = parser.parse_args(argv[1:])
    if not os.path.isdir(args.root):
        print(f"check_html: no folder {args.root!r}, build the documentation first")
        return 1
    failed = False
    for name, lines in run_checks(args.root).items():
        allowed = " (allowed)" if name in args.allow else ""
        for line in lines:
            print(f"check_html: [{name}]{allowed} {line}")
        print(f"check_html: {name}: {len(lines)} problem(s){allowed}")
        failed |= bool(lines) and not allowed
    n_pages = len(_html_files(args.root))
    print(f"check_html: {n_pages} pages in {args.root}: {'FAILED' if failed else 'OK'}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
