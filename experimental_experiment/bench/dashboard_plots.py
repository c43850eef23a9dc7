"""Plots of the benchmark pages (matplotlib, one per table), read from ``_doc/bench``.

.. code-block:: python

    from experimental_experiment.bench.dashboard_plots import plot_latency

    plot_latency()
"""

from __future__ import annotations

import collections

from . import dashboard as _d


def _axes(ax, size):
    import matplotlib.pyplot as plt

    if ax is None:
        _, ax = plt.subplots(figsize=size, layout="constrained")
    return ax


def _legend(ax, labels) -> None:
    """The legend under the axes, outside the bars (inside when the caller gave the
    axes of a figure without a constrained layout)."""
    if labels and ax.figure.get_layout_engine() is not None:
        ax.figure.legend(loc="outside lower center", ncols=min(len(labels), 4), fontsize=7)
    elif labels:
        ax.legend(fontsize=7)
    else:
        ax.text(0.5, 0.5, "no benchmark result yet", ha="center", transform=ax.transAxes)


def _grouped_bars(
    ax, table: dict, series: list[str], horizontal: bool = False, fontsize: int = 8
) -> None:
    """One group of bars per row of the pivot ``table``, one bar per ``series`` (0 when
    missing), the row names under (or beside) the groups."""
    width = 0.8 / max(len(series), 1)
    bar = ax.barh if horizontal else ax.bar
    for k, name in enumerate(series):
        values = [_d._float(table[m].get(name)) or 0 for m in table]
        bar([i + k * width for i in range(len(table))], values, width, label=name)
    ticks = [i + 0.4 - width / 2 for i in range(len(table))]
    if horizontal:
        ax.set_yticks(ticks, list(table), fontsize=7)
        ax.invert_yaxis()
    else:
        ax.set_xticks(ticks, list(table), fontsize=fontsize)


def _ratio_bars(ax, rows: list[dict], group: str, series: str, value: str, labels: dict):
    """Grouped bars of a ratio to a reference (the black line at 1): one group per
    distinct ``group`` of the rows, one bar per ``series``; ``labels`` gives the
    ``ylabel``, the ``title``, the figure ``size`` and the tick ``fontsize``."""
    table = _d.pivot(rows, group, series, value)
    names = list(dict.fromkeys(r[series] for r in rows))
    ax = _axes(ax, labels["size"])
    _grouped_bars(ax, table, names, fontsize=labels.get("fontsize", 8))
    ax.axhline(1.0, color="black", linewidth=0.8)
    ax.set_ylabel(labels["ylabel"])
    ax.set_title(labels["title"])
    _legend(ax, names)
    return ax


def _cell_name(r: dict) -> str:
    return f"{r['size']} {r['phase']}, {r['threads']} thread(s)"


def _llm_rows(name: str, keep) -> list[dict]:
    """The rows of an LLM latency CSV with a ratio to the builder that ``keep`` accepts,
    each with its ``cell`` (size, phase, threads on two lines)."""
    rows = [r for r in _d.read_rows(name) if r.get("vs_builder") and keep(r)]
    for r in rows:
        r["cell"] = _cell_name(r).replace(", ", "\n")
    return rows


def plot_latency(ax=None):
    """Latency divided by the builder's, per cell and exporter (1 = the builder)."""
    rows = _llm_rows("llm_latency.csv", lambda r: r["exporter"] not in ("builder", "eager"))
    labels = dict(
        size=(9, 3.5),
        fontsize=7,
        ylabel="latency / builder's (lower is better)",
        title="LLM latency in onnxruntime, relative to onnxruntime-genai's builder",
    )
    return _ratio_bars(ax, rows, "cell", "exporter", "vs_builder", labels)


def plot_precision_ratios(ax=None):
    """Our package's latency divided by the builder's, per cell (size, phase, threads),
    one bar per precision and runtime (``llm_precision.csv``; 1 = the builder)."""
    rows = _llm_rows("llm_precision.csv", lambda r: r["exporter"] == "ours")
    for r in rows:
        r["series"] = f"{r['precision']}, {r['runtime']}"
    labels = dict(
        size=(9, 3.8),
        ylabel="ours / builder's latency (lower is better)",
        title="fp32 and int4 packages, ours against onnxruntime-genai's builder",
    )
    return _ratio_bars(ax, rows, "cell", "series", "vs_builder", labels)


def plot_export_time(ax=None):
    """Bar chart: seconds per model and exporter (log scale)."""
    rows = _d.read_rows("export_time.csv")
    table = _d.pivot(rows, "model", "exporter", "seconds")
    exporters = list(dict.fromkeys(r["exporter"] for r in rows))
    ax = _axes(ax, (8, 3.5))
    _grouped_bars(ax, table, exporters)
    ax.set_yscale("log")
    ax.set_ylabel("seconds, log scale (lower is better)")
    ax.set_title("Export time, dynamic shapes, one process per case")
    _legend(ax, exporters)
    return ax


def plot_node_counts(name: str = "export_time.csv", ax=None):
    """Node counts of to_onnx and torch.onnx per model."""
    rows = [r for r in _d.read_rows(name) if r.get("n_nodes")]
    table = _d.pivot(rows, "model", "exporter", "n_nodes")
    exporters = list(dict.fromkeys(r["exporter"] for r in rows))
    ax = _axes(ax, (8, 3))
    _grouped_bars(ax, table, exporters)
    ax.set_ylabel("ONNX nodes (lower is better)")
    ax.set_title("Size of the exported graphs")
    _legend(ax, exporters)
    return ax


def plot_speed_ratios(name: str = "optim_speed_real.csv", ax=None):
    """onnxruntime latency over torch.onnx.export's, per model and variant (1 = torch.onnx)."""
    rows = [
        r
        for r in _d.read_rows(name)
        if _d._float(r.get("speed_vs_torch_onnx")) and r["variant"] != "torch.onnx"
    ]
    labels = dict(
        size=(8, 3.5),
        ylabel="latency / torch.onnx's (lower is better)",
        title="onnxruntime latency (CPU, 1 thread), relative to torch.onnx.export",
    )
    return _ratio_bars(ax, rows, "model", "variant", "speed_vs_torch_onnx", labels)


def plot_values(
    name: str,
    index: str | list[str],
    column: str,
    value: str,
    ylabel: str,
    title: str,
    log: bool = False,
    horizontal: bool = False,
    ax=None,
):
    """Grouped bars of one value of ``name``: one group per ``index`` (several columns
    are joined), one bar per ``column`` (the exporters)."""
    rows = [r for r in _d.read_rows(name) if _d._float(r.get(value)) is not None]
    if not isinstance(index, str):
        for r in rows:
            r[" ".join(index)] = " ".join(f"{k}={r[k]}" if k != index[0] else r[k] for k in index)
        index = " ".join(index)
    table = _d.pivot(rows, index, column, value)
    series = _d.ordered(r[column] for r in rows)
    ax = _axes(ax, (8, max(3, 0.22 * len(table))) if horizontal else (8, 3.5))
    _grouped_bars(ax, table, series, horizontal=horizontal)
    if log:
        (ax.set_xscale if horizontal else ax.set_yscale)("log")
    (ax.set_xlabel if horizontal else ax.set_ylabel)(ylabel)
    ax.set_title(title)
    _legend(ax, series)
    return ax


def plot_status_counts(
    name: str,
    group: str | None = None,
    ok: str = "pass",
    title: str = "",
    exclude: tuple[str, ...] = ("skipped",),
    ax=None,
):
    """Percentage of the cases passed per exporter (and per ``group``, the heads of the
    zoo), over the cases whose status is not in ``exclude``."""
    rows = _d.read_rows(name)
    exporters = _d.ordered(r["exporter"] for r in rows)
    groups = sorted({r[group] for r in rows}) if group else ["all"]
    tried = collections.Counter(
        (r[group] if group else "all", r["exporter"]) for r in rows if r["status"] not in exclude
    )
    passed = collections.Counter(
        (r[group] if group else "all", r["exporter"]) for r in rows if r["status"] == ok
    )
    table = {
        g: {e: passed[g, e] / tried[g, e] * 100 if tried[g, e] else 0 for e in exporters}
        for g in groups
    }
    ax = _axes(ax, (8, max(2.5, 0.3 * len(groups) + 1)))
    _grouped_bars(ax, table, exporters, horizontal=True)
    ax.set_xlim(0, 100)
    ax.set_xlabel("% passed of the cases tried (higher is better)")
    ax.set_title(title)
    _legend(ax, exporters)
    return ax


def plot_status_breakdown(name: str, statuses: list[str], title: str = "", ax=None):
    """One horizontal bar per exporter, split by status (cases per status)."""
    rows = _d.read_rows(name)
    exporters = _d.ordered(r["exporter"] for r in rows)
    counts = collections.Counter((r["exporter"], r["status"]) for r in rows)
    ax = _axes(ax, (8, 0.6 * len(exporters) + 1.6))
    left = [0] * len(exporters)
    for status in statuses:
        values = [counts[e, status] for e in exporters]
        ax.barh(range(len(exporters)), values, 0.6, left=left, label=status)
        for i, (x, v) in enumerate(zip(left, values)):
            if v >= 25:
                ax.text(x + v / 2, i, str(v), ha="center", va="center", fontsize=7)
        left = [a + b for a, b in zip(left, values)]
    ax.set_yticks(range(len(exporters)), exporters)
    ax.invert_yaxis()
    ax.set_xlabel("operators (more pass is better)")
    ax.set_title(title)
    _legend(ax, statuses)
    return ax
