"""The pyright ratchet of 'make lint' (tools/pyright_check.py): a file may not gain
errors, the baseline only goes down, and the committed baseline names real files."""

import importlib.util
import json
import os

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
spec = importlib.util.spec_from_file_location(
    "pyright_check", os.path.join(ROOT, "tools", "pyright_check.py")
)
pyright_check = importlib.util.module_from_spec(spec)
spec.loader.exec_module(pyright_check)


def _diag(path, line=0):
    return {
        "file": os.path.join(ROOT, path),
        "severity": "error",
        "message": "m",
        "range": {"start": {"line": line}},
    }


def test_counts_are_relative_to_the_root():
    counts = pyright_check.count_per_file([_diag("a/b.py"), _diag("a/b.py", 3), _diag("c.py")])
    assert counts == {"a/b.py": 2, "c.py": 1}


def test_a_file_gaining_errors_is_a_regression():
    baseline = {"a.py": 2, "b.py": 1}
    assert pyright_check.regressions(baseline, {"a.py": 2, "b.py": 0}) == []
    bad = pyright_check.regressions(baseline, {"a.py": 3, "new.py": 1})
    assert bad == [
        "a.py: 3 errors, the baseline allows 2",
        "new.py: 1 errors, the baseline allows 0",
    ]


def test_update_lowers_and_never_raises():
    baseline = {"a.py": 5, "b.py": 1, "c.py": 2}
    assert pyright_check.lowered(baseline, {"a.py": 3, "c.py": 9}) == {"a.py": 3, "c.py": 2}


def test_committed_baseline_names_existing_files():
    with open(pyright_check.BASELINE, encoding="utf-8") as f:
        baseline = json.load(f)
    missing = [p for p in baseline if not os.path.exists(os.path.join(ROOT, p))]
    assert not missing, f"baseline entries for deleted files: {missing} (run --update)"
    assert all(isinstance(n, int) and n > 0 for n in baseline.values())
