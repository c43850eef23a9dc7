"""reStructuredText views of a zoo CSV (:mod:`experimental_experiment.bench.zoo`) for the
documentation: totals per exporter, failures grouped by cause, the table model type x
exporter grouped by head. Nothing is rerun.

.. code-block:: python

    from experimental_experiment.bench.zoo_report import load, render_totals

    rows, meta = load("_doc/bench/zoo.csv")
    print(render_totals(rows, meta))
"""

from __future__ import annotations

import collections
import csv
import json
import os
import statistics

from .report_format import cell, fmt
from .zoo import read_rows


def load(csv_path: str) -> tuple[list[dict], dict]:
    """Rows of the CSV and the JSON next to it (an empty dict when there is none)."""
    meta_path = os.path.splitext(csv_path)[0] + ".json"
    meta = {}
    if os.path.exists(meta_path):
        with open(meta_path, encoding="utf-8") as f:
            meta = json.load(f)
    return read_rows(csv_path), meta


def _exporters(rows: list[dict]) -> list[str]:
    return sorted({r["exporter"] for r in rows}, key=lambda e: (e != "to_onnx", e))


def ran(row: dict) -> bool:
    """Whether the exporter of ``row`` ran on it: the tiny model was built (no failure
    at the config stage, the zoo's own) and the exporter did not refuse it (``skip``)."""
    return row["stage"] != "config" and row["status"] != "skip"


def _median(values: list[float]) -> float | None:
    return statistics.median(values) if values else None


def exporter_summary(
    rows: list[dict], exporters: list[str] | None = None, types: set[str] | None = None
) -> dict[str, dict]:
    """Per exporter, over the cases it ran (``ran``), restricted to the model types
    of ``types`` when given: ``passed``, ``ran``, ``refused`` (skip rows), the median
    export time (s) and node count over the cases it exported (``exported`` of them,
    whether the check passed or not).

    .. code-block:: python

        summary = exporter_summary(rows)
        print(summary["to_onnx"]["passed"], summary["to_onnx"]["median_time"])
    """
    out = {}
    for e in exporters or _exporters(rows):
        sel = [
            r for r in rows if r["exporter"] == e and (types is None or r["model_type"] in types)
        ]
        done = [r for r in sel if ran(r)]
        exported = [
            r
            for r in done
            if r.get("export_time") not in (None, "") and r.get("nodes") not in (None, "")
        ]
        out[e] = dict(
            passed=sum(r["status"] == "pass" for r in done),
            ran=len(done),
            refused=sum(r["status"] == "skip" for r in sel),
            exported=len(exported),
            median_time=_median([float(r["export_time"]) for r in exported]),
            median_nodes=_median([float(r["nodes"]) for r in exported]),
        )
    return out


def common_types(rows: list[dict], exporters: list[str]) -> set[str]:
    """The model types every exporter of ``exporters`` ran (``ran``)."""
    sets = [{r["model_type"] for r in rows if r["exporter"] == e and ran(r)} for e in exporters]
    return set.intersection(*sets) if sets else set()


def _list_table(header: list[str], body: list[list[str]], widths: str = "") -> list[str]:
    lines = [".. list-table::", "    :header-rows: 1", f"    :widths: {widths or 'auto'}"]
    lines.append("")
    for row in [header, *body]:
        lines.append(f"    * - {cell(row[0])}")
        for c in row[1:]:
            # a cell of several paragraphs (separated by an empty line)
            paragraphs = [cell(p) for p in str(c).split("\n\n")]
            lines.append(f"      - {paragraphs[0]}")
            for p in paragraphs[1:]:
                lines += ["", f"        {p}"]
    return lines


def render_totals(rows: list[dict], meta: dict) -> str:
    """Date, versions, number of types tried out of the listed ones, pass counts per
    exporter overall and per head."""
    lines = []
    types = {r["model_type"] for r in rows}
    if meta:
        v = ", ".join(f"{k} {val}" for k, val in sorted(meta.get("versions", {}).items()))
        commit = f", exporter at commit ``{meta['commit'][:10]}``" if meta.get("commit") else ""
        lines += [f"Run of {meta.get('date', '?')}{commit} ({v}).", ""]
    lines += [
        f"{len(types)} model types tried out of {meta.get('listed', '?')} listed "
        "by transformers' auto mappings.",
        "",
    ]
    walls = sorted(float(r["wall_time"]) for r in rows if r.get("wall_time"))
    if walls:
        lines += [
            f"Wall time of the cases: {sum(walls) / 60:.0f} minutes summed over "
            f"{len(walls)} cases (two run at once with ``--jobs 2``), median "
            f"{walls[len(walls) // 2]:.1f} s per case (one process per case, model built "
            "and run in eager mode included).",
            "",
        ]
    exporters = _exporters(rows)
    runs = meta.get("runs", {})
    if len({(v.get("date"), v.get("commit")) for v in runs.values()}) > 1:
        lines += [
            "Runs per exporter: "
            + ", ".join(
                f"``{e}`` {runs[e].get('date', '?')}"
                + (f" (commit ``{runs[e]['commit'][:10]}``)" if runs[e].get("commit") else "")
                for e in exporters
                if e in runs
            )
            + ".",
            "",
        ]
    heads = sorted({r["head"] for r in rows})
    counts = collections.Counter((r["head"], r["exporter"], r["status"]) for r in rows)
    config = collections.Counter((r["head"], r["exporter"]) for r in rows if r["stage"] == "config")
    body = []
    for head in [*heads, "all"]:
        line = [head]
        for e in exporters:
            sel = [h for h in heads if head in ("all", h)]
            ok = sum(counts[h, e, "pass"] for h in sel)
            n = ok + sum(counts[h, e, "fail"] for h in sel)
            built = n - sum(config[h, e] for h in sel)
            line.append(f"{ok} / {n} ({ok} / {built} built)")
        body.append(line)
    lines += _list_table(["head", *[f"{e} (pass / tried)" for e in exporters]], body)
    lines += [
        "",
        "*built*: the cases whose tiny model and inputs ran in eager mode (a "
        "failure at the config stage is the zoo's, not the exporter's).",
    ]
    refused = collections.Counter(r["exporter"] for r in rows if r["status"] == "skip")
    if refused:
        lines += [
            "",
            "Refused before tracing (status ``skip``, not counted): "
            + ", ".join(f"``{e}`` {n}" for e, n in sorted(refused.items()))
            + ".",
        ]
    return "\n".join(lines)


def render_causes(rows: list[dict], top: int = 25) -> str:
    """Failures grouped by stage and cause for every exporter, with examples."""
    groups: dict[tuple, list[dict]] = collections.defaultdict(list)
    for r in rows:
        if r["status"] == "fail":
            groups[r["exporter"], r["stage"], r["cause"]].append(r)
    exporters = _exporters(rows)
    body = []
    for (e, stage, cause), rs in sorted(
        groups.items(), key=lambda kv: (exporters.index(kv[0][0]), -len(kv[1]), kv[0][1], kv[0][2])
    )[: top * len(exporters)]:
        examples = ", ".join(r["model_type"] for r in rs[:4]) + (", ..." if len(rs) > 4 else "")
        label = "(the error)" if cause.startswith(f"{stage}: ") else cause
        body.append([e, stage, label, str(len(rs)), examples, rs[0]["error"]])
    if not body:
        return "No failure."
    return "\n".join(
        _list_table(
            ["exporter", "stage", "cause", "cases", "examples", "first error of the first example"],
            body,
            widths="10 10 18 6 18 38",
        )
    )


def _status(r: dict | None) -> str:
    if r is None:
        return ""
    if r["status"] == "pass":
        return "pass"
    if r["cause"].startswith(f"{r['stage']}: "):  # the cause is the error itself
        return r["stage"]
    if r["cause"].startswith(r["stage"]):  # conversion of aten.xxx
        return r["cause"]
    return f"{r['stage']}: {r['cause']}"


def render_stages(rows: list[dict]) -> str:
    """Cases per stage of failure (``pass`` first) and exporter."""
    exporters = _exporters(rows)
    counts = collections.Counter((r["stage"] or "pass", r["exporter"]) for r in rows)
    stages = ["pass", *sorted({r["stage"] for r in rows if r["stage"]})]
    body = [[s, *[str(counts[s, e]) for e in exporters]] for s in stages]
    return "\n".join(_list_table(["stage", *exporters], body))


def render_failures(rows: list[dict]) -> str:
    """Every model type one exporter fails, the exporters side by side, with the full
    error of each failing case."""
    exporters = _exporters(rows)
    by_type: dict[str, dict[str, dict]] = collections.defaultdict(dict)
    for r in rows:
        by_type[r["model_type"]][r["exporter"]] = r
    body = []
    for model_type in sorted(by_type):
        rs = by_type[model_type]
        if all(r["status"] in ("pass", "skip") for r in rs.values()):
            continue
        errors = {e: rs[e]["error"] for e in exporters if e in rs and rs[e]["error"]}
        same = len(set(errors.values())) == 1
        text = (
            next(iter(errors.values()))
            if same and len(errors) == len(exporters)
            else "\n\n".join(f"{e}: {err}" for e, err in errors.items())
        )
        body.append([model_type, *[_status(rs.get(e)) for e in exporters], text])
    if not body:
        return "No failure."
    return "\n".join(
        _list_table(
            ["model type", *exporters, "error (one text when both exporters fail the same way)"],
            body,
            widths=" ".join(["18", *["19"] * len(exporters), "44"]),
        )
    )


def genai_column(csv_path: str) -> dict[str, str]:
    """Model type -> what its onnxruntime-genai package did (a ``genai_zoo.csv``):
    ``ok``, ``mismatch``, or ``failed`` with the step that failed; empty when the file
    does not exist.

    :param csv_path: the CSV written by ``python -m experimental_experiment.bench.genai_zoo``
    :return: one short text per model type packaged
    """
    if not os.path.exists(csv_path):
        return {}
    with open(csv_path, encoding="utf-8") as f:
        rows = list(csv.DictReader(f))
    return {
        r["model_type"]: (
            f"failed ({r['stage']})" if r["status"] == "failed" and r["stage"] else r["status"]
        )
        for r in rows
    }


def render_table(rows: list[dict], genai: dict[str, str] | None = None) -> str:
    """One section per head, one line per model type, for every exporter its status,
    export time (s) and node count, and the largest difference with eager; with
    ``genai`` (:func:`genai_column`), a last column in the sections holding a packaged
    type: what its onnxruntime-genai package did."""
    exporters = _exporters(rows)
    genai = genai or {}
    by_head: dict[str, dict[str, dict]] = collections.defaultdict(dict)
    for r in rows:
        by_head[r["head"]].setdefault(r["model_type"], {})[r["exporter"]] = r
    lines = []
    for head in sorted(by_head):
        lines += [f".. rubric:: {head} ({len(by_head[head])} model types)", ""]
        with_genai = any(t in genai for t in by_head[head])
        body = []
        for model_type in sorted(by_head[head]):
            rs = by_head[head][model_type]
            cls = next((r["model_class"] for r in rs.values() if r.get("model_class")), "")
            line = [model_type, cls]
            for e in exporters:
                r = rs.get(e)
                ok = r is not None and r["status"] == "pass"
                line += [fmt(r["export_time"]) if ok else _status(r), fmt(r["nodes"]) if ok else ""]
            diffs = [
                fmt(rs[e]["max_diff"]) for e in exporters if e in rs and rs[e]["status"] == "pass"
            ]
            body.append(
                [*line, " / ".join(diffs)] + ([genai.get(model_type, "")] if with_genai else [])
            )
        header = ["model type", "class"]
        for e in exporters:
            header += [f"{e} (s)", f"{e} nodes"]
        header.append("max diff")
        lines += _list_table([*header, "genai package"] if with_genai else header, body)
        lines.append("")
    return "\n".join(lines)


def common_cases(rows: list[dict], exporters: list[str]) -> set[tuple[str, str]]:
    """The (model type, head) pairs every exporter of ``exporters`` ran (``ran``)."""
    sets = [
        {(r["model_type"], r["head"]) for r in rows if r["exporter"] == e and ran(r)}
        for e in exporters
    ]
    return set.intersection(*sets) if sets else set()


def render_heads(rows: list[dict], meta: dict | None = None) -> str:
    """One line per head of a ``--heads all`` CSV: model types tried, then per exporter
    the cases passed out of those whose tiny model ran (``built``), to_onnx's failures
    and skipped cases, the most frequent cause of its failures or the skip reason; with
    several exporters, a sentence comparing them on the cases all of them ran (``meta``:
    the JSON of the run; exporters run at different times get a caveat on the times)."""
    exporters = _exporters(rows)
    by_head: dict[str, list[dict]] = collections.defaultdict(list)
    for r in rows:
        by_head[r["head"]].append(r)
    body = []
    for head in sorted(by_head):
        rs = by_head[head]
        first = [r for r in rs if r["exporter"] == exporters[0]]
        count = collections.Counter(r["status"] for r in first)
        causes = collections.Counter(r["cause"] for r in first if r["status"] == "fail")
        skips = sorted({r["cause"] for r in first if r["status"] == "skip"})
        top = ", ".join(f"{c} ({n})" for c, n in causes.most_common(2))
        passed = []
        for e in exporters:
            done = [r for r in rs if r["exporter"] == e and ran(r)]
            passed.append(f"{sum(r['status'] == 'pass' for r in done)} / {len(done)}")
        body.append(
            [
                head,
                str(len(first)),
                *passed,
                str(count["fail"]),
                str(count["skip"]),
                top or "; ".join(skips),
            ]
        )
    header = [
        "head",
        "tried",
        *[f"{e} pass / built" for e in exporters],
        f"{exporters[0]} fail",
        "skip",
        "main causes / skip reason",
    ]
    widths = " ".join(["18", "5", *["9"] * len(exporters), "5", "5", "40"])
    lines = _list_table(header, body, widths)
    if len(exporters) > 1:
        runs = (meta or {}).get("runs", {})
        separate = len({runs[e].get("date") for e in exporters if e in runs}) > 1
        lines += ["", _compare_heads(rows, exporters, separate)]
    return "\n".join(lines)


def _compare_heads(rows: list[dict], exporters: list[str], separate: bool = False) -> str:
    """Pass counts, median export time and node count of every exporter on the cases
    all of them ran; ``separate``: the exporters ran at different times."""
    common = common_cases(rows, exporters)
    same = [r for r in rows if (r["model_type"], r["head"]) in common]
    both = common_cases([r for r in same if r["status"] == "pass"], exporters)
    summary = exporter_summary(same, exporters)
    passed = exporter_summary([r for r in same if (r["model_type"], r["head"]) in both], exporters)
    parts = [f"``{e}`` {summary[e]['passed']}" for e in exporters]
    medians = [
        f"``{e}`` {passed[e]['median_time']:.2f} s and {passed[e]['median_nodes']:.0f} nodes"
        for e in exporters
        if passed[e]["median_time"] is not None
    ]
    text = (
        f"On the {len(common)} cases every exporter ran (the tiny model built, not "
        f"refused), cases passed: {', '.join(parts)}."
    )
    if medians:
        text += (
            f" On the {len(both)} cases all of them passed, median export time and node "
            f"count: {'; '.join(medians)}."
        )
        if separate:
            text += (
                " The exporters ran at different times on a shared machine loaded "
                "differently: their export times do not compare, their node counts do."
            )
    return text
