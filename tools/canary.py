"""Canary against the newest upstream releases (``make test-latest``).

Runs, in the current environment (``.venv-latest``: torch pinned, the newest
transformers, onnx, onnxruntime, onnxscript, onnx_ir and sphinx-gallery), the parts of
the test suite that depend on those packages, then prints a table: the version locked in
``requirements-lock.txt`` and the one installed for every followed package, and per part
the counts, the time and the first error line of every failure. Writes the same as JSON
(read by the site's compatibility page). Exit code 0 when every part passes.

.. code-block:: bash

    python tools/canary.py --output _doc/compatibility_canary.json
"""

from __future__ import annotations

import argparse
import datetime
import importlib.metadata
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
import xml.etree.ElementTree as ET

ROOT = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
FOLLOWED = [
    "torch",
    "transformers",
    "onnx",
    "onnxruntime",
    "onnxscript",
    "onnx-ir",
    "sphinx-gallery",
    "sphinx",
    "numpy",
]
#: one OpInfo test in OPINFO_STRIDE, enough to see a break in the converters
OPINFO_STRIDE = 10

PARTS = {
    "llm": ["_unittests/ut_torch_models"],
    "patches": [
        "_unittests/ut_torch_interpreter/test_patches.py",
        "_unittests/ut_torch_interpreter/test_models.py",
    ],
    "gallery": ["_unittests/ut_doc/test_gallery.py"],
    "opinfo-sample": None,  # selected at run time
}


def locked_versions(path: str) -> dict[str, str]:
    out = {}
    with open(path, encoding="utf-8") as f:
        for line in f:
            line = line.strip()
            if line and not line.startswith("#") and "==" in line:
                name, version = line.split("==", 1)
                out[_normalize(name)] = version
    return out


def _normalize(name: str) -> str:
    return name.lower().replace("_", "-")


def installed_version(name: str) -> str:
    try:
        return importlib.metadata.version(name)
    except importlib.metadata.PackageNotFoundError:
        return "-"


def _opinfo_sample() -> list[str]:
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "_unittests/ut_torch_interpreter/test_opinfo.py",
            "--collect-only",
            "-q",
            "-p",
            "no:cacheprovider",
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
    )
    ids = [line for line in proc.stdout.splitlines() if "::" in line]
    return ids[::OPINFO_STRIDE]


def _first_line(text: str) -> str:
    for line in (text or "").splitlines():
        line = line.strip()
        if line.startswith("E "):
            return line[2:].strip()[:200]
    lines = [line.strip() for line in (text or "").splitlines() if line.strip()]
    return lines[-1][:200] if lines else ""


def run_part(name: str, targets: list[str]) -> dict:
    """Runs pytest on ``targets``, returns counts, time and failures."""
    with tempfile.TemporaryDirectory() as tmp:
        xml_path = os.path.join(tmp, "junit.xml")
        begin = time.perf_counter()
        subprocess.run(
            [
                sys.executable,
                "-m",
                "pytest",
                *targets,
                "-q",
                "-p",
                "no:cacheprovider",
                f"--junitxml={xml_path}",
                "-n",
                "2",
            ],
            cwd=ROOT,
            capture_output=True,
            text=True,
        )
        seconds = time.perf_counter() - begin
        row = dict(part=name, passed=0, failed=0, skipped=0, seconds=round(seconds, 1), failures=[])
        if not os.path.exists(xml_path):
            row["failed"] = 1
            row["failures"].append(dict(test=name, error="pytest did not run"))
            return row
        for case in ET.parse(xml_path).getroot().iter("testcase"):
            failure = case.find("failure")
            if failure is None:
                failure = case.find("error")
            if failure is not None:
                row["failed"] += 1
                text = failure.get("message", "") + "\n" + (failure.text or "")
                row["failures"].append(
                    dict(
                        test=f"{case.get('classname')}::{case.get('name')}", error=_first_line(text)
                    )
                )
            elif case.find("skipped") is not None:
                row["skipped"] += 1
            else:
                row["passed"] += 1
    return row


def format_table(result: dict) -> str:
    lines = ["| package | locked | newest installed |", "|---|---|---|"]
    for name, versions in result["packages"].items():
        mark = "" if versions["locked"] == versions["installed"] else " (new)"
        lines.append(f"| {name} | {versions['locked']} | {versions['installed']}{mark} |")
    lines += ["", "| part | passed | failed | skipped | seconds |", "|---|---|---|---|---|"]
    for row in result["parts"]:
        lines.append(
            f"| {row['part']} | {row['passed']} | {row['failed']} | "
            f"{row['skipped']} | {row['seconds']} |"
        )
    failures = [(row["part"], f) for row in result["parts"] for f in row["failures"]]
    if failures:
        lines += ["", "| part | test | first error line |", "|---|---|---|"]
        lines += [f"| {p} | {f['test']} | {f['error']} |" for p, f in failures]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--output", default="", help="JSON file to write")
    parser.add_argument(
        "--parts", default=",".join(PARTS), help=f"comma-separated parts among {list(PARTS)}"
    )
    args = parser.parse_args(argv)
    locked = locked_versions(os.path.join(ROOT, "requirements-lock.txt"))
    result = dict(
        date=datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
        python=platform.python_version(),
        packages={
            n: dict(
                locked=locked.get(_normalize(n), "-"), installed=installed_version(n).split("+")[0]
            )
            for n in FOLLOWED
        },
        parts=[],
    )
    for name in args.parts.split(","):
        targets = PARTS[name] if PARTS[name] is not None else _opinfo_sample()
        print(f"[canary] {name}: {len(targets)} target(s)", flush=True)
        result["parts"].append(run_part(name, targets))
    result["ok"] = all(row["failed"] == 0 for row in result["parts"])
    print(format_table(result))
    if args.output:
        tmp = args.output + ".tmp"
        with open(tmp, "w", encoding="utf-8") as f:
            json.dump(result, f, indent=1)
            f.write("\n")
        os.replace(tmp, args.output)
    return 0 if result["ok"] else 1


if __name__ == "__main__":
    sys.exit(main())
