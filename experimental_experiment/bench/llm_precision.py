"""Precision and runtime axis of the LLM benchmark: the same random-weight Llama packaged
by this package (:func:`package_model <experimental_experiment.genai.package_model>`,
int4 through :func:`quantize_model <experimental_experiment.quantize.quantize_model>`)
and by onnxruntime-genai's model builder, in float32 and int4 (block 32, accuracy level
4 and accuracy level 0, MatMulNBits' default), each run by onnxruntime-genai
(``og.Model`` and a ``Generator``) and by a plain ``onnxruntime.InferenceSession``.

.. code-block:: bash

    python -m experimental_experiment.bench.llm_precision --sizes small,medium \\
        --threads 1,2 --output _doc/bench/llm_precision.csv \\
        --profile-output _doc/bench/llm_precision_profile.csv
    python -m experimental_experiment.bench.llm_precision --sizes tiny --prefill 16 \\
        --past 32 --repeat 3

A cell is (size, phase, threads, precision): the four runners of the cell (ours and the
builder's, each in both runtimes) are timed in turns (``interleaved_medians``).
``prefill``: the prompt of ``--prefill`` tokens with an empty cache (genai: a new generator and
``append_tokens``); ``decode``: one token with a cache of ``--past`` positions (genai: a
generator that appended ``--past`` tokens, then one ``generate_next_token`` per run, so
its cache grows by a few positions during the measure). ``vs_builder``, ``rss_vs_builder``
and ``disk_vs_builder``: ours / the builder's in the same cell and runtime (below 1:
ours is faster or smaller). ``peak_rss_mb``: peak resident memory of a fresh process
loading the model then running a prefill and a decoding step (script ``_rss_probe.py``).
``disk_mb``: the model and its external data. ``max_abs_diff``: the InferenceSession's
logits against eager PyTorch (float32), which measures the int4 error.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import subprocess
import sys
import tempfile
import time

import numpy as np
import torch

from . import llm_exporters as lx
from ._timing import interleaved_medians
from .llm_latency import _session, profile_by_op_type, write_csv

logger = logging.getLogger("experimental_experiment.bench.llm_precision")

#: precision label -> (precision, accuracy level): ours passes the level to
#: ``quantize_model`` (None: the attribute is left out, MatMulNBits' default 0), the
#: builder gets ``--extra_options accuracy_level=<level>`` (its own CPU default is 4)
PRECISIONS = {"fp32": ("fp32", None), "int4 acc4": ("int4", 4), "int4 acc0": ("int4", None)}
EXPORTERS = ("ours", "builder")
#: optional exporter: ours with the head left in float32 (the package before it quantized
#: the head), ``--exporters ours,builder,"ours float head"``
FLOAT_HEAD = "ours float head"
RUNTIMES = ("genai", "InferenceSession")
COLUMNS = (
    "size",
    "phase",
    "seq",
    "past",
    "threads",
    "precision",
    "accuracy_level",
    "exporter",
    "runtime",
    "nodes",
    "latency_ms",
    "min_ms",
    "vs_builder",
    "peak_rss_mb",
    "rss_vs_builder",
    "disk_mb",
    "disk_vs_builder",
    "max_abs_diff",
    "build_s",
    "error",
)
PROFILE_COLUMNS = (
    "size",
    "phase",
    "threads",
    "precision",
    "exporter",
    "op_type",
    "calls",
    "time_ms",
    "share",
)
_PROBE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "_rss_probe.py")


def package_dir_size(folder: str) -> int:
    """Bytes of the ``.onnx`` files and their external data in a package folder."""
    return sum(
        os.path.getsize(os.path.join(folder, f))
        for f in os.listdir(folder)
        if f.endswith((".onnx", ".onnx.data", ".data"))
    )


def _graph_info(path: str) -> tuple[int, int | None]:
    """(nodes, accuracy level of the first MatMulNBits or None)."""
    import onnx

    graph = onnx.load(path, load_external_data=False).graph
    for node in graph.node:
        if node.op_type == "MatMulNBits":
            levels = [a.i for a in node.attribute if a.name == "accuracy_level"]
            return len(graph.node), levels[0] if levels else 0
    return len(graph.node), None


def build_packages(model, folder: str, precisions, exporters, genai_path: str | None) -> dict:
    """``{(precision, exporter): {"folder", "path", "build_s", "nodes", "accuracy_level",
    "disk_mb", "error"}}``: one genai package per precision and exporter."""
    from ..genai import package_model

    hf = os.path.join(folder, "hf")
    model.save_pretrained(hf)
    lx._write_tokenizer(hf)
    out = {}
    for label in precisions:
        precision, level = PRECISIONS[label]
        for exporter in exporters:
            name = f"{exporter}_{label}".replace(" ", "_")
            res = out[label, exporter] = dict(
                folder=os.path.join(folder, name),
                path=None,
                build_s=None,
                nodes=None,
                accuracy_level=None,
                disk_mb=None,
                error="",
            )
            try:
                begin = time.perf_counter()
                if exporter in ("ours", FLOAT_HEAD):
                    if exporter == FLOAT_HEAD and precision == "fp32":
                        res["error"] = "skipped: the same model as ours in float32"
                        continue
                    package_model(
                        model,
                        res["folder"],
                        precision,
                        tokenizer=hf,
                        progress=False,
                        block_size=32,
                        accuracy_level=level,
                        quantize_lm_head=exporter != FLOAT_HEAD,
                    )
                    res["path"] = os.path.join(res["folder"], "model.onnx")
                else:
                    extra = (
                        None
                        if precision == "fp32"
                        else dict(block_size=32, accuracy_level=level or 0)
                    )
                    res["path"], _ = lx.export_builder(
                        model,
                        folder,
                        genai_path,
                        precision=precision,
                        extra_options=extra,
                        name=name,
                    )
                res["build_s"] = time.perf_counter() - begin
                res["nodes"], res["accuracy_level"] = _graph_info(res["path"])
                res["disk_mb"] = package_dir_size(res["folder"]) / 2**20
            except Exception as e:  # a failing build is a row, the others go on
                res["error"] = f"{type(e).__name__}: {str(e).splitlines()[0][:200]}"
                logger.warning("%s %s failed: %s", exporter, label, res["error"])
    return out


def peak_rss_mb(
    runtime: str, folder: str, threads: int, seq: int, genai_path: str | None = None
) -> float | None:
    """Peak resident memory (MiB) of a fresh process running ``_rss_probe.py``."""
    proc = subprocess.run(
        [sys.executable, _PROBE, runtime, folder, str(threads), str(seq)],
        capture_output=True,
        text=True,
        timeout=1800,
        env=lx._genai_env(genai_path),
    )
    if proc.returncode != 0:
        logger.warning("rss probe %s %s failed: %s", runtime, folder, proc.stderr[-300:])
        return None
    return float(proc.stdout.strip().splitlines()[-1])


def _genai_model(folder: str, threads: int):
    import onnxruntime_genai as og

    cfg = og.Config(folder)
    cfg.overlay(
        json.dumps(
            {
                "model": {
                    "decoder": {
                        "session_options": {
                            "intra_op_num_threads": threads,
                            "inter_op_num_threads": 1,
                        }
                    }
                }
            }
        )
    )
    return og.Model(cfg)


def _generator(model, tokens: np.ndarray, max_length: int):
    import onnxruntime_genai as og

    params = og.GeneratorParams(model)
    params.set_search_options(max_length=max_length)
    gen = og.Generator(model, params)
    gen.append_tokens(tokens)
    return gen


def genai_runner(folder: str, threads: int, feeds: dict, past: int, steps: int):
    """A function running one prefill (``past == 0``: a new generator appending the
    prompt) or one decoding step (a generator holding ``past`` tokens)."""
    model = _genai_model(folder, threads)
    prompt = feeds["input_ids"][0].astype(np.int32)
    if past == 0:
        return lambda: _generator(model, prompt, len(prompt) + 4)
    rng = np.random.default_rng(0)
    history = rng.integers(3, 1000, past).astype(np.int32)
    gen = _generator(model, history, past + steps + 8)
    return gen.generate_next_token


def bench_cell(
    ctx: dict, label: str, phase: str, seq: int, past: int, threads: int
) -> tuple[list[dict], list[dict]]:
    """Rows (one per exporter and runtime) and profile rows of one cell."""
    config, model, built = ctx["config"], ctx["model"], ctx["built"]
    feeds = lx.make_feeds(config, 1, seq, past, seed=ctx["seed"])
    torch.set_num_threads(threads)
    with torch.no_grad():
        expected = model(**lx.eager_inputs(feeds, config, model)).logits.numpy()
    warmup, repeat = (2, ctx["repeat"]) if seq > 1 else (5, ctx["decode_repeat"])
    runners, diffs, errors, sfeeds = {}, {}, {}, {}
    for exporter in ctx["exporters"]:
        res = built[label, exporter]
        if res["error"]:
            continue
        for runtime in ctx["runtimes"]:
            key = (exporter, runtime)
            try:
                if runtime == "genai":
                    runners[key] = genai_runner(
                        res["folder"], threads, feeds, past, warmup + repeat
                    )
                else:
                    sess = _session(res["path"], threads)
                    names = [i.name for i in sess.get_inputs()]
                    f = sfeeds[exporter] = lx.session_feeds(names, feeds, config.num_hidden_layers)
                    got = sess.run(None, f)[0]
                    diffs[key] = float(np.abs(got.astype(np.float64) - expected).max())
                    runners[key] = lambda s=sess, f=f: s.run(None, f)
            except Exception as e:  # a runner failing is a row, the others go on
                errors[key] = f"{type(e).__name__}: {str(e).splitlines()[0][:200]}"
                logger.warning("%s %s %s failed: %s", exporter, runtime, label, errors[key])
    medians = interleaved_medians(runners, warmup, repeat)
    del runners
    base = dict(size=ctx["size"], phase=phase, seq=seq, past=past, threads=threads, precision=label)
    rows, prof = [], []
    for exporter in ctx["exporters"]:
        res = built[label, exporter]
        for runtime in ctx["runtimes"]:
            key = (exporter, runtime)
            rss = ctx["rss"].get((label, exporter, runtime, threads))
            rows.append(
                dict(
                    base,
                    accuracy_level=res["accuracy_level"],
                    exporter=exporter,
                    runtime=runtime,
                    nodes=res["nodes"],
                    latency_ms=medians[key][0] * 1000 if key in medians else None,
                    min_ms=medians[key][1] * 1000 if key in medians else None,
                    peak_rss_mb=rss,
                    disk_mb=res["disk_mb"],
                    max_abs_diff=diffs.get(key),
                    build_s=res["build_s"],
                    error=res["error"] or errors.get(key, ""),
                )
            )
        if ctx["profile"] and exporter in sfeeds and (phase in ctx["profile"]):
            summary, _ = profile_by_op_type(
                res["path"],
                sfeeds[exporter],
                threads,
                3 if seq > 1 else 10,
                os.path.join(ctx["folder"], "prof"),
            )
            total = sum(ms for _, ms in summary.values()) or 1.0
            for op, (n, ms) in sorted(summary.items(), key=lambda kv: -kv[1][1]):
                prof.append(
                    dict(base, exporter=exporter, op_type=op, calls=n, time_ms=ms, share=ms / total)
                )
    add_ratios(rows)
    for r in rows:
        logger.info("%s", r)
    return rows, prof


def add_ratios(rows: list[dict]) -> None:
    """``vs_builder``, ``rss_vs_builder``, ``disk_vs_builder``: a row's value divided by
    the builder's row of the same cell and runtime (None when either is missing)."""
    cols = (
        ("latency_ms", "vs_builder"),
        ("peak_rss_mb", "rss_vs_builder"),
        ("disk_mb", "disk_vs_builder"),
    )
    keys = ("size", "phase", "threads", "precision", "runtime")
    builder = {tuple(r[k] for k in keys): r for r in rows if r["exporter"] == "builder"}
    for r in rows:
        b = builder.get(tuple(r[k] for k in keys), {})
        for col, ratio in cols:
            r[ratio] = r[col] / b[col] if r.get(col) and b.get(col) else None


def run(
    sizes,
    threads,
    prefill: int,
    past: int,
    repeat: int,
    *,
    precisions=None,
    exporters=EXPORTERS,
    runtimes=RUNTIMES,
    decode_repeat: int | None = None,
    genai_path: str | None = None,
    profile: tuple[str, ...] = ("decode",),
    rss: bool = True,
    seed: int = 0,
    folder: str | None = None,
    on_cell=None,
) -> tuple[list[dict], list[dict]]:
    """The whole grid: returns (rows of :data:`COLUMNS`, rows of
    :data:`PROFILE_COLUMNS`); ``profile`` lists the phases profiled (InferenceSession);
    ``on_cell(rows, profile_rows)`` is called after every cell with all the rows so far
    (the command line rewrites its CSV files: a run stopped early keeps its cells).

    .. code-block:: python

        rows, prof = run(["tiny"], [1], prefill=16, past=32, repeat=3)
    """
    precisions = list(precisions or PRECISIONS)
    rows, prof = [], []
    with tempfile.TemporaryDirectory(dir=folder) as tmp:
        for size in sizes:
            config, model = lx.make_llama(size, seed)
            sub = os.path.join(tmp, size)
            os.makedirs(sub)
            built = build_packages(model, sub, precisions, exporters, genai_path)
            probes = {}
            if rss:
                for (label, exporter), res in built.items():
                    if res["error"]:
                        continue
                    for runtime in runtimes:
                        for n in threads:
                            probes[label, exporter, runtime, n] = peak_rss_mb(
                                runtime, res["folder"], n, prefill, genai_path
                            )
            ctx = dict(
                size=size,
                config=config,
                model=model,
                built=built,
                seed=seed,
                repeat=repeat,
                decode_repeat=decode_repeat or 4 * repeat,
                profile=profile,
                folder=sub,
                rss=probes,
                exporters=exporters,
                runtimes=runtimes,
            )
            for n in threads:
                for phase, seq, length in (("prefill", prefill, 0), ("decode", 1, past)):
                    for label in precisions:
                        r, p = bench_cell(ctx, label, phase, seq, length, n)
                        rows.extend(r)
                        prof.extend(p)
                        if on_cell:
                            on_cell(rows, prof)
            del model, ctx
    return rows, prof


def _fmt(v) -> str:
    if v is None:
        return ""
    return f"{v:.4g}" if isinstance(v, float) else str(v)


def format_table(rows: list[dict]) -> str:
    """A markdown table of the rows (no build time)."""
    cols = [c for c in COLUMNS if c not in ("build_s", "seq", "past")]
    lines = ["| " + " | ".join(cols) + " |", "|" + "---|" * len(cols)]
    lines += ["| " + " | ".join(_fmt(r.get(c)) for c in cols) + " |" for r in rows]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m experimental_experiment.bench.llm_precision",
        description="fp32 and int4 Llama packages, ours and the builder's, in "
        "onnxruntime-genai and onnxruntime.",
    )
    parser.add_argument(
        "--sizes", default="small,medium", help=f"comma-separated sizes among {','.join(lx.SIZES)}"
    )
    parser.add_argument(
        "--precisions",
        default=",".join(PRECISIONS),
        help=f"comma-separated among {list(PRECISIONS)}",
    )
    parser.add_argument(
        "--exporters",
        default=",".join(EXPORTERS),
        help=f"comma-separated among {list(EXPORTERS) + [FLOAT_HEAD]}",
    )
    parser.add_argument("--runtimes", default=",".join(RUNTIMES), help=str(RUNTIMES))
    parser.add_argument("--threads", default="1,2", help="intra-op thread counts")
    parser.add_argument("--prefill", type=int, default=512, help="prompt length")
    parser.add_argument("--past", type=int, default=2048, help="cache length (decode)")
    parser.add_argument("--repeat", type=int, default=7, help="prefill repetitions")
    parser.add_argument(
        "--decode-repeat", type=int, default=None, help="decoding step repetitions (4 * repeat)"
    )
    parser.add_argument(
        "--genai-path",
        default=os.environ.get("GENAI_PATH"),
        help="folder holding onnxruntime_genai (pip --target)",
    )
    parser.add_argument(
        "--profile", default="decode", help="phases profiled (InferenceSession), '' for none"
    )
    parser.add_argument("--no-rss", action="store_true", help="no peak memory probes")
    parser.add_argument("--output", default=None, help="CSV of the rows")
    parser.add_argument("--profile-output", default=None, help="CSV of the profiles")
    parser.add_argument("-v", "--verbose", action="count", default=0)
    ns = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO if ns.verbose else logging.WARNING)
    sizes = [s for s in ns.sizes.split(",") if s]
    precisions = [p.strip() for p in ns.precisions.split(",") if p.strip()]
    runtimes = [r.strip() for r in ns.runtimes.split(",") if r.strip()]
    exporters = [e.strip() for e in ns.exporters.split(",") if e.strip()]
    if (
        [s for s in sizes if s not in lx.SIZES]
        or [p for p in precisions if p not in PRECISIONS]
        or [r for r in runtimes if r not in RUNTIMES]
        or [e for e in exporters if e not in (*EXPORTERS, FLOAT_HEAD)]
    ):
        parser.error(
            f"sizes among {list(lx.SIZES)}, precisions among {list(PRECISIONS)}, "
            f"runtimes among {list(RUNTIMES)}, exporters among "
            f"{list(EXPORTERS) + [FLOAT_HEAD]}"
        )

    def save(rows, prof):
        if ns.output:
            write_csv(rows, COLUMNS, ns.output)
        if ns.profile_output:
            write_csv(prof, PROFILE_COLUMNS, ns.profile_output)

    begin = time.perf_counter()
    rows, prof = run(
        sizes,
        [int(t) for t in ns.threads.split(",") if t],
        ns.prefill,
        ns.past,
        ns.repeat,
        precisions=precisions,
        runtimes=runtimes,
        exporters=exporters,
        decode_repeat=ns.decode_repeat,
        genai_path=ns.genai_path,
        profile=tuple(p for p in ns.profile.split(",") if p),
        rss=not ns.no_rss,
        on_cell=save,
    )
    save(rows, prof)
    print(format_table(rows))
    print(f"wall time: {time.perf_counter() - begin:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
