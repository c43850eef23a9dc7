"""Size on disk and decoding latency of a Llama-like decoder exported by :func:`to_onnx`
(onnxruntime pattern set) then quantized by :func:`quantize_model
<experimental_experiment.quantize.quantize_model>`: float32 against int4 (several
block sizes and accuracy levels) and int8, in a plain ``onnxruntime.InferenceSession``.

.. code-block:: bash

    python -m experimental_experiment.bench.quantize_latency --size small --past 512 \\
        --threads 1 --repeat 50 --output quantize_latency.csv

One row per variant: the bytes of the model and its data files, the median and the
fastest of ``--repeat`` decoding steps (batch 1, one new token, a cache of ``--past``
positions, ``--threads`` intra-op threads, the variants timed in turns so that the load
of the machine affects them alike), the speedup over float32, and the error of the
logits against the float32 model (relative L2 norm, maximum absolute difference).
"""

from __future__ import annotations

import argparse
import logging
import os
import tempfile
import time

import numpy as np

from . import llm_exporters as lx
from ._timing import interleaved_medians

logger = logging.getLogger("experimental_experiment.bench.quantize_latency")

#: variant -> keyword arguments of quantize_model (None: the float32 model)
VARIANTS = {
    "fp32": None,
    "int4 b32 acc4": dict(precision="int4", block_size=32, accuracy_level=4),
    "int4 b32": dict(precision="int4", block_size=32),
    "int4 b128 acc4": dict(precision="int4", block_size=128, accuracy_level=4),
    "int4 b32 acc4 head+emb": dict(
        precision="int4",
        block_size=32,
        accuracy_level=4,
        quantize_lm_head=True,
        quantize_embeddings=True,
    ),
    "int8": dict(precision="int8"),
}
COLUMNS = (
    "size",
    "variant",
    "bytes",
    "size_ratio",
    "past",
    "threads",
    "latency_ms",
    "min_ms",
    "speedup",
    "rel_l2",
    "max_abs_diff",
    "quantize_s",
)


def disk_size(path: str) -> int:
    """Bytes of a model file and of the external data files it refers to.

    :param path: an ONNX file

    .. code-block:: python

        print(disk_size("model.onnx") / 2**20, "MiB")
    """
    import onnx

    from ..xbuilder.safe_paths import external_entries

    model = onnx.load(path, load_external_data=False)
    folder = os.path.dirname(os.path.abspath(path))
    files = {e.path for e in external_entries(model, folder)}
    return os.path.getsize(path) + sum(os.path.getsize(f) for f in files)


def build_variants(
    size: str, folder: str, variants: list[str], seed: int = 0
) -> tuple[object, dict[str, dict]]:
    """Exports the model of ``size`` then quantizes it; returns ``(config,
    {variant: {"path", "quantize_s"}})``.

    :param size: a size of :data:`experimental_experiment.bench.llm_exporters.SIZES`
    :param folder: where the models are written
    :param variants: keys of :data:`VARIANTS`
    :param seed: seed of the random weights

    .. code-block:: python

        config, models = build_variants("tiny", "/tmp/q", ["fp32", "int4 b32 acc4"])
    """
    import onnx

    from ..quantize import quantize_model
    from ..xbuilder.model_container import save_model

    config, model = lx.make_llama(size, seed)
    fp32 = os.path.join(folder, "fp32.onnx")
    lx.export_to_onnx(model, config, "default+onnxruntime", fp32)
    float_model = onnx.load(fp32)
    out = {}
    for name in variants:
        kwargs = VARIANTS[name]
        if kwargs is None:
            out[name] = {"path": fp32, "quantize_s": None}
            continue
        begin = time.perf_counter()
        q = quantize_model(float_model, **kwargs)
        seconds = time.perf_counter() - begin
        path = os.path.join(folder, name.replace(" ", "_") + ".onnx")
        save_model(q, path)
        out[name] = {"path": path, "quantize_s": seconds}
    return config, out


def run(
    size: str,
    past: int,
    threads: int,
    repeat: int,
    variants: list[str] | None = None,
    *,
    seed: int = 0,
    folder: str | None = None,
) -> list[dict]:
    """The rows of :data:`COLUMNS`, one per variant.

    :param size: a size of :data:`experimental_experiment.bench.llm_exporters.SIZES`
    :param past: cached positions of the decoding step
    :param threads: onnxruntime's intra-op threads
    :param repeat: timed decoding steps per variant
    :param variants: keys of :data:`VARIANTS` (all by default, ``fp32`` always first)
    :param seed: seed of the weights and the inputs
    :param folder: parent of the temporary folder holding the models

    .. code-block:: python

        rows = run("tiny", past=64, threads=1, repeat=5)
    """
    import onnxruntime

    variants = ["fp32"] + [v for v in (variants or list(VARIANTS)) if v != "fp32"]
    rows = []
    with tempfile.TemporaryDirectory(dir=folder) as tmp:
        config, built = build_variants(size, tmp, variants, seed)
        feeds = lx.make_feeds(config, 1, 1, past, seed)
        runners, logits = {}, {}
        for name, info in built.items():
            opts = onnxruntime.SessionOptions()
            opts.intra_op_num_threads = threads
            opts.inter_op_num_threads = 1
            sess = onnxruntime.InferenceSession(
                info["path"], opts, providers=["CPUExecutionProvider"]
            )
            sfeeds = lx.session_feeds(
                [i.name for i in sess.get_inputs()], feeds, config.num_hidden_layers
            )
            logits[name] = sess.run(None, sfeeds)[0].astype(np.float64)
            runners[name] = lambda s=sess, f=sfeeds: s.run(None, f)
        times = interleaved_medians(runners, warmup=3, repeat=repeat)
        ref, base_bytes = logits["fp32"], disk_size(built["fp32"]["path"])
        for name, info in built.items():
            nbytes = disk_size(info["path"])
            diff = logits[name] - ref
            rows.append(
                dict(
                    size=size,
                    variant=name,
                    bytes=nbytes,
                    size_ratio=nbytes / base_bytes,
                    past=past,
                    threads=threads,
                    latency_ms=times[name][0] * 1000,
                    min_ms=times[name][1] * 1000,
                    speedup=times["fp32"][0] / times[name][0],
                    rel_l2=float(np.linalg.norm(diff) / np.linalg.norm(ref)),
                    max_abs_diff=float(np.abs(diff).max()),
                    quantize_s=info["quantize_s"],
                )
            )
            logger.info("%s", rows[-1])
    return rows


def _fmt(v) -> str:
    if v is None:
        return ""
    return f"{v:.4g}" if isinstance(v, float) else str(v)


def format_table(rows: list[dict]) -> str:
    """A markdown table of the rows.

    :param rows: rows of :func:`run`

    .. code-block:: python

        print(format_table(run("tiny", past=64, threads=1, repeat=5)))
    """
    lines = ["| " + " | ".join(COLUMNS) + " |", "|" + "---|" * len(COLUMNS)]
    lines += ["| " + " | ".join(_fmt(r.get(c)) for c in COLUMNS) + " |" for r in rows]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    """The command line of the benchmark, returns its exit code.

    :param argv: the arguments (``sys.argv[1:]`` when None)

    .. code-block:: python

        main(["--size", "tiny", "--past", "64", "--repeat", "5"])
    """
    parser = argparse.ArgumentParser(
        prog="python -m experimental_experiment.bench.quantize_latency",
        description="Size and decoding latency of a Llama-like decoder in float32, int4 "
        "and int8 (quantize_model) in onnxruntime on CPU.",
    )
    parser.add_argument("--size", default="small", help=f"one of {', '.join(lx.SIZES)}")
    parser.add_argument("--past", type=int, default=512, help="cached positions")
    parser.add_argument("--threads", type=int, default=1, help="intra-op threads")
    parser.add_argument("--repeat", type=int, default=50, help="timed decoding steps")
    parser.add_argument(
        "--variants",
        default=",".join(VARIANTS),
        help=f"comma-separated among {', '.join(VARIANTS)}",
    )
    parser.add_argument("--output", default=None, help="CSV written atomically")
    parser.add_argument("-v", "--verbose", action="count", default=0)
    ns = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO if ns.verbose else logging.WARNING)
    if ns.size not in lx.SIZES:
        parser.error(f"unknown size {ns.size!r}, expected one of {list(lx.SIZES)}")
    variants = [v.strip() for v in ns.variants.split(",") if v.strip()]
    bad = [v for v in variants if v not in VARIANTS]
    if bad:
        parser.error(f"unknown variants {bad}, expected {list(VARIANTS)}")
    rows = run(ns.size, ns.past, ns.threads, ns.repeat, variants)
    print(format_table(rows))
    if ns.output:
        from .llm_latency import write_csv

        write_csv(rows, COLUMNS, ns.output)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
