"""Tests of _doc/check_html.py on a tiny fake site."""

import importlib.util
import os

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
spec = importlib.util.spec_from_file_location(
    "check_html", os.path.join(ROOT, "_doc", "check_html.py")
)
check_html = importlib.util.module_from_spec(spec)
spec.loader.exec_module(check_html)


def write(path, text):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w", encoding="utf-8") as f:
        f.write(text)


def test_good_site(tmp_path):
    write(tmp_path / "index.html",
          '<a href="sub/page.html#sec">x</a><a href="https://example.org/none.html">y</a>'
          '<a href="#top" id="top">z</a><a href="sub/">w</a>')
    write(tmp_path / "sub" / "page.html", '<section id="sec"></section><a href="../index.html">')
    write(tmp_path / "sub" / "index.html", "")
    assert check_html.find_broken_links(str(tmp_path)) == []
    assert check_html.main(["", str(tmp_path)]) == 0


def test_broken_links_and_runpython_errors(tmp_path):
    write(tmp_path / "index.html",
          '<a href="missing.html">x</a><a href="page.html#nowhere">y</a>'
          '<img src="_images/none.png"><a href="page.html#here">ok</a>')
    write(tmp_path / "page.html", '<p id="here" class="runpythonerror"></p>')
    broken = check_html.find_broken_links(str(tmp_path))
    assert broken == [
        "index.html: _images/none.png (no such file)",
        "index.html: missing.html (no such file)",
        "index.html: page.html#nowhere (no such anchor)",
    ]
    assert check_html.find_errors(str(tmp_path)) == [str(tmp_path / "page.html")]
    assert check_html.main(["", str(tmp_path)]) == 1
