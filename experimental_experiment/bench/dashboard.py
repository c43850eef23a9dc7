"""Tables of the documentation, read from the benchmark results in ``_doc/bench/*.csv``
(``make html`` renders them, it never reruns a benchmark): pivots with the exporters side
by side, failures-only views, and the headline comparison of the landing page. The
pages themselves are in :mod:`experimental_experiment.bench.dashboard_pages`, the plots
in :mod:`experimental_experiment.bench.dashboard_plots`.

.. code-block:: python

    from experimental_experiment.bench.dashboard import headline, pivot_table, read_rows

    print(headline())  # the comparison shown on the landing page
    rows = read_rows("export_time.csv")
    print(pivot_table(rows, ["model"], "exporter", [("seconds", "(s)", fmt)]))
"""

from __future__ import annotations

import collections
import csv
import json
import os
import statistics
from typing import Callable

from .._deprecation import deprecated
from . import report_format
from .report_format import fmt, list_table


def __getattr__(name: str):
    """``sig3``, the first name of ``report_format.fmt``, is deprecated."""
    if name == "sig3":
        deprecated(
            "experimental_experiment.bench.dashboard.sig3",
            "experimental_experiment.bench.report_format.fmt",
        )
        return fmt
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def bench_dir() -> str:
    """``_doc/bench`` whether the caller runs from the repository or from ``_doc``."""
    return report_format.bench_dir()


def read_rows(name: str) -> list[dict]:
    """Rows of ``_doc/bench/<name>``, an empty list when the file does not exist."""
    path = os.path.join(bench_dir(), name)
    if not os.path.exists(path):
        return []
    with open(path, encoding="utf-8") as f:
        return list(csv.DictReader(f))


def run_line(name: str) -> str:
    """The date, commit and versions of the run that wrote ``name``."""
    return report_format.run_line(name, bench_dir())


def run_short(name: str) -> str:
    """The run of ``name`` in a few words (a cell of the headline)."""
    return report_format.run_short(name, bench_dir())


def ordered(values, first: tuple[str, ...] = ("to_onnx",)) -> list[str]:
    """Distinct values in their order of appearance, ``first`` ones ahead."""
    distinct = list(dict.fromkeys(values))
    return [v for v in first if v in distinct] + [v for v in distinct if v not in first]


def pivot(rows: list[dict], index: str, column: str, value: str) -> dict:
    """``{index value: {column value: value}}`` keeping the order of the rows
    (``failed`` where the row has an error and no value)."""
    table: dict = collections.OrderedDict()
    for r in rows:
        table.setdefault(r[index], {})[r[column]] = r.get(value) or (
            "failed" if r.get("error") else ""
        )
    return table


Field = tuple  # (csv column, header suffix, formatter)


def pivot_table(
    rows: list[dict],
    index: list[str],
    column: str,
    fields: list[Field],
    columns: list[str] | None = None,
    widths: list[int] | None = None,
    extra: list[tuple[str, Callable[[dict], str]]] | None = None,
) -> str:
    """A list-table with one line per distinct ``index`` tuple and, for every value of
    ``column`` (the exporters, side by side), one cell per field
    ``(csv column, header suffix, formatter)``; ``extra`` adds columns computed from the
    rows of a line ``{column value: row}``. A row with an error and no value shows
    ``failed``."""
    columns = columns or ordered(r[column] for r in rows)
    lines: dict = collections.OrderedDict()
    for r in rows:
        lines.setdefault(tuple(r[k] for k in index), {})[r[column]] = r
    header = list(index) + [f"{c} {suffix}".strip() for c in columns for _, suffix, _ in fields]
    header += [name for name, _ in extra or []]
    body = []
    for key, by_col in lines.items():
        line = [report_format.cell(k) for k in key]
        for c in columns:
            r = by_col.get(c)
            for name, _, formatter in fields:
                line.append(_value(r, name, formatter))
        line += [f(by_col) for _, f in extra or []]
        body.append(line)
    return list_table(header, body, widths=widths)


def _value(r: dict | None, name: str, formatter) -> str:
    if r is None:
        return ""
    value = r.get(name)
    if value in (None, "") and (r.get("error") or r.get("status") in ("fail", "failed")):
        return "failed"
    try:
        return report_format.cell(formatter(value))
    except (TypeError, ValueError):
        return report_format.cell(value)


def pivot_rst(
    rows: list[dict], index: str, column: str, value: str, fmt=fmt, unit: str = ""
) -> str:
    """The pivot of one value as a list-table, exporters side by side."""
    return pivot_table(rows, [index], column, [(value, unit, fmt)])


def failures(
    rows: list[dict], status: str = "status", ok: tuple[str, ...] = ("pass", "skipped")
) -> list[dict]:
    """The rows whose ``status`` is not in ``ok``."""
    return [r for r in rows if r.get(status) not in ok]


def failing_keys(
    rows: list[dict], key: str, status: str = "status", ok: tuple[str, ...] = ("pass", "skipped")
) -> list[dict]:
    """Every row of the keys (model, operator...) one of whose rows failed, so that a
    failures-only table still shows the other exporter side by side."""
    bad = {r[key] for r in failures(rows, status, ok)}
    return [r for r in rows if r[key] in bad]


def status_counts(
    rows: list[dict],
    column: str = "exporter",
    status: str = "status",
    order: list[str] | None = None,
) -> str:
    """A list-table: one line per status, one column per exporter, the counts."""
    columns = ordered(r[column] for r in rows)
    counts = collections.Counter((r[status], r[column]) for r in rows)
    statuses = order or ordered((r[status] for r in rows), first=("pass",))
    body = [[s, *[str(counts[s, c]) for c in columns]] for s in statuses]
    body.append(["total", *[str(sum(counts[s, c] for s in statuses)) for c in columns]])
    return list_table([status, *columns], body)


def _float(value) -> float | None:
    try:
        return float(value)
    except (TypeError, ValueError):
        return None


def export_time_ratios(rows: list[dict]) -> list[dict]:
    """Per model: to_onnx's time over torch.onnx's and over the capture's
    (size-oblivious capture, the one to_onnx makes)."""
    table = pivot(rows, "model", "exporter", "seconds")
    out = []
    for model, t in table.items():
        ours = _float(t.get("to_onnx"))
        other = _float(t.get("torch.onnx"))
        capture = _float(t.get("capture size-oblivious"))
        out.append(
            dict(
                model=model,
                to_onnx=ours,
                vs_torch_onnx=ours / other if ours and other else None,
                vs_capture=ours / capture if ours and capture else None,
            )
        )
    return out


# headline of the landing page: one function per row, each returns
# [measured (direction), to_onnx, torch.onnx, reference, run] or None


def _pass_counts(rows: list[dict], keep, percent: bool = False) -> list[str]:
    """'passed / tried' per exporter over the rows ``keep(row)`` accepts."""
    cells = []
    for exporter in ("to_onnx", "torch.onnx"):
        sel = [r for r in rows if r["exporter"] == exporter and keep(r)]
        ok = sum(r["status"] == "pass" for r in sel)
        text = f"{ok} / {len(sel)}"
        cells.append(f"{ok / max(len(sel), 1):.1%} ({text})" if percent else text)
    return cells


def _coverage() -> list[str] | None:
    rows = read_rows("op_coverage.csv")
    return (
        [
            "PyTorch OpInfo operators converted and checked (higher is better)",
            *_pass_counts(
                rows, lambda r: r["status"] not in ("skipped", "capture-fail"), percent=True
            ),
            "",
            run_short("op_coverage.csv"),
        ]
        if rows
        else None
    )


#: the exporters the zoo rows of the headline compare, in their columns
ZOO_EXPORTERS = ("to_onnx", "torch.onnx", "transformers")


def _zoo_cells(summary: dict, key) -> list[str]:
    return [key(summary[e]) if e in summary and summary[e]["ran"] else "" for e in ZOO_EXPORTERS]


def _count(value) -> str:
    """A median of counts: an integer when it is one (``95``), else ``fmt``."""
    return fmt(int(value) if value is not None and value == int(value) else value)


def _passed(s: dict) -> str:
    return f"{s['passed']} / {s['ran']}" + (f" ({s['refused']} refused)" if s["refused"] else "")


def zoo_headline(rows: list[dict], run: str = "", separate_runs: bool = False) -> list[list[str]]:
    """The zoo rows of the headline, one cell per exporter of ``ZOO_EXPORTERS``
    (then the reference and the run): pass counts over the cases each exporter ran
    (the model built, not refused), the same on the model types every exporter ran
    when they differ, the median export time and node count over the cases each
    exporter exported (how many in parentheses). ``separate_runs``: the exporters ran
    at different times (``runs`` in ``zoo.json``), their wall times may not compare."""
    from .zoo_report import common_types, exporter_summary

    if not rows:
        return []
    summary = exporter_summary(rows, list(ZOO_EXPORTERS))
    present = [e for e in ZOO_EXPORTERS if summary[e]["ran"]]
    out = [
        [
            "model types exported and checked (transformers, diffusers; tiny configs; "
            "passed / ran; higher is better)",
            *_zoo_cells(summary, _passed),
            "",
            run,
        ]
    ]
    common = common_types(rows, present)
    if len(present) > 1 and any(summary[e]["ran"] != len(common) for e in present):
        same = exporter_summary(rows, present, types=common)
        out.append(
            [
                f"the same on the {len(common)} model types {', '.join(present)} all ran "
                "(higher is better)",
                *_zoo_cells(same, _passed),
                "",
                run,
            ]
        )
    caveat = (
        "; wall time of separate runs, on machines loaded differently: see the zoo page"
        if separate_runs
        else ""
    )
    out.append(
        [
            "median export time of a zoo model type (s, over the cases each exporter "
            f"exported; lower is better{caveat})",
            *_zoo_cells(summary, lambda s: f"{fmt(s['median_time'])} s ({s['exported']} cases)"),
            "",
            run,
        ]
    )
    out.append(
        [
            "median node count of a zoo model type (over the cases each exporter "
            "exported; lower is better)",
            *_zoo_cells(summary, lambda s: f"{_count(s['median_nodes'])} ({s['exported']} cases)"),
            "",
            run,
        ]
    )
    return out


def _zoo() -> list[list[str]]:
    rows = read_rows("zoo.csv")
    if not rows:
        return []
    meta_path = os.path.join(bench_dir(), "zoo.json")
    runs = {}
    if os.path.exists(meta_path):
        with open(meta_path, encoding="utf-8") as f:
            runs = json.load(f).get("runs", {})
    separate = len({r.get("date") for r in runs.values()}) > 1
    return zoo_headline(rows, run_short("zoo.csv"), separate_runs=separate)


def _constructs() -> list[str] | None:
    rows = read_rows("constructs.csv")
    return (
        [
            "hard constructs (star args, complex, vmap, custom ops...; higher is better)",
            *_pass_counts(rows, lambda r: True),
            "",
            run_short("constructs.csv"),
        ]
        if rows
        else None
    )


def _heads() -> list[str] | None:
    """The (model type, head) cases beyond the first head: to_onnx over the cases whose
    tiny model built, torch.onnx.export over the cases both exporters ran."""
    from .zoo_report import common_cases, ran

    rows = read_rows("zoo_heads.csv")
    ours = [r for r in rows if r["exporter"] == "to_onnx" and ran(r)]
    if not ours:
        return None
    passed = sum(r["status"] == "pass" for r in ours)
    cells = [f"{passed / len(ours):.1%} ({passed} / {len(ours)})", ""]
    common = common_cases(rows, ["to_onnx", "torch.onnx"])
    if common:
        same = [r for r in rows if (r["model_type"], r["head"]) in common]
        for i, e in enumerate(("to_onnx", "torch.onnx")):
            ok = sum(r["status"] == "pass" for r in same if r["exporter"] == e)
            cells[i] += ("; " if cells[i] else "") + f"{ok} / {len(common)} on the cases both ran"
    return [
        "(model type, head) pairs beyond the first head, a sample of every head "
        "(tiny configs; passed / built; higher is better)",
        *cells,
        "",
        run_short("zoo_heads.csv"),
    ]


def _multimodal() -> list[str] | None:
    """Image-text-to-text models exported part by part, generating the eager tokens."""
    rows = read_rows("multimodal.csv")
    built = [r for r in rows if r["status"] != "eager-fail"]
    if not built:
        return None
    passed = sum(r["status"] == "pass" for r in built)
    return [
        "multimodal models (image-text-to-text, Whisper) exported part by part, chained in "
        "onnxruntime: the 8 greedy tokens of eager generate (passed / built; higher is "
        "better)",
        f"{passed / len(built):.1%} ({passed} / {len(built)})",
        "not run",
        "",
        run_short("multimodal.csv"),
    ]


def _export_time() -> list[str] | None:
    ratios = [
        r["vs_torch_onnx"]
        for r in export_time_ratios(read_rows("export_time.csv"))
        if r["vs_torch_onnx"]
    ]
    if not ratios:
        return None
    return [
        "export time at real sizes, median over models (vision, LLM; lower is better)",
        f"{statistics.median(ratios):.2f}x",
        "1x",
        "torch.onnx.export",
        run_short("export_time.csv"),
    ]


def _model_latency() -> list[str] | None:
    rows = read_rows("optim_speed_real.csv")
    ours = [
        _float(r["speed_vs_torch_onnx"])
        for r in rows
        if r["variant"] == "to_onnx default" and _float(r.get("speed_vs_torch_onnx"))
    ]
    theirs = [_float(r["latency_ms"]) for r in rows if r["variant"] == "torch.onnx"]
    if not ours or not theirs:
        return None
    return [
        "onnxruntime latency at real sizes, median over models (vision, LLM; "
        "default optimization; lower is better)",
        f"{statistics.median(ours):.2f}x",
        "1x",
        "torch.onnx.export",
        run_short("optim_speed_real.csv"),
    ]


#: the exporter whose latency the landing page shows
BEST_LATENCY = "to_onnx default+onnxruntime"


def _latency() -> list[str] | None:
    rows = [r for r in read_rows("llm_latency.csv") if r.get("vs_builder")]
    ours = [float(r["vs_builder"]) for r in rows if r["exporter"] == BEST_LATENCY]
    if not ours:
        return None
    theirs = [float(r["vs_builder"]) for r in rows if r["exporter"] == "torch.onnx"]
    return [
        "LLM latency in onnxruntime, to_onnx with its onnxruntime patterns (hidden "
        "512 and 1024, prefill 512 tokens, decoding with 2048 cached, 1-2 threads; "
        "lower is better)",
        f"{min(ours):.2f}x to {max(ours):.2f}x",
        f"{min(theirs):.2f}x to {max(theirs):.2f}x" if theirs else "",
        "1x: onnxruntime-genai's model builder",
        run_short("llm_latency.csv"),
    ]


def headline() -> str:
    """The comparison of the landing page, from every benchmark result available: each
    row says which way is better, what a ratio is relative to, and cites its run. A
    column for transformers' own exporter appears when the zoo has rows of it (the
    other benchmarks leave it empty)."""
    zoo = _zoo()
    third = any(r[3] for r in zoo)
    if not third:  # no transformers row: the two exporters of every benchmark
        zoo = [r[:3] + r[4:] for r in zoo]
    body = [row for row in (_coverage(),) if row is not None] + zoo
    body += [row for row in (_heads(), _multimodal()) if row is not None]
    body += [
        row
        for row in (_constructs(), _export_time(), _model_latency(), _latency())
        if row is not None
    ]
    if third:
        body = [r if len(r) == 6 else [*r[:3], "", *r[3:]] for r in body]
        return list_table(
            [
                "measured",
                "to_onnx",
                "torch.onnx.export (dynamo=True)",
                "transformers' OnnxExporter (zoo only)",
                "ratios relative to",
                "run (date, commit, versions)",
            ],
            body,
            widths=[23, 12, 13, 13, 16, 23],
        )
    return list_table(
        [
            "measured",
            "to_onnx",
            "torch.onnx.export (dynamo=True)",
            "ratios relative to",
            "run (date, commit, versions)",
        ],
        body,
        widths=[25, 13, 15, 21, 26],
    )


__all__ = [
    "ZOO_EXPORTERS",
    "export_time_ratios",
    "failures",
    "failing_keys",
    "headline",
    "list_table",
    "pivot",
    "pivot_rst",
    "pivot_table",
    "read_rows",
    "run_line",
    "status_counts",
    "zoo_headline",
]
