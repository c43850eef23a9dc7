"""Latency of Llama-like decoders at LLM sizes in onnxruntime: :func:`to_onnx` (default
patterns, default+onnxruntime patterns, or any pattern string), ``torch.onnx.export
(dynamo=True)``, onnxruntime-genai's model builder and eager PyTorch, with the same
random weights, in one run.

.. code-block:: bash

    python -m experimental_experiment.bench.llm_latency --sizes small,medium \\
        --threads 1,2 --output _doc/bench/llm_latency.csv --genai-path /work/genai
    python -m experimental_experiment.bench.llm_latency --sizes tiny --prefill 16 \\
        --past 32 --repeat 3

Cells: a prefill of ``--prefill`` tokens (empty cache) and one decoding step with a
cache of ``--past`` positions, batch 1, float32, for every intra-op thread count. Every
ONNX graph runs in ``onnxruntime.InferenceSession`` on CPU (default session options,
onnxruntime's own graph optimizations included). Latency: median of ``--repeat``
(prefill) or ``--decode-repeat`` (decoding step) repetitions after warm-up runs, the
exporters timed in turns inside every repetition (one run of each, the order rotating)
so that the load of a shared machine affects them alike. Ratios are latency / latency
of the builder and of torch.onnx.export (below 1 is faster);
``min_ms`` is the fastest repetition (less sensitive to the load of other jobs).
``max_abs_diff`` compares the logits with eager's. A second session with
``enable_profiling`` gives the time per operator type (``--profile-output`` CSV: calls and
milliseconds per run). The builder runs in a subprocess with ``--genai-path`` prepended
to PYTHONPATH (``pip install --target <folder> --no-deps onnxruntime-genai``); its
column is skipped with the reason when it cannot be imported.
"""

from __future__ import annotations

import argparse
import bisect
import csv
import json
import logging
import os
import statistics
import sys
import tempfile
import time
from collections import defaultdict

import numpy as np
import torch

from . import llm_exporters as lx
from ._timing import interleaved_medians

logger = logging.getLogger("experimental_experiment.bench.llm_latency")

#: exporter labels: ``to_onnx <patterns>`` takes any pattern string
EXPORTERS = ("to_onnx default", "to_onnx default+onnxruntime", "torch.onnx", "builder", "eager")
COLUMNS = (
    "size",
    "phase",
    "seq",
    "past",
    "threads",
    "exporter",
    "nodes",
    "kernels",
    "latency_ms",
    "min_ms",
    "vs_builder",
    "vs_torch_onnx",
    "max_abs_diff",
    "export_s",
    "error",
)
PROFILE_COLUMNS = ("size", "phase", "threads", "exporter", "op_type", "calls", "time_ms", "share")


def export_all(model, config, exporters, folder: str, genai_path: str | None) -> dict:
    """label -> ``{"path", "export_s", "nodes", "error"}`` (eager has no path)."""
    import onnx

    out = {}
    for label in exporters:
        res = out[label] = {"path": None, "export_s": None, "nodes": None, "error": ""}
        if label == "eager":
            continue
        try:
            if label.startswith("to_onnx "):
                path = os.path.join(folder, label.replace(" ", "_").replace("+", "_") + ".onnx")
                res["path"], res["export_s"] = lx.export_to_onnx(
                    model, config, label.split(" ", 1)[1], path
                )
            elif label == "torch.onnx":
                res["path"], res["export_s"] = lx.export_torch_onnx(
                    model, config, os.path.join(folder, "torch_onnx.onnx")
                )
            elif label == "builder":
                reason = lx.builder_available(genai_path)
                if reason:
                    res["error"] = f"skipped: {reason}"
                    continue
                res["path"], res["export_s"] = lx.export_builder(model, folder, genai_path)
            else:
                raise ValueError(f"unknown exporter {label!r}, expected {EXPORTERS}")
            graph = onnx.load(res["path"], load_external_data=False).graph
            res["nodes"], res["inputs"] = len(graph.node), [i.name for i in graph.input]
        except Exception as e:  # an exporter failing is a row, the others go on
            res["error"] = f"{type(e).__name__}: {str(e).splitlines()[0][:200]}"
            logger.warning("%s failed: %s", label, res["error"])
    return out


def _session(path: str, threads: int, profile_prefix: str | None = None):
    import onnxruntime

    opts = onnxruntime.SessionOptions()
    opts.intra_op_num_threads = threads
    opts.inter_op_num_threads = 1
    if profile_prefix:
        opts.enable_profiling = True
        opts.profile_file_prefix = profile_prefix
    return onnxruntime.InferenceSession(path, opts, providers=["CPUExecutionProvider"])


def _runners(exported: dict, model, config, feeds: dict, threads: int, expected):
    """label -> (function running one step, max_abs_diff on the logits)."""
    runners, diffs = {}, {}
    n_layers = config.num_hidden_layers
    for label, res in exported.items():
        if res["error"]:
            continue
        if label == "eager":
            kwargs = lx.eager_inputs(feeds, config, model)
            runners[label] = lambda kw=kwargs: model(**kw)
            diffs[label] = 0.0
            continue
        sess = _session(res["path"], threads)
        names = [i.name for i in sess.get_inputs()]
        sfeeds = lx.session_feeds(names, feeds, n_layers)
        got = sess.run(None, sfeeds)[0]
        diffs[label] = float(np.abs(got.astype(np.float64) - expected).max())
        runners[label] = lambda s=sess, f=sfeeds: s.run(None, f)
    return runners, diffs


def profile_by_op_type(
    path: str, feeds: dict, threads: int, runs: int, prefix: str
) -> tuple[dict[str, tuple[float, float]], float]:
    """``({op_type: (calls per run, ms per run)}, kernels per run)`` from onnxruntime's
    profiler (one warm-up run, then ``runs`` runs, kernel events only)."""
    sess = _session(path, threads, prefix)
    for _ in range(runs + 2):  # two warm-up runs, left out by aggregate_profile
        sess.run(None, feeds)
    filename = sess.end_profiling()
    with open(filename) as f:
        events = json.load(f)
    os.remove(filename)
    return aggregate_profile(events, runs)


def aggregate_profile(events: list[dict], runs: int) -> tuple[dict, float]:
    """Sums the kernel events (``cat == "Node"``, name ending with ``_kernel_time``) of
    every one of the last ``runs`` model runs by operator type; returns the median over
    the runs of every sum (a run disturbed by the machine's load does not count)."""
    starts = sorted(
        e["ts"] for e in events if e.get("cat") == "Session" and e.get("name") == "model_run"
    )[-runs:]
    if not starts:
        return {}, 0.0
    per_run: dict[str, list[list[float]]] = defaultdict(lambda: [[0, 0.0] for _ in starts])
    for e in events:
        if e.get("cat") != "Node" or not e.get("name", "").endswith("_kernel_time"):
            continue
        k = bisect.bisect_right(starts, e["ts"]) - 1
        if k < 0:
            continue
        cell = per_run[e.get("args", {}).get("op_name", "?")][k]
        cell[0] += 1
        cell[1] += e["dur"]
    summary = {
        op: (statistics.median(c for c, _ in v), statistics.median(d for _, d in v) / 1000)
        for op, v in per_run.items()
    }
    return summary, sum(c for c, _ in summary.values())


def _add_ratios(rows: list[dict]) -> None:
    by = {r["exporter"]: r for r in rows}
    for r in rows:
        for base, col in (("builder", "vs_builder"), ("torch.onnx", "vs_torch_onnx")):
            b = by.get(base, {}).get("latency_ms")
            r[col] = r["latency_ms"] / b if b and r["latency_ms"] else None


def bench_cell(ctx: dict, phase: str, seq: int, past: int, threads: int) -> tuple:
    """Rows (one per exporter) and profile rows of one cell."""
    config, model, exported = ctx["config"], ctx["model"], ctx["exported"]
    feeds = lx.make_feeds(config, 1, seq, past, seed=ctx["seed"])
    torch.set_num_threads(threads)
    with torch.no_grad():
        expected = model(**lx.eager_inputs(feeds, config, model)).logits.numpy()
        runners, diffs = _runners(exported, model, config, feeds, threads, expected)
        warmup, repeat = (2, ctx["repeat"]) if seq > 1 else (5, ctx["decode_repeat"])
        medians = interleaved_medians(runners, warmup, repeat)
    base = dict(size=ctx["size"], phase=phase, seq=seq, past=past, threads=threads)
    rows, prof_rows = [], []
    for label, res in exported.items():
        row = dict(
            base,
            exporter=label,
            nodes=res["nodes"],
            kernels=None,
            latency_ms=medians[label][0] * 1000 if label in medians else None,
            min_ms=medians[label][1] * 1000 if label in medians else None,
            max_abs_diff=diffs.get(label),
            export_s=res["export_s"],
            error=res["error"],
        )
        rows.append(row)
        if label in runners and label != "eager" and ctx["profile"]:
            sfeeds = lx.session_feeds(res["inputs"], feeds, config.num_hidden_layers)
            summary, row["kernels"] = profile_by_op_type(
                res["path"],
                sfeeds,
                threads,
                3 if seq > 1 else 10,
                os.path.join(ctx["folder"], "prof"),
            )
            total = sum(ms for _, ms in summary.values()) or 1.0
            for op, (n, ms) in sorted(summary.items(), key=lambda kv: -kv[1][1]):
                prof_rows.append(
                    dict(base, exporter=label, op_type=op, calls=n, time_ms=ms, share=ms / total)
                )
        logger.info("%s", row)
    _add_ratios(rows)
    return rows, prof_rows


def _fmt(v) -> str:
    if v is None:
        return ""
    if isinstance(v, float):
        return f"{v:.4g}"
    return str(v)


def write_csv(rows: list[dict], columns, filename: str) -> None:
    """Writes the rows atomically (a temporary file renamed)."""
    tmp = filename + ".tmp"
    with open(tmp, "w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=columns, extrasaction="ignore")
        writer.writeheader()
        writer.writerows({c: _fmt(r.get(c)) for c in columns} for r in rows)
    os.replace(tmp, filename)


def format_table(rows: list[dict]) -> str:
    """A markdown table of the latency rows."""
    cols = [c for c in COLUMNS if c not in ("export_s",)]
    lines = ["| " + " | ".join(cols) + " |", "|" + "---|" * len(cols)]
    lines += ["| " + " | ".join(_fmt(r.get(c)) for c in cols) + " |" for r in rows]
    return "\n".join(lines)


def run(
    sizes,
    exporters,
    threads,
    prefill: int,
    past: int,
    repeat: int,
    *,
    decode_repeat: int | None = None,
    genai_path: str | None = None,
    profile: bool = True,
    seed: int = 0,
    folder: str | None = None,
) -> tuple[list[dict], list[dict]]:
    """The whole grid: returns (latency rows, profile rows); ``repeat`` repetitions for
    the prefill, ``decode_repeat`` (default ``4 * repeat``) for the decoding step."""
    rows, prof = [], []
    with tempfile.TemporaryDirectory(dir=folder) as tmp:
        for size in sizes:
            config, model = lx.make_llama(size, seed)
            sub = os.path.join(tmp, size)
            os.makedirs(sub)
            exported = export_all(model, config, exporters, sub, genai_path)
            ctx = dict(
                size=size,
                config=config,
                model=model,
                exported=exported,
                repeat=repeat,
                decode_repeat=decode_repeat or 4 * repeat,
                profile=profile,
                seed=seed,
                folder=sub,
            )
            for n_threads in threads:
                for phase, seq, length in (("prefill", prefill, 0), ("decode", 1, past)):
                    r, p = bench_cell(ctx, phase, seq, length, n_threads)
                    rows.extend(r)
                    prof.extend(p)
            del model, ctx
    return rows, prof


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m experimental_experiment.bench.llm_latency",
        description="onnxruntime latency of Llama-like decoders per exporter.",
    )
    parser.add_argument(
        "--sizes", default="small,medium", help=f"comma-separated sizes among {','.join(lx.SIZES)}"
    )
    parser.add_argument(
        "--exporters",
        default=",".join(EXPORTERS),
        help="comma-separated exporters: 'to_onnx <patterns>', torch.onnx, builder, eager",
    )
    parser.add_argument("--threads", default="1,2", help="intra-op thread counts")
    parser.add_argument("--prefill", type=int, default=512, help="prompt length")
    parser.add_argument("--past", type=int, default=2048, help="cache length (decode)")
    parser.add_argument("--repeat", type=int, default=10, help="timed repetitions of the prefill")
    parser.add_argument(
        "--decode-repeat",
        type=int,
        default=None,
        help="timed repetitions of the decoding step (4 * repeat)",
    )
    parser.add_argument(
        "--genai-path",
        default=os.environ.get("GENAI_PATH"),
        help="folder holding onnxruntime_genai (pip --target)",
    )
    parser.add_argument("--no-profile", action="store_true", help="no profiling")
    parser.add_argument("--output", default=None, help="latency CSV")
    parser.add_argument("--profile-output", default=None, help="profile CSV")
    parser.add_argument("-v", "--verbose", action="count", default=0)
    ns = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO if ns.verbose else logging.WARNING)
    sizes = [s for s in ns.sizes.split(",") if s]
    unknown = [s for s in sizes if s not in lx.SIZES]
    if unknown:
        parser.error(f"unknown sizes {unknown}, expected {list(lx.SIZES)}")
    exporters = [e.strip() for e in ns.exporters.split(",") if e.strip()]
    bad = [e for e in exporters if e not in EXPORTERS and not e.startswith("to_onnx ")]
    if bad:
        parser.error(f"unknown exporters {bad}, expected {EXPORTERS} or 'to_onnx <patterns>'")
    threads = [int(t) for t in ns.threads.split(",") if t]
    begin = time.perf_counter()
    rows, prof = run(
        sizes,
        exporters,
        threads,
        ns.prefill,
        ns.past,
        ns.repeat,
        decode_repeat=ns.decode_repeat,
        genai_path=ns.genai_path,
        profile=not ns.no_profile,
    )
    if ns.output:
        write_csv(rows, COLUMNS, ns.output)
    if ns.profile_output:
        write_csv(prof, PROFILE_COLUMNS, ns.profile_output)
    print(format_table(rows))
    print(f"wall time: {time.perf_counter() - begin:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
