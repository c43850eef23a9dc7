"""Opens the built site in headless Chromium (driven by selenium) and checks what only a
browser sees:

* the landing page renders its comparison table (a ``<table>`` in the section whose
  heading says "How it compares"),
* the search page finds ``to_onnx`` (``search.html?q=to_onnx`` lists results),
* every image of the landing page, the gallery indexes and the benchmark pages loads
  (``naturalWidth > 0``),
* the browser's console shows no JavaScript error (no SEVERE entry).

The site is served by ``http.server`` on 127.0.0.1 (a free port, ``no-store``). Needs
Debian's ``chromium`` and ``chromium-driver`` (``make site-check`` installs them).

``--screenshots DIR`` saves a PNG of each page given by ``--page`` (window 1280x1600)
in DIR, for a person to look at.

Usage: ``python tools/site_check.py [_doc/_build/html] [--screenshots DIR --page index.html]``
"""

from __future__ import annotations

import argparse
import functools
import glob
import http.server
import os
import shutil
import sys
import tempfile
import threading
import time
from contextlib import contextmanager

WINDOW = (1280, 1600)
TIMEOUT = 20  # seconds a page has to render what is checked
GALLERY_INDEXES = ("auto_examples/index.html", "auto_recipes/index.html")
# Chromium requests /favicon.ico by itself; the site has none, that 404 is not the site's
IGNORED_CONSOLE = ("favicon.ico",)


class SiteCheckError(RuntimeError):
    "The browser or the server could not be started."


class _NoStoreHandler(http.server.SimpleHTTPRequestHandler):
    """Serves files with ``Cache-Control: no-store``: a page rewritten within the same
    second as its first load (same Last-Modified) is fetched again, not answered 304."""

    def end_headers(self):
        self.send_header("Cache-Control", "no-store")
        super().end_headers()

    def send_head(self):
        # never answer 304: If-Modified-Since compares whole seconds
        if "If-Modified-Since" in self.headers:
            del self.headers["If-Modified-Since"]
        return super().send_head()

    def log_message(self, format, *args):  # noqa: A002
        pass


@contextmanager
def serve(root: str):
    "Serves *root* on 127.0.0.1 (uncached, in a thread), yields its base URL."
    handler = functools.partial(_NoStoreHandler, directory=root)
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/"
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=10)


def make_driver():
    "Headless Chromium with its console log kept (Debian's chromium, chromedriver)."
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    browser = shutil.which("chromium") or shutil.which("chromium-browser")
    driver_path = shutil.which("chromedriver")
    if not browser or not driver_path:
        raise SiteCheckError(
            "chromium or chromedriver is missing: run "
            "'apt-get update && apt-get install -y chromium chromium-driver'"
        )
    options = webdriver.ChromeOptions()
    options.binary_location = browser
    for flag in (
        "--headless=new",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-dev-shm-usage",
        "--no-first-run",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        "--disable-quic",
        f"--window-size={WINDOW[0]},{WINDOW[1]}",
        f"--user-data-dir={tempfile.mkdtemp(prefix='site_check_')}",
    ):
        options.add_argument(flag)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    driver = webdriver.Chrome(options=options, service=Service(executable_path=driver_path))
    driver.set_window_size(*WINDOW)
    # the window size includes the browser's frame: the page itself gets WINDOW
    driver.execute_cdp_cmd(
        "Emulation.setDeviceMetricsOverride",
        {"width": WINDOW[0], "height": WINDOW[1], "deviceScaleFactor": 1, "mobile": False},
    )
    driver.set_page_load_timeout(60)
    return driver


def console_errors(driver) -> list[str]:
    "The SEVERE entries of the console since the last call."
    return [
        e["message"]
        for e in driver.get_log("browser")
        if e["level"] == "SEVERE" and not any(s in e["message"] for s in IGNORED_CONSOLE)
    ]


def wait_for(driver, script: str, timeout: float = TIMEOUT):
    "Runs *script* until it returns something true, returns the last result."
    end = time.time() + timeout
    result = driver.execute_script(script)
    while not result and time.time() < end:
        time.sleep(0.2)
        result = driver.execute_script(script)
    return result


COMPARISON_TABLE = """
for (const h of document.querySelectorAll('h1, h2, h3')) {
    if (/how it compares/i.test(h.textContent)) {
        const section = h.closest('section');
        const table = section && section.querySelector('table');
        return table ? table.rows.length : 0;
    }
}
return 0;
"""

SEARCH_RESULTS = """
const items = document.querySelectorAll('#search-results ul.search li');
return Array.from(items).filter(li => li.textContent.includes('to_onnx')).length;
"""

EAGER_IMAGES = """
for (const img of document.images) {
    if (img.loading === 'lazy') { img.loading = 'eager'; img.src = img.src; }
}
"""
IMAGES_DONE = "return Array.from(document.images).every(img => img.complete);"
BROKEN_IMAGES = """
return Array.from(document.images).filter(img => !(img.naturalWidth > 0))
    .map(img => img.getAttribute('src'));
"""


def check_landing(driver, base: str) -> list[str]:
    driver.get(base + "index.html")
    rows = wait_for(driver, COMPARISON_TABLE, timeout=5)
    return [] if rows else ["index.html: no <table> in a section headed 'How it compares'"]


def check_search(driver, base: str) -> list[str]:
    driver.get(base + "search.html?q=to_onnx")
    found = wait_for(driver, SEARCH_RESULTS)
    return [] if found else ["search.html?q=to_onnx: no result mentions to_onnx"]


def check_images(driver, base: str, page: str) -> list[str]:
    driver.get(base + page)
    driver.execute_script(EAGER_IMAGES)
    wait_for(driver, IMAGES_DONE)
    return [f"{page}: image {src!r} does not load" for src in driver.execute_script(BROKEN_IMAGES)]


def image_pages(root: str) -> list[str]:
    "The landing page, the gallery indexes and the benchmark pages."
    pages = ["index.html", *GALLERY_INDEXES]
    pages.extend(
        os.path.relpath(p, root).replace(os.sep, "/")
        for p in sorted(glob.glob(os.path.join(root, "bench", "*.html")))
    )
    return [p for p in pages if os.path.exists(os.path.join(root, p))]


def run_checks(driver, base: str, root: str) -> list[str]:
    "Every check; one line per problem."
    problems = []

    def step(name, problems_of_step):
        problems.extend(problems_of_step)
        problems.extend(f"{name}: JavaScript error: {m}" for m in console_errors(driver))

    step("index.html", check_landing(driver, base))
    step("search.html", check_search(driver, base))
    for page in image_pages(root):
        step(page, check_images(driver, base, page))
    return problems


#: scrolls to the element ANCHOR, true once it is at the top of the window
SCROLLED_TO = """
var e = document.getElementById('ANCHOR');
if (!e) return true;
var top = e.getBoundingClientRect().top;
if (Math.abs(top) < 60 && document.readyState === 'complete') return true;
e.scrollIntoView();
return false;
"""


def take_screenshots(driver, base: str, pages: list[str], folder: str) -> list[str]:
    "Saves one PNG per page (``api/index.html#anchor`` scrolls to the anchor)."
    os.makedirs(folder, exist_ok=True)
    paths = []
    for page in pages:
        driver.get(base + page)
        wait_for(driver, IMAGES_DONE, timeout=5)
        if "#" in page:  # the layout above the anchor settles late: scroll until it stays
            for _ in range(2):  # twice: a late layout shift moves it once more
                wait_for(driver, SCROLLED_TO.replace("ANCHOR", page.split("#", 1)[1]), timeout=5)
                time.sleep(0.5)
        name = page.replace("/", "_").replace("#", "__").replace(".html", "") + ".png"
        path = os.path.join(folder, name)
        driver.save_screenshot(path)
        paths.append(path)
    return paths


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument(
        "root",
        nargs="?",
        default=os.path.join(
            os.path.dirname(os.path.abspath(__file__)), "..", "_doc", "_build", "html"
        ),
    )
    parser.add_argument("--screenshots", help="folder where the screenshots go")
    parser.add_argument(
        "--page",
        action="append",
        default=[],
        help="page to take a screenshot of (repeat), relative to root",
    )
    parser.add_argument("--no-checks", action="store_true", help="only the screenshots")
    args = parser.parse_args(argv)
    root = os.path.abspath(args.root)
    if not os.path.exists(os.path.join(root, "index.html")):
        print(f"site_check: no index.html in {root!r}, build the documentation first")
        return 1
    t0 = time.time()
    try:
        with serve(root) as base:
            driver = make_driver()
            try:
                problems = [] if args.no_checks else run_checks(driver, base, root)
                if args.screenshots:
                    for path in take_screenshots(
                        driver, base, args.page or ["index.html"], args.screenshots
                    ):
                        print(f"site_check: screenshot {path}")
            finally:
                driver.quit()
    except SiteCheckError as e:
        print(f"site_check: {e}")
        return 1
    for line in problems:
        print(f"site_check: {line}")
    status = "FAILED" if problems else "OK"
    print(f"site_check: {len(problems)} problem(s) in {root} ({time.time() - t0:.0f} s): {status}")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
