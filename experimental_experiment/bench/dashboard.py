"""Tables and plots of the documentation, read from the benchmark results in
``_doc/bench/*.csv`` (``make html`` renders them, it never reruns a benchmark).

.. code-block:: python

    from experimental_experiment.bench.dashboard import headline, pivot_rst, read_rows

    print(headline())  # the comparison shown on the landing page
    rows = read_rows("export_time.csv")
    print(pivot_rst(rows, "model", "exporter", "seconds"))
"""

from __future__ import annotations

import collections
import csv
import math
import os
import statistics


def bench_dir() -> str:
    """``_doc/bench`` whether the caller runs from the repository or from ``_doc``."""
    here = os.path.dirname(os.path.abspath(__file__))
    return os.path.normpath(os.path.join(here, "..", "..", "_doc", "bench"))


def read_rows(name: str) -> list[dict]:
    """Rows of ``_doc/bench/<name>``, an empty list when the file does not exist."""
    path = os.path.join(bench_dir(), name)
    if not os.path.exists(path):
        return []
    with open(path, encoding="utf-8") as f:
        return list(csv.DictReader(f))


def sig3(value) -> str:
    """A number with 3 significant digits, '' for a missing value."""
    if value in (None, ""):
        return ""
    x = float(value)
    if x == 0 or not math.isfinite(x):
        return f"{x:g}"
    digits = max(0, 2 - int(math.floor(math.log10(abs(x)))))
    return f"{x:.{digits}f}"


def list_table(header: list[str], body: list[list[str]]) -> str:
    """A reStructuredText list-table (a sentence when there is no row)."""
    if not body:
        return "*No benchmark result yet.*"
    lines = [".. list-table::", "    :header-rows: 1", ""]
    for row in [header, *body]:
        lines.append(f"    * - {row[0]}")
        lines += [f"      - {cell}" for cell in row[1:]]
    return "\n".join(lines)


def pivot(rows: list[dict], index: str, column: str, value: str) -> dict:
    """``{index value: {column value: value}}`` keeping the order of the rows."""
    table: dict = collections.OrderedDict()
    for r in rows:
        table.setdefault(r[index], {})[r[column]] = r.get(value) or (
            "failed" if r.get("error") else "")
    return table


def pivot_rst(rows: list[dict], index: str, column: str, value: str, fmt=sig3) -> str:
    """The pivot as a list-table, exporters side by side, numbers with ``fmt``."""
    table = pivot(rows, index, column, value)
    columns = list(dict.fromkeys(r[column] for r in rows))
    body = [[key] + [_cell(values.get(c, ""), fmt) for c in columns]
            for key, values in table.items()]
    return list_table([index, *columns], body)


def _cell(value, fmt) -> str:
    try:
        return fmt(value)
    except (TypeError, ValueError):
        return str(value)


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
        out.append(dict(model=model, to_onnx=ours,
                        vs_torch_onnx=ours / other if ours and other else None,
                        vs_capture=ours / capture if ours and capture else None))
    return out


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
    return ["PyTorch OpInfo operators converted and checked",
            *_pass_counts(rows, lambda r: r["status"] not in ("skipped", "capture-fail"),
                          percent=True)] if rows else None


def _zoo() -> list[str] | None:
    rows = read_rows("zoo.csv")
    return ["model types exported and checked (transformers, diffusers; tiny configs)",
            *_pass_counts(rows, lambda r: r["stage"] != "config")] if rows else None


def _constructs() -> list[str] | None:
    rows = read_rows("constructs.csv")
    return ["hard constructs (star args, complex, vmap, custom ops...)",
            *_pass_counts(rows, lambda r: True)] if rows else None


def _export_time() -> list[str] | None:
    ratios = [r["vs_torch_onnx"] for r in export_time_ratios(read_rows("export_time.csv"))
              if r["vs_torch_onnx"]]
    if not ratios:
        return None
    return ["export time at real sizes, median over models (vision, LLM)",
            f"{statistics.median(ratios):.2f}x torch.onnx's", "reference"]


def _model_latency() -> list[str] | None:
    rows = read_rows("optim_speed_real.csv")
    ours = [_float(r["speed_vs_torch_onnx"]) for r in rows
            if r["variant"] == "to_onnx default" and _float(r.get("speed_vs_torch_onnx"))]
    theirs = [_float(r["latency_ms"]) for r in rows if r["variant"] == "torch.onnx"]
    if not ours or not theirs:
        return None
    return ["onnxruntime latency at real sizes, median over models (vision, LLM; "
            "default optimization)", f"{statistics.median(ours):.2f}x torch.onnx's",
            "reference"]


#: the exporter whose latency the landing page shows
BEST_LATENCY = "to_onnx default+onnxruntime"


def _latency() -> list[str] | None:
    rows = [r for r in read_rows("llm_latency.csv") if r.get("vs_builder")]
    ours = [r for r in rows if r["exporter"] == BEST_LATENCY]
    if not ours:
        return None
    builder = [float(r["vs_builder"]) for r in ours]
    mine = [float(r["vs_torch_onnx"]) for r in ours]
    theirs = [float(r["vs_builder"]) for r in rows if r["exporter"] == "torch.onnx"]
    return ["LLM latency in onnxruntime / onnxruntime-genai builder's (hidden 512 and "
            "1024, prefill 512 tokens, decoding with 2048 cached, 1-2 threads)",
            f"{min(builder):.2f}x to {max(builder):.2f}x (``default+onnxruntime``; "
            f"{min(mine):.2f}x to {max(mine):.2f}x torch.onnx's)",
            f"{min(theirs):.2f}x to {max(theirs):.2f}x" if theirs else ""]


def _cell_name(r: dict) -> str:
    return f"{r['size']} {r['phase']}, {r['threads']} thread(s)"


def latency_table() -> str:
    """Cells x exporters: median ms (ratio to the builder, ratio to torch.onnx)."""
    rows = read_rows("llm_latency.csv")
    exporters = list(dict.fromkeys(r["exporter"] for r in rows))
    table: dict = collections.OrderedDict()
    for r in rows:
        text = "failed" if r.get("error") else (
            f"{sig3(r['latency_ms'])} ({sig3(r['vs_builder'])}, {sig3(r['vs_torch_onnx'])})")
        table.setdefault(_cell_name(r), {})[r["exporter"]] = text
    return list_table(["cell", *exporters],
                      [[c] + [v.get(e, "") for e in exporters] for c, v in table.items()])


def plot_latency(ax=None):
    """Latency divided by the builder's, per cell and exporter (1 = the builder)."""
    import matplotlib.pyplot as plt

    rows = [r for r in read_rows("llm_latency.csv") if r.get("vs_builder")
            and r["exporter"] not in ("builder", "eager")]
    cells = list(dict.fromkeys(_cell_name(r) for r in rows))
    exporters = list(dict.fromkeys(r["exporter"] for r in rows))
    if ax is None:
        _, ax = plt.subplots(figsize=(9, 3.5))
    width = 0.8 / max(len(exporters), 1)
    for k, exporter in enumerate(exporters):
        values = {_cell_name(r): float(r["vs_builder"]) for r in rows
                  if r["exporter"] == exporter}
        ax.bar([i + k * width for i in range(len(cells))],
               [values.get(c, 0) for c in cells], width, label=exporter)
    ax.axhline(1.0, color="black", linewidth=0.8)
    ax.set_xticks([i + 0.4 - width / 2 for i in range(len(cells))],
                  [c.replace(", ", "\n") for c in cells], fontsize=7)
    ax.set_ylabel("latency / builder's")
    ax.set_title("LLM latency in onnxruntime, relative to onnxruntime-genai's builder")
    _legend(ax, exporters)
    return ax


def headline() -> str:
    """The comparison of the landing page, from every benchmark result available."""
    body = [row for row in (_coverage(), _zoo(), _constructs(), _export_time(),
                            _model_latency(), _latency()) if row is not None]
    return list_table(["measured", "to_onnx", "torch.onnx.export(dynamo=True)"], body)


def _legend(ax, labels) -> None:
    if labels:
        ax.legend(fontsize=7)
    else:
        ax.text(0.5, 0.5, "no benchmark result yet", ha="center", transform=ax.transAxes)


def _grouped_bars(ax, table: dict, series: list[str]) -> None:
    """One group of bars per row of the pivot ``table``, one bar per ``series`` (0 when
    missing), the row names under the groups."""
    width = 0.8 / max(len(series), 1)
    for k, name in enumerate(series):
        values = [_float(table[m].get(name)) or 0 for m in table]
        ax.bar([i + k * width for i in range(len(table))], values, width, label=name)
    ax.set_xticks([i + 0.4 - width / 2 for i in range(len(table))], list(table))


def plot_export_time(ax=None):
    """Bar chart: seconds per model and exporter (log scale)."""
    import matplotlib.pyplot as plt

    rows = read_rows("export_time.csv")
    table = pivot(rows, "model", "exporter", "seconds")
    exporters = list(dict.fromkeys(r["exporter"] for r in rows))
    if ax is None:
        _, ax = plt.subplots(figsize=(8, 3.5))
    _grouped_bars(ax, table, exporters)
    ax.set_yscale("log")
    ax.set_ylabel("seconds (log)")
    ax.set_title("Export time, dynamic shapes, one process per case")
    _legend(ax, exporters)
    return ax


def plot_node_counts(name: str = "export_time.csv", ax=None):
    """Node counts of to_onnx and torch.onnx per model."""
    import matplotlib.pyplot as plt

    rows = [r for r in read_rows(name) if r.get("n_nodes")]
    table = pivot(rows, "model", "exporter", "n_nodes")
    if ax is None:
        _, ax = plt.subplots(figsize=(8, 3))
    exporters = list(dict.fromkeys(r["exporter"] for r in rows))
    for k, exporter in enumerate(exporters):
        values = [_float(table[m].get(exporter)) or 0 for m in table]
        ax.bar([i + k * 0.4 for i in range(len(table))], values, 0.4, label=exporter)
    ax.set_xticks([i + 0.2 for i in range(len(table))], list(table))
    ax.set_ylabel("ONNX nodes")
    ax.set_title("Size of the exported graphs")
    _legend(ax, exporters)
    return ax


def plot_speed_ratios(name: str = "optim_speed_real.csv", ax=None):
    """onnxruntime latency over torch.onnx.export's, per model and variant (1 = torch.onnx)."""
    import matplotlib.pyplot as plt

    rows = [r for r in read_rows(name) if _float(r.get("speed_vs_torch_onnx"))
            and r["variant"] != "torch.onnx"]
    table = pivot(rows, "model", "variant", "speed_vs_torch_onnx")
    variants = list(dict.fromkeys(r["variant"] for r in rows))
    if ax is None:
        _, ax = plt.subplots(figsize=(8, 3.5))
    _grouped_bars(ax, table, variants)
    ax.axhline(1.0, color="black", linewidth=0.8)
    ax.set_ylabel("latency / torch.onnx's")
    ax.set_title("onnxruntime latency (CPU, 1 thread), relative to torch.onnx.export")
    _legend(ax, variants)
    return ax
