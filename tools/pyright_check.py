"""Runs pyright (basic mode, configured in pyproject.toml) and fails when a file has
more errors than ``tools/pyright_baseline.json`` allows.

.. code-block:: bash

    python tools/pyright_check.py            # the check 'make lint' runs
    python tools/pyright_check.py --update   # after fixing errors: lowers the baseline

The baseline records the errors per file when the check was introduced; it may only
go down (``--update`` refuses to raise a count), so new code is typed and old code
gets better one file at a time.
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BASELINE = os.path.join(ROOT, "tools", "pyright_baseline.json")


def run_pyright() -> list[dict]:
    """The error diagnostics of ``pyright --outputjson`` run at the repository root."""
    exe = os.path.join(os.path.dirname(sys.executable), "pyright")
    cmd = [exe] if os.path.exists(exe) else [sys.executable, "-m", "pyright"]
    proc = subprocess.run([*cmd, "--outputjson"], cwd=ROOT, capture_output=True, text=True)
    try:
        report = json.loads(proc.stdout)
    except json.JSONDecodeError as e:
        raise RuntimeError(
            f"pyright did not print its JSON report (exit {proc.returncode}): "
            f"{(proc.stderr or proc.stdout).strip()[-500:]}"
        ) from e
    return [d for d in report["generalDiagnostics"] if d["severity"] == "error"]


def count_per_file(diagnostics: list[dict]) -> dict[str, int]:
    """Errors per file, paths relative to the repository root with '/' separators."""
    counts = collections.Counter(
        os.path.relpath(d["file"], ROOT).replace(os.sep, "/") for d in diagnostics
    )
    return dict(sorted(counts.items()))


def regressions(baseline: dict[str, int], current: dict[str, int]) -> list[str]:
    """Files with more errors than the baseline allows, as readable lines."""
    return [
        f"{path}: {n} errors, the baseline allows {baseline.get(path, 0)}"
        for path, n in sorted(current.items())
        if n > baseline.get(path, 0)
    ]


def lowered(baseline: dict[str, int], current: dict[str, int]) -> dict[str, int]:
    """The baseline with each count lowered to the current one (never raised)."""
    return {
        path: min(n, current.get(path, 0))
        for path, n in baseline.items()
        if min(n, current.get(path, 0)) > 0
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--update", action="store_true", help="lowers the baseline to the current counts"
    )
    args = parser.parse_args(argv)
    diagnostics = run_pyright()
    current = count_per_file(diagnostics)
    with open(BASELINE, encoding="utf-8") as f:
        baseline = json.load(f)
    bad = regressions(baseline, current)
    total, allowed = sum(current.values()), sum(baseline.values())
    if bad:
        worse = {p for p, n in current.items() if n > baseline.get(p, 0)}
        for d in diagnostics:
            path = os.path.relpath(d["file"], ROOT).replace(os.sep, "/")
            if path in worse:
                line = d["range"]["start"]["line"] + 1
                print(f"{path}:{line}: {d['message'].splitlines()[0]}")
        print("pyright: new errors (fix them, or annotate what pyright cannot infer):")
        print("\n".join(f"  {b}" for b in bad))
        return 1
    if args.update:
        with open(BASELINE, "w", encoding="utf-8") as f:
            json.dump(lowered(baseline, current), f, indent=1, sort_keys=True)
            f.write("\n")
    print(
        f"pyright: {total} errors, baseline {allowed}"
        + (" (lower it: python tools/pyright_check.py --update)" if total < allowed else "")
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
