"""Runs every gallery script of the documentation as a test.

Each script under ``_doc/examples`` and ``_doc/recipes`` (and their subfolders, one per
tier) runs in its own interpreter,
from its own folder (as sphinx-gallery runs it), and fails the test on a non-zero
exit code. The test id is the script's path relative to ``_doc``.
"""

import os
import subprocess
import sys

import pytest

DOC = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "_doc")
GALLERIES = ["examples", "recipes"]
TIMEOUT = 600


def gallery_scripts() -> list[str]:
    scripts = []
    for gallery in GALLERIES:
        folder = os.path.join(DOC, gallery)
        for root, dirs, files in os.walk(folder):
            dirs[:] = sorted(d for d in dirs if not d.startswith(("dump_", "_", ".")))
            scripts.extend(
                os.path.relpath(os.path.join(root, name), DOC)
                for name in sorted(files)
                if name.startswith("plot_") and name.endswith(".py")
            )
    return scripts


@pytest.mark.parametrize("script", gallery_scripts())
def test_gallery_script(script):
    path = os.path.normpath(os.path.join(DOC, script))
    env = dict(os.environ)
    env["MPLBACKEND"] = "Agg"
    # the package must be importable from the script's folder
    root = os.path.normpath(os.path.join(DOC, ".."))
    env["PYTHONPATH"] = os.pathsep.join(p for p in [root, env.get("PYTHONPATH")] if p)
    proc = subprocess.run(
        [sys.executable, os.path.basename(path)],
        cwd=os.path.dirname(path),
        capture_output=True,
        text=True,
        timeout=TIMEOUT,
        env=env,
    )
    if proc.returncode != 0:
        tail = "\n".join(proc.stderr.strip().splitlines()[-30:])
        pytest.fail(f"{script} exited with {proc.returncode}:\n{tail}")
