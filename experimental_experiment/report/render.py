"""Writers of an export report (its records, ``ReportData``): Markdown for people,
SARIF 2.1.0 for editors, JSON for machines; :func:`save_report` picks one by the file extension."""

from __future__ import annotations

import json
import os
import pathlib
from typing import Any

from .records import ReportData, SourceLocation

SARIF_SCHEMA = (
    "https://docs.oasis-open.org/sarif/sarif/v2.1.0/errata01/os/schemas/sarif-schema-2.1.0.json"
)
TOOL = "experimental_experiment"

# rule id -> short description (SARIF reportingDescriptor)
RULES = {
    "export-error": "The export failed.",
    "capture-failed": "torch.export.export failed with one capture strategy.",
    "specialized-dimension": "A dimension declared dynamic became a constant.",
    "constrained-dimension": "The user's code restricted the range of a dynamic dimension.",
    "decomposition": "An operator with no converter was decomposed by torch.",
    "warning": "A warning emitted during the export.",
}


def _table(header: list[str], rows: list[list[Any]]) -> list[str]:
    def cell(v):
        return str(v).replace("|", "\\|").replace("\n", " ")

    return ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)] + [
        "| " + " | ".join(cell(v) for v in row) + " |" for row in rows
    ]


def to_markdown(report: ReportData) -> str:
    """Renders the report as Markdown (one section per part, empty parts left out)."""
    lines = [f"# Export report: {report.model or 'model'}", "", f"**status**: {report.status}"]
    if report.error:
        lines += ["", f"**error** ({report.error_type}):", "", "```", report.error.strip(), "```"]
        if report.error_location:
            lines += ["", f"**user's code**: `{report.error_location}`"]
    sections = [
        (
            "Capture attempts",
            ["strategy", "result", "time (s)"],
            [
                [
                    a.description,
                    "ok" if a.success else f"{a.error_type}: {_first(a.error)}",
                    f"{a.time_s:.3f}",
                ]
                for a in report.capture_attempts
            ],
        ),
        (
            "Dynamic dimensions specialized or constrained",
            ["dimension", "what", "guard", "user's code"],
            [[d.dimension, _dim_what(d), d.guard, d.location or "?"] for d in report.dimensions],
        ),
        ("Patches applied", ["patch"], [[p] for p in report.patches]),
        ("Decompositions", ["operator", "why"], [[d.op, d.reason] for d in report.decompositions]),
        (
            "Converters",
            ["aten op", "converter", "nodes"],
            [[c.op, c.converter, c.count] for c in report.converters],
        ),
        ("Timings", ["phase", "time (s)"], [[k, f"{v:.3f}"] for k, v in report.timings.items()]),
        (
            "Rewrites",
            ["pass or pattern", "kind", "applied", "time (s)"],
            [[r.name, r.kind, r.applied, f"{r.time_s:.3f}"] for r in report.rewrites],
        ),
        (
            "Diagnostics",
            ["level", "rule", "message", "location"],
            [[d.level, d.rule, _first(d.message), d.location or ""] for d in report.diagnostics],
        ),
    ]
    if report.nodes_before_optimization is not None:
        lines += [
            "",
            f"**nodes**: {report.nodes_before_optimization} before optimization, "
            f"{report.nodes_after_optimization} after",
        ]
    for title, header, rows in sections:
        if rows:
            lines += ["", f"## {title}", "", *_table(header, rows)]
    return "\n".join(lines) + "\n"


def _first(text: str, n: int = 200) -> str:
    line = text.strip().splitlines()[0] if text.strip() else ""
    return line if len(line) <= n else line[:n] + "..."


def _dim_what(d) -> str:
    if d.kind == "specialized":
        return f"specialized to {d.value}"
    return f"constrained to [{d.min}, {'inf' if d.max is None else d.max}]"


def _location(loc: SourceLocation | None) -> list[dict]:
    if loc is None:
        return []
    path = pathlib.Path(loc.file)
    uri = path.as_uri() if path.is_absolute() else path.as_posix()
    region: dict[str, Any] = {"startLine": max(int(loc.line), 1)}
    if loc.code:
        region["snippet"] = {"text": loc.code}
    physical = {"artifactLocation": {"uri": uri}, "region": region}
    out: dict[str, Any] = {"physicalLocation": physical}
    if loc.function:
        out["logicalLocations"] = [{"name": loc.function, "kind": "function"}]
    return [out]


def _results(report: ReportData) -> list[tuple[str, str, str, SourceLocation | None]]:
    """(rule, level, message, location) for every finding."""
    found = []
    if report.status == "failed":
        found.append(
            (
                "export-error",
                "error",
                f"{report.error_type}: {report.error.strip()}",
                report.error_location,
            )
        )
    for a in report.capture_attempts:
        if not a.success:
            found.append(
                (
                    "capture-failed",
                    "note",
                    f"{a.description}: {a.error_type}: {_first(a.error)}",
                    report.error_location,
                )
            )
    for d in report.dimensions:
        level = "warning" if d.kind == "specialized" else "note"
        found.append(
            (
                f"{d.kind}-dimension",
                level,
                f"{d.dimension} {_dim_what(d)} (guard {d.guard})",
                d.location,
            )
        )
    for d in report.decompositions:
        found.append(("decomposition", "note", f"{d.op}: {d.reason}", None))
    for d in report.diagnostics:
        found.append((d.rule, d.level, d.message, d.location))
    return found


def to_sarif(report: ReportData) -> dict[str, Any]:
    """Renders the report as a SARIF 2.1.0 log: one result per finding, located at the
    user's file and line when known."""
    found = _results(report)
    rule_ids = sorted({rule for rule, *_ in found})
    rules = [{"id": r, "shortDescription": {"text": RULES.get(r, r)}} for r in rule_ids]
    results = []
    for rule, level, message, loc in found:
        res = {
            "ruleId": rule,
            "ruleIndex": rule_ids.index(rule),
            "level": level if level in ("error", "warning", "note") else "none",
            "message": {"text": message or rule},
        }
        locations = _location(loc)
        if locations:
            res["locations"] = locations
        results.append(res)
    run = {
        "tool": {"driver": {"name": TOOL, "rules": rules}},
        "invocations": [{"executionSuccessful": report.status == "success"}],
        "results": results,
        "properties": {
            "model": report.model,
            "status": report.status,
            "timings": dict(report.timings),
        },
    }
    return {"$schema": SARIF_SCHEMA, "version": "2.1.0", "runs": [run]}


def render(report: ReportData, fmt: str) -> str:
    """The report as text: ``fmt`` is ``json``, ``md`` (or ``markdown``) or ``sarif``."""
    if fmt == "json":
        return report.to_json()
    if fmt in ("md", "markdown"):
        return to_markdown(report)
    if fmt == "sarif":
        return json.dumps(to_sarif(report), indent=1)
    raise ValueError(f"unknown report format {fmt!r}, expected json, md or sarif")


def format_of(path: str) -> str:
    """The format a file extension asks for; raises ValueError for another one."""
    ext = os.path.splitext(path)[1].lower().lstrip(".")
    if ext not in ("json", "md", "sarif"):
        raise ValueError(f"a report is saved as .json, .md or .sarif, not {path!r}")
    return ext


def save_report(report: ReportData, path: str) -> None:
    """Writes the report to ``path`` (format from the extension) through a temporary
    file renamed at the end.

    :param report: the report, ``result.report`` after an export
    :param path: ``.json`` (for machines), ``.md`` (for people) or ``.sarif``
        (SARIF 2.1.0, for editors)

    .. code-block:: python

        import torch
        from experimental_experiment.report import save_report
        from experimental_experiment.torch_interpreter import export_program

        res = export_program(torch.nn.Linear(4, 2), (torch.randn(3, 4),))
        save_report(res.report, "report.md")
    """
    from ..xbuilder.model_container import AtomicFiles

    text = render(report, format_of(path))
    path = os.path.abspath(path)
    with AtomicFiles(os.path.dirname(path)) as files:
        files.open(path).write(text.encode("utf-8"))
