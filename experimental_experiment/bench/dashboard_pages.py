"""The tables of each benchmark page (``_doc/bench/*.rst``), as reStructuredText: the run
they come from, the direction that is better, the exporters side by side, units in the
headers, failures-only views of the long tables.

.. code-block:: python

    from experimental_experiment.bench.dashboard_pages import llm_latency_tables

    print(llm_latency_tables())
"""

from __future__ import annotations

import collections

from . import dashboard as _d
from .report_format import cell, direction, fmt, list_table, ratio


def _join(*parts: str) -> str:
    return "\n\n".join(p for p in parts if p) + "\n"


def _bold(text: str) -> str:
    return f"**{text}**"


def _status(value) -> str:
    return str(value or "")


def _cut_note(rows: list[dict]) -> str:
    """A sentence when details of the file were cut at 120 characters (runs before the
    runner kept whole lines)."""
    cut = any(len(part) == 120 for r in rows for part in _detail(r.get("detail")).split(" <- "))
    return (
        "Some details stop mid-word: the run that wrote the file cut each line at "
        "120 characters (the benchmark now keeps whole lines)."
        if cut
        else ""
    )


def _detail(text) -> str:
    """A detail written for a csv-table (````text````) as plain text."""
    text = str(text or "").strip()
    return text[2:-2] if text.startswith("``") and text.endswith("``") else text


def _details(summary: str, body: str) -> str:
    """``body`` folded in an HTML ``<details>`` element (open it to read)."""
    return _join(
        ".. raw:: html\n\n    <details><summary>" + summary + "</summary>",
        body,
        ".. raw:: html\n\n    </details>",
    )


# export_time.rst


def export_time_tables() -> str:
    rows = _d.read_rows("export_time.csv")
    onnx = [r for r in rows if r["exporter"] in ("to_onnx", "torch.onnx")]
    ratios = _d.export_time_ratios(rows)
    return _join(
        _d.run_line("export_time.csv"),
        _bold("Export time (s)") + " " + direction(True),
        _d.pivot_table(rows, ["model"], "exporter", [("seconds", "(s)", fmt)]),
        _bold("Ratios") + " " + direction(True, "below 1x, to_onnx is faster"),
        list_table(
            ["model", "to_onnx (s)", "to_onnx / torch.onnx", "to_onnx / capture"],
            [
                [r["model"], fmt(r["to_onnx"]), ratio(r["vs_torch_onnx"]), ratio(r["vs_capture"])]
                for r in ratios
            ],
        ),
        *_one_table_per_field(
            onnx,
            ["model"],
            "exporter",
            [
                ("n_nodes", "Nodes", ""),
                ("max_abs_diff", "Largest difference with eager", ""),
                ("peak_rss_mb", "Peak resident memory of the process", "(MB)"),
            ],
        ),
    )


def _one_table_per_field(
    rows: list[dict],
    index: list[str],
    column: str,
    fields: list[tuple[str, str, str]],
    lower: bool = True,
) -> list[str]:
    """One narrow table per ``(field, title, unit)``, the exporters side by side, rather
    than one wide table whose columns would break words."""
    out = []
    for name, title, unit in fields:
        out.append(_bold(f"{title} {unit}".strip()) + " " + direction(lower))
        out.append(_d.pivot_table(rows, index, column, [(name, unit, fmt)]))
    return out


def export_time_errors() -> str:
    rows = [r for r in _d.read_rows("export_time.csv") if r.get("error")]
    if not rows:
        return "None."
    return list_table(
        ["model", "exporter", "error"],
        [[r["model"], r["exporter"], r["error"]] for r in rows],
        widths=[15, 15, 70],
        escape=True,
    )


# llm_latency.rst


def _cell_rows(name: str) -> list[dict]:
    rows = _d.read_rows(name)
    for r in rows:
        r["cell"] = f"{r['size']} {r['phase']}"
    return rows


def llm_latency_tables() -> str:
    rows = _cell_rows("llm_latency.csv")
    exporters = _d.ordered(
        (r["exporter"] for r in rows),
        first=("to_onnx default+onnxruntime", "builder", "torch.onnx"),
    )
    one = [r for r in rows if r["threads"] == "1"]
    return _join(
        _d.run_line("llm_latency.csv"),
        _bold("Median latency (ms)") + " " + direction(True),
        _d.pivot_table(
            rows, ["cell", "threads"], "exporter", [("latency_ms", "(ms)", fmt)], columns=exporters
        ),
        _bold("Latency / builder's")
        + " "
        + direction(True, "below 1x, faster than onnxruntime-genai's builder"),
        _d.pivot_table(
            [r for r in rows if r["exporter"] not in ("builder", "eager")],
            ["cell", "threads"],
            "exporter",
            [("vs_builder", "", ratio)],
            columns=[e for e in exporters if e not in ("builder", "eager")],
        ),
        _bold("Kernels onnxruntime runs per step (1 thread)") + " " + direction(True),
        _d.pivot_table(
            [r for r in one if r["exporter"] != "eager"],
            ["cell"],
            "exporter",
            [("kernels", "", fmt)],
            columns=[e for e in exporters if e != "eager"],
        ),
    )


def llm_precision_tables() -> str:
    """Tables of ``llm_precision.csv``: latency per runner, ours / the builder's per cell
    and runtime, peak memory and size on disk."""
    rows = _cell_rows("llm_precision.csv")
    for r in rows:
        r["runner"] = f"{r['exporter']} {r['runtime']}"
    ours = [r for r in rows if r["exporter"] == "ours"]
    one = [r for r in rows if r["threads"] == "1" and r["phase"] == "prefill"]
    return _join(
        _d.run_line("llm_precision.csv"),
        _bold("Ours / builder's latency")
        + " "
        + direction(True, "below 1x, our package is faster than onnxruntime-genai's builder"),
        _d.pivot_table(
            ours, ["cell", "threads", "precision"], "runtime", [("vs_builder", "", ratio)]
        ),
        _bold("Median latency (ms)") + " " + direction(True),
        _d.pivot_table(
            rows, ["cell", "threads", "precision"], "runner", [("latency_ms", "(ms)", fmt)]
        ),
        _bold("Peak resident memory (MB) of a fresh process, 1 thread") + " " + direction(True),
        _d.pivot_table(one, ["size", "precision"], "runner", [("peak_rss_mb", "", fmt)]),
        _bold("Size on disk (MB)") + " " + direction(True),
        _d.pivot_table(
            [r for r in one if r["runtime"] == "genai"],
            ["size", "precision"],
            "exporter",
            [("disk_mb", "(MB)", fmt)],
        ),
    )


def quantized_latency_table() -> str:
    """int8 QDQ latency against float32 (``quantized_models.csv``, InferenceSession, one
    thread) per model, flow and exporter."""
    rows = [
        r
        for r in _d.read_rows("quantized_models.csv")
        if r.get("latency_int8_ms") and r.get("latency_fp32_ms")
    ]
    return _join(
        _d.run_line("quantized_models.csv"),
        _bold("int8 / float32 latency") + " " + direction(True, "below 1x, int8 is faster"),
        list_table(
            ["model", "flow", "exporter", "int8 (ms)", "float32 (ms)", "int8 / fp32"],
            [
                [
                    r["model"],
                    r["flow"],
                    r["exporter"],
                    fmt(r["latency_int8_ms"]),
                    fmt(r["latency_fp32_ms"]),
                    ratio(float(r["latency_int8_ms"]) / float(r["latency_fp32_ms"])),
                ]
                for r in rows
            ],
        ),
    )


def llm_latency_patterns_table() -> str:
    rows = _cell_rows("llm_latency_patterns.csv")
    base = "to_onnx default+onnxruntime"
    for r in rows:
        variant = r["exporter"][len(base) :] if r["exporter"].startswith(base) else ""
        r["variant"] = variant or (
            "default+onnxruntime" if r["exporter"] == base else r["exporter"]
        )
    return _join(
        _d.run_line("llm_latency_patterns.csv"),
        _bold("Median latency (ms) and ratio to the builder's") + " " + direction(True),
        _d.pivot_table(
            rows,
            ["variant"],
            "cell",
            [("latency_ms", "(ms)", fmt), ("vs_builder", "/ builder", ratio)],
            widths=[40, 15, 15, 15, 15],
        ),
    )


# llm_models.rst


def llm_models_table() -> str:
    rows = _d.read_rows("llm_models.csv")
    bad = _d.failures(rows)
    decoding = {(r["model"], r["cache"]): r["decoding"] for r in rows if r.get("decoding")}

    def steps(by: dict) -> str:
        r = next(iter(by.values()))
        return cell(decoding.get((r["model"], r["cache"]), ""))

    return _join(
        _d.run_line("llm_models.csv"),
        f"{len(rows) - len(bad)} of {len(rows)} rows pass"
        + (f", failing: {', '.join(r['model'] for r in bad)}." if bad else "."),
        _d.pivot_table(bad, ["model", "cache"], "exporter", [("status", "", _status)])
        if bad
        else "",
        _bold("Export time (s)") + " " + direction(True),
        _d.pivot_table(rows, ["model", "cache"], "exporter", [("export_time", "(s)", fmt)]),
        _bold("Largest difference with eager")
        + " "
        + direction(True)
        + " ``decoding``: greedy decoding with to_onnx's model against ``generate``.",
        _d.pivot_table(
            rows,
            ["model", "cache"],
            "exporter",
            [("max_abs_diff", "", fmt)],
            extra=[("decoding", steps)],
        ),
    )


# constructs.rst


def constructs_tables() -> str:
    rows = _d.read_rows("constructs.csv")
    details = collections.defaultdict(list)
    for r in rows:
        if r.get("detail"):
            details[r["construct"]].append(f"{r['exporter']}: {_detail(r['detail'])}")
    return _join(
        _d.run_line("constructs.csv"),
        _cut_note(rows),
        _d.pivot_table(
            rows,
            ["construct"],
            "exporter",
            [("status", "", _status)],
            extra=[
                (
                    "detail (failures)",
                    lambda by: cell(" / ".join(details[next(iter(by.values()))["construct"]])),
                )
            ],
            widths=[20, 10, 10, 60],
        ),
    )


def control_flow_table() -> str:
    rows = _d.read_rows("control_flow.csv")
    for r in rows:
        r["bodies"] = (
            f"{r['body_nodes_raw']} → {r['body_nodes']} (main graph {r['main_nodes']})"
            if r["status"] == "pass"
            else r["status"]
        )
    return _join(
        _d.run_line("control_flow.csv"),
        _cut_note(rows),
        _bold("Nodes inside bodies and functions, without → with optimization")
        + " "
        + direction(True),
        _d.pivot_table(
            rows,
            ["construct"],
            "exporter",
            [("bodies", "", str)],
            extra=[
                (
                    "detail",
                    lambda by: cell(
                        " / ".join(
                            f"{e}: {_detail(r['detail'])}" for e, r in by.items() if r.get("detail")
                        )
                    ),
                )
            ],
            widths=[18, 20, 20, 42],
        ),
    )


# optim_speed.rst


def optim_speed_tables(name: str = "optim_speed.csv") -> str:
    rows = _d.read_rows(name)
    onnx = [r for r in rows if r["variant"] != "eager"]
    ratios = [r for r in onnx if r["variant"] != "torch.onnx"]
    return _join(
        _d.run_line(name),
        _bold("Latency (ms)") + " " + direction(True),
        _d.pivot_table(rows, ["model"], "variant", [("latency_ms", "(ms)", fmt)]),
        _bold("Latency / torch.onnx.export's")
        + " "
        + direction(True, "below 1x, faster than torch.onnx.export"),
        _d.pivot_table(ratios, ["model"], "variant", [("speed_vs_torch_onnx", "", ratio)]),
        _bold("Nodes") + " " + direction(True),
        _d.pivot_table(onnx, ["model"], "variant", [("nodes", "", fmt)]),
        _bold("Largest difference with eager") + " " + direction(True),
        _d.pivot_table(onnx, ["model"], "variant", [("max_abs_diff", "", fmt)]),
    )


# op_coverage.rst

COVERAGE_STATUSES = ["pass", "export-fail", "runtime-fail", "mismatch", "capture-fail", "skipped"]


def op_coverage_summary() -> str:
    rows = _d.read_rows("op_coverage.csv")
    exporters = _d.ordered(r["exporter"] for r in rows)
    counts = collections.Counter((r["exporter"], r["status"]) for r in rows)
    rates = []
    for e in exporters:
        tried = sum(counts[e, s] for s in COVERAGE_STATUSES[:4])
        rates.append(f"{counts[e, 'pass'] / max(tried, 1):.1%} ({counts[e, 'pass']} / {tried})")
    return _join(
        _d.run_line("op_coverage.csv"),
        _bold("Operators by status")
        + " "
        + direction(False, "pass rate; skipped and capture-fail are excluded from it"),
        _d.status_counts(rows, order=COVERAGE_STATUSES),
        list_table(["", *exporters], [["pass rate", *rates]]),
    )


def _coverage_table(rows: list[dict]) -> str:
    """Operators x exporters: status (samples passed / samples), then the detail of the
    failing exporters in one column, one paragraph each."""
    exporters = _d.ordered(r["exporter"] for r in rows)

    def detail(by: dict) -> str:
        failed = [
            e
            for e in exporters
            if e in by and by[e]["status"] not in ("pass", "skipped") and by[e]["detail"]
        ]
        texts = {by[e]["detail"] for e in failed}
        if len(texts) == 1 and len(failed) > 1:
            return cell(texts.pop())
        return "\n\n        ".join(cell(f"{e}: {by[e]['detail']}") for e in failed)

    for r in rows:
        r["status_passed"] = f"{r['status']} ({r['passed']}/{r['samples']})"
    return _d.pivot_table(
        rows,
        ["op"],
        "exporter",
        [("status_passed", "", lambda v: v)],
        extra=[("detail of the failures", detail)],
        widths=[18, *([14] * len(exporters)), 82 - 14 * len(exporters)],
    )


def op_coverage_failures() -> str:
    """Every operator one exporter fails (the other exporter beside it), full details."""
    rows = _d.failing_keys(_d.read_rows("op_coverage.csv"), "op")
    ours = {r["op"] for r in _d.failures(rows) if r["exporter"] == "to_onnx"}
    rows.sort(key=lambda r: (r["op"] not in ours, r["op"]))
    n = len({r["op"] for r in rows})
    cut = sum(r["detail"].rstrip().endswith(" for") for r in rows)
    note = (
        f"{cut} details end at *for*: the run that wrote the file kept the first line "
        "of the message only, the operator was on the next one (the benchmark now "
        "keeps it)."
        if cut
        else ""
    )
    return _join(
        f"{n} operators fail with at least one exporter, the {len(ours)} that "
        "to_onnx fails first (status, then samples passed / samples).",
        note,
        _coverage_table(rows),
    )


def op_coverage_all() -> str:
    rows = _d.read_rows("op_coverage.csv")
    return _details(
        f"All {len({r['op'] for r in rows})} operators (click to open)", _coverage_table(rows)
    )


# index.rst

PAGES = [
    ("l-bench-export-time", "export time at real sizes (s)", "lower", "export_time.csv"),
    (
        "l-bench-llm-models",
        "tiny transformers models with a cache: export time, discrepancies",
        "lower",
        "llm_models.csv",
    ),
    (
        "l-bench-llm-latency",
        "LLM latency in onnxruntime against the builder (ms)",
        "lower",
        "llm_latency.csv",
    ),
    (
        "l-bench-optim-speed",
        "node count and latency of the optimized models (ms)",
        "lower",
        "optim_speed_real.csv",
    ),
    (
        "l-bench-op-coverage",
        "PyTorch OpInfo operators converted and checked",
        "higher",
        "op_coverage.csv",
    ),
    ("l-bench-constructs", "hard constructs, control flow", "higher", "constructs.csv"),
    (
        "l-bench-zoo",
        "transformers and diffusers model types exported and checked",
        "higher",
        "zoo.csv",
    ),
]


def bench_index() -> str:
    """One line per benchmark page: what it measures, which way is better, its run."""
    body = [
        [f":ref:`{label}`", what, f"{better} is better", _d.run_short(name)]
        for label, what, better, name in PAGES
        if _d.read_rows(name)
    ]
    return list_table(
        ["page", "measures", "direction", "run (date, commit, versions)"],
        body,
        widths=[20, 40, 12, 28],
    )


# tutorial/large_models.rst (the table of _doc/bench/large_model.csv)


def large_model_table() -> str:
    """Export of large models (weights never loaded): time, peak memory, ratio."""
    rows = _d.read_rows("large_model.csv")
    return _join(
        _d.run_line("large_model.csv"),
        _bold("Export time and peak memory") + " " + direction(True, "time, peak memory"),
        list_table(
            ["case", "time (s)", "peak RSS (GB)", "weights (GB)", "peak RSS / weights", "details"],
            [
                [
                    cell(r["case"]),
                    fmt(r["time_s"]),
                    fmt(r["peak_rss_gb"]),
                    fmt(r["weights_gb"]),
                    ratio(r["peak_over_weights"]),
                    cell(r.get("details", "").replace("; ", ", ")),
                ]
                for r in rows
            ],
            widths=[18, 10, 12, 12, 12, 36],
        ),
    )
