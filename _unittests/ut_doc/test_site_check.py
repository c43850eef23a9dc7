"""Tests of tools/site_check.py: headless Chromium on tiny pages (skipped without
Debian's chromium and chromedriver; ``make site-check`` installs them)."""

import base64
import importlib.util
import os
import shutil

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
spec = importlib.util.spec_from_file_location(
    "site_check", os.path.join(ROOT, "tools", "site_check.py")
)
site_check = importlib.util.module_from_spec(spec)
spec.loader.exec_module(site_check)

# a 1x1 PNG
PIXEL = base64.b64decode(
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg=="
)
needs_browser = pytest.mark.skipif(
    not (shutil.which("chromium") and shutil.which("chromedriver")),
    reason="chromium and chromium-driver are not installed",
)


def write(path, text):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    mode = "wb" if isinstance(text, bytes) else "w"
    with open(path, mode) as f:
        f.write(text)


def test_image_pages(tmp_path):
    for page in ["index.html", "auto_examples/index.html", "bench/zoo.html", "api/index.html"]:
        write(tmp_path / page, "")
    assert site_check.image_pages(str(tmp_path)) == [
        "index.html",
        "auto_examples/index.html",
        "bench/zoo.html",
    ]


@needs_browser
def test_browser_checks(tmp_path):
    write(
        tmp_path / "index.html",
        "<section><h2>How it compares</h2><table><tr><td>1</td></tr></table></section>"
        '<img src="a.png">',
    )
    write(tmp_path / "a.png", PIXEL)
    write(
        tmp_path / "bad.html",
        '<section><h2>How it compares</h2><p>soon</p></section><img src="none.png">'
        "<script>not_defined();</script>",
    )
    with site_check.serve(str(tmp_path)) as base:
        driver = site_check.make_driver()
        try:
            assert site_check.check_landing(driver, base) == []
            assert site_check.check_images(driver, base, "index.html") == []
            assert site_check.console_errors(driver) == []
            assert site_check.check_images(driver, base, "bad.html") == [
                "bad.html: image 'none.png' does not load"
            ]
            errors = site_check.console_errors(driver)
            assert any("not_defined" in e for e in errors), errors
            write(tmp_path / "index.html", (tmp_path / "bad.html").read_text())
            assert site_check.check_landing(driver, base) == [
                "index.html: no <table> in a section headed 'How it compares'"
            ]
            shots = site_check.take_screenshots(
                driver, base, ["index.html"], str(tmp_path / "shots")
            )
            assert shots == [str(tmp_path / "shots" / "index.png")]
            from PIL import Image

            with Image.open(shots[0]) as img:
                assert img.size == site_check.WINDOW
        finally:
            driver.quit()
