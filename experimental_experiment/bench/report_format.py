"""Formatting shared by the benchmark pages: numbers with 3 significant digits, cells
safe in a reStructuredText table, list-tables with widths, and the line citing the run
(date, commit, versions) a table comes from.

.. code-block:: python

    from experimental_experiment.bench.report_format import fmt, list_table, run_line

    fmt(8.940696716308594e-08)  # '8.94e-08'
    fmt("315.1")  # '315'
    print(run_line("llm_latency.csv"))
"""

from __future__ import annotations

import csv
import json
import math
import os
import re
import subprocess

#: packages a run line names, in this order, when they are known
RUN_PACKAGES = ("torch", "transformers", "onnx", "onnxruntime", "onnxscript", "diffusers")


def bench_dir() -> str:
    """``_doc/bench`` of the repository holding this package."""
    here = os.path.dirname(os.path.abspath(__file__))
    return os.path.normpath(os.path.join(here, "..", "..", "_doc", "bench"))


def _number(value) -> float | int | None:
    """``value`` as an int (written without a dot or exponent) or a float, None when it
    is not a number."""
    if isinstance(value, bool):
        return None
    if isinstance(value, (int, float)):
        return value
    text = str(value).strip()
    if re.fullmatch(r"[+-]?\d+", text):
        return int(text)
    try:
        return float(text)
    except ValueError:
        return None


def fmt(value, digits: int = 3) -> str:
    """A number with ``digits`` significant digits: ``''`` for a missing value, integers
    exact (``1013``, ``43,862,016``), scientific notation below 1e-3 and from 1e5 on
    (``8.94e-08``), ``NaN``, ``inf``; any other text is returned unchanged."""
    if value is None or (isinstance(value, str) and not value.strip()):
        return ""
    x = _number(value)
    if x is None:
        return str(value)
    if isinstance(x, int):
        return f"{x:,}" if abs(x) >= 1_000_000 else str(x)
    if math.isnan(x):
        return "NaN"
    if math.isinf(x):
        return "inf" if x > 0 else "-inf"
    if x == 0:
        return "0"
    rounded = float(f"{x:.{digits - 1}e}")
    exponent = math.floor(math.log10(abs(rounded)))
    if exponent < -3 or exponent >= 5:
        return f"{x:.{digits - 1}e}"
    return f"{rounded:.{max(0, digits - 1 - exponent)}f}"


def ratio(value) -> str:
    """A ratio with 3 significant digits followed by ``x`` (``0.972x``)."""
    text = fmt(value)
    return f"{text}x" if text and _number(value) is not None else text


def cell(text) -> str:
    """Text safe in a list-table cell: one line, no inline markup; never shortened."""
    text = " ".join(str(text if text is not None else "").split())
    text = text.replace("\\", "/").replace("`", "'").replace("|", "/")
    for c in "_*":
        text = text.replace(c, "\\" + c)
    return text


def list_table(
    header: list[str],
    body: list[list[str]],
    widths: list[int] | None = None,
    title: str = "",
    escape: bool = False,
) -> str:
    """A reStructuredText list-table (a sentence when there is no row); cells are
    written as given (rst) unless ``escape`` is true; ``widths`` in relative units,
    else ``auto``."""
    if not body:
        return "*No benchmark result yet.*"
    lines = [f".. list-table:: {title}".rstrip(), "    :header-rows: 1"]
    # without widths, the browser sizes the columns to their content (docutils would
    # give every column the same width and break the words of the narrow ones)
    lines.append(f"    :widths: {' '.join(str(w) for w in widths) if widths else 'auto'}")
    lines.append("")
    # a header may break after '+' (``to_onnx default+onnxruntime``): a long unbreakable
    # header would take the width of the other columns and break their words
    header = [str(h).replace("+", "+\u200b") for h in header]
    for row in [header, *body]:
        row = [cell(c) if escape else str(c) for c in row]
        lines.append(f"    * - {row[0]}".rstrip())
        lines += [f"      - {c}".rstrip() for c in row[1:]]
    return "\n".join(lines)


def direction(lower: bool = True, what: str = "") -> str:
    """The sentence saying which way a table reads."""
    word = "Lower" if lower else "Higher"
    return f"*{word} is better{(' (' + what + ')') if what else ''}.*"


def _git_last_commit(path: str) -> tuple[str, str]:
    """Date and short hash of the last commit that wrote ``path`` ('', '' without git)."""
    try:
        out = subprocess.run(
            ["git", "log", "-1", "--format=%cs %h", "--", os.path.basename(path)],
            cwd=os.path.dirname(path),
            capture_output=True,
            text=True,
            timeout=30,
            check=False,
        ).stdout.split()
    except (OSError, subprocess.SubprocessError):
        return "", ""
    return (out[0], out[1]) if len(out) == 2 else ("", "")


def tested_versions() -> str:
    """The versions of README.rst's tested set (its runtime packages)."""
    readme = os.path.join(bench_dir(), "..", "..", "README.rst")
    if not os.path.exists(readme):
        return ""
    with open(readme, encoding="utf-8") as f:
        text = " ".join(f.read().split())
    found = re.search(r"Tested set: ([^;]*)", text)
    if not found:
        return ""
    names = [p.strip() for p in found.group(1).split(",")]
    keep = [p.replace(" (CPU)", "") for p in names if p.split(" ")[0] in RUN_PACKAGES]
    return ", ".join(keep)


def _versions_text(versions) -> str:
    if isinstance(versions, str):
        return versions
    return ", ".join(
        f"{k} {versions[k]}"
        for k in RUN_PACKAGES
        if k in versions and versions[k] != "not installed"
    )


def run_info(name: str, folder: str | None = None) -> dict:
    """Date, commit, versions of the run that wrote ``folder/name``, and where each came
    from: the JSON next to the CSV (``zoo.json``), the CSV's own ``date``, ``commit`` and
    ``versions`` columns, the entry of ``runs.json`` (versions stated by whoever ran it),
    else the last commit that wrote the file (date, hash) and README.rst's tested set."""
    folder = folder or bench_dir()
    path = os.path.join(folder, name)
    info = {"date": "", "commit": "", "versions": "", "source": []}
    meta_path = os.path.splitext(path)[0] + ".json"
    if name.endswith(".csv") and os.path.exists(meta_path):
        with open(meta_path, encoding="utf-8") as f:
            meta = json.load(f)
        info.update(
            date=str(meta.get("date", "")),
            commit=str(meta.get("commit", ""))[:7],
            versions=_versions_text(meta.get("versions", {})),
        )
    if not info["date"] and os.path.exists(path):
        with open(path, encoding="utf-8") as f:
            first = next(csv.DictReader(f), {})
        for key in ("date", "commit", "versions"):
            info[key] = info[key] or first.get(key, "") or ""
    runs_path = os.path.join(folder, "runs.json")
    if os.path.exists(runs_path):
        with open(runs_path, encoding="utf-8") as f:
            entry = json.load(f).get(name, {})
        for key in ("date", "commit", "versions"):
            if not info[key] and entry.get(key):
                info[key] = entry[key]
                info["source"].append(f"runs.json:{key}")
    if not info["date"] or not info["commit"]:
        date, commit = _git_last_commit(path)
        if date and not info["date"]:
            info["date"] = date
            info["source"].append("date")
        if commit and not info["commit"]:
            info["commit"] = commit
            info["source"].append("commit")
    if not info["versions"]:
        info["versions"] = tested_versions()
        info["source"].append("versions")
    return info


def run_line(name: str, folder: str | None = None) -> str:
    """``Run of DATE, commit X (versions).``, saying where an inferred field comes from."""
    info = run_info(name, folder)
    text = f"Run of {info['date'] or 'an unknown date'}"
    if info["commit"]:
        text += f", commit ``{info['commit']}``"
    if info["versions"]:
        text += f" ({info['versions']})"
    text += f", read from ``{name}``."
    notes = []
    inferred = [k for k in ("date", "commit") if k in info["source"]]
    if inferred == ["commit"]:
        notes.append("commit: the one that wrote the file")
    elif inferred:
        notes.append(f"{' and '.join(inferred)} of the commit that wrote the file")
    if "versions" in info["source"]:
        notes.append("versions of the tested set in README.rst")
    if any(k.startswith("runs.json:") for k in info["source"]):
        notes.append("versions stated by the author of the run (``runs.json``)")
    if notes:
        joined = "; ".join(notes)
        text += f" {joined[0].upper()}{joined[1:]}."
    return text


def run_short(name: str, folder: str | None = None) -> str:
    """The run in a few words for a table cell: date, commit, torch and onnxruntime."""
    info = run_info(name, folder)
    keep = [v for v in info["versions"].split(", ") if v.split(" ")[0] in ("torch", "onnxruntime")]
    commit = f" (``{info['commit']}``)" if info["commit"] else ""
    return f"{info['date'][:10]}{commit}; {', '.join(keep)}".strip("; ")


def head_line(text: str, limit: int = 2000) -> str:
    """The first non-empty line of an error message, followed by the second one when the
    first announces it (ends with ``:`` or `` for``: the operator or the command the
    reader needs is there); cut only after ``limit`` characters."""
    lines = [t.strip() for t in str(text).splitlines() if t.strip()]
    if not lines:
        return ""
    line = lines[0]
    if len(lines) > 1 and (line.endswith(":") or line.endswith(" for")):
        line = f"{line} {lines[1]}"
    return line[:limit]
