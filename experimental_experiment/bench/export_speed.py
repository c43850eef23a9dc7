"""Export speed: torch.export.export, :func:`to_onnx` and ``torch.onnx.export(dynamo=True)``
on tiny Llama models, in one run, median of a few repetitions.

.. code-block:: bash

    python -m experimental_experiment.bench.export_speed --repeat 5 --csv speed.csv
    python -m experimental_experiment.bench.export_speed --profile --config medium

Every export runs under ``torch.no_grad()`` with a dynamic batch and sequence length.
Measured, per model configuration:

* ``torch.export``: :func:`torch.export.export` alone (non strict, no decomposition)
* ``to_onnx``: our exporter, capture included, returns an ``onnx.ModelProto``
* ``to_onnx(ep)``: our conversion only, from an already captured ExportedProgram
* ``to_onnx(ep) no-opt``: the same without the optimization passes
* ``torch.onnx opt=False`` / ``torch.onnx opt=True``: ``torch.onnx.export(..., dynamo=True,
  optimize=...)`` followed by ``.model_proto`` (the ModelProto, as ours returns);
  it runs torch.export then torch's decompositions itself
"""

from __future__ import annotations

import argparse
import contextlib
import cProfile
import csv
import io
import logging
import pstats
import statistics
import sys
import time
import warnings
from typing import Callable

import torch

logger = logging.getLogger("experimental_experiment.bench.export_speed")

#: model configurations: the first one is the seed's tiny Llama
LLAMA_CONFIGS = {
    "small": dict(
        hidden_size=16,
        num_hidden_layers=1,
        vocab_size=1024,
        intermediate_size=16,
        max_position_embeddings=1024,
        num_attention_heads=2,
    ),
    "medium": dict(
        hidden_size=256,
        num_hidden_layers=2,
        vocab_size=1024,
        intermediate_size=512,
        max_position_embeddings=1024,
        num_attention_heads=4,
    ),
}

EXPORTERS = (
    "torch.export",
    "to_onnx",
    "to_onnx(ep)",
    "to_onnx(ep) no-opt",
    "torch.onnx opt=False",
    "torch.onnx opt=True",
)


def make_llama(config: str, attn: str = "eager", batch: int = 2, seq: int = 32):
    """Returns ``(model, args, kwargs)`` for a LlamaModel with random weights."""
    from transformers import LlamaConfig, LlamaModel

    cfg = LlamaConfig(**LLAMA_CONFIGS[config])
    cfg._attn_implementation = attn
    cfg.use_cache = False
    torch.manual_seed(0)
    model = LlamaModel(cfg).eval()
    ids = torch.randint(0, cfg.vocab_size, (batch, seq))
    mask = torch.ones((batch, seq), dtype=torch.int64)
    return model, (ids,), dict(attention_mask=mask)


def dynamic_shapes(named: bool) -> dict:
    """Dynamic batch and sequence: names for to_onnx, ``Dim.DYNAMIC`` for torch."""
    b, s = ("batch", "seq") if named else (torch.export.Dim.DYNAMIC,) * 2
    return {"input_ids": {0: b, 1: s}, "attention_mask": {0: b, 1: s}}


def exporter_functions(model, args, kwargs) -> dict[str, Callable]:
    """One function per exporter, each returning what it exported."""
    from ..torch_interpreter import to_onnx

    ds_torch, ds_named = dynamic_shapes(False), dynamic_shapes(True)
    ep_cache = {}

    def captured():
        if "ep" not in ep_cache:  # captured once, outside the timed part
            ep_cache["ep"] = torch.export.export(model, args, kwargs, dynamic_shapes=ds_torch)
        return ep_cache["ep"]

    def torch_onnx(optimize):
        return lambda: (
            torch.onnx.export(
                model,
                args,
                kwargs=kwargs,
                dynamic_shapes=ds_torch,
                dynamo=True,
                optimize=optimize,
                verbose=False,
                report=False,
                verify=False,
            ).model_proto
        )

    return {
        "torch.export": lambda: torch.export.export(model, args, kwargs, dynamic_shapes=ds_torch),
        "to_onnx": lambda: to_onnx(model, args, kwargs, dynamic_shapes=ds_named),
        "to_onnx(ep)": (captured, lambda: to_onnx(captured())),
        "to_onnx(ep) no-opt": (captured, lambda: to_onnx(captured(), optimize=False)),
        "torch.onnx opt=False": torch_onnx(False),
        "torch.onnx opt=True": torch_onnx(True),
    }


def _quiet():
    """no_grad, warnings off: the context of every measured call."""
    stack = contextlib.ExitStack()
    stack.enter_context(torch.no_grad())
    stack.enter_context(warnings.catch_warnings())
    warnings.simplefilter("ignore")
    return stack


def _timed(fn: Callable) -> float:
    with _quiet():
        begin = time.perf_counter()
        fn()
        return time.perf_counter() - begin


def _n_nodes(result) -> int | None:
    graph = getattr(result, "graph", None)
    if graph is None:
        return None
    return len(graph.node) if hasattr(graph, "node") else len(graph.nodes)


def _max_diff(onx, model, config: str) -> float:
    """Max absolute difference with eager on another batch and sequence length."""
    from ..runtime import run_onnx

    _, args, kwargs = make_llama(config, batch=3, seq=17)
    with torch.no_grad():
        expected = model(*args, **kwargs).last_hidden_state
    got = run_onnx(onx, [args[0], kwargs["attention_mask"]])[0]
    return float((expected - torch.from_numpy(got)).abs().max())


def bench_config(config: str, repeat: int, exporters, attn: str) -> list[dict]:
    """Measures every exporter on one configuration; returns one row per exporter.

    Each exporter runs once untimed (warm-up, checks it works), then the repetitions
    are interleaved (one call of each exporter per round) so that a change of the
    machine's load spreads over every exporter instead of biasing one of them.
    """
    model, args, kwargs = make_llama(config, attn)
    functions = exporter_functions(model, args, kwargs)
    rows, active = {}, {}
    for name in exporters:
        entry = functions[name]
        setup, fn = entry if isinstance(entry, tuple) else (None, entry)
        row = rows[name] = dict(config=config, attn=attn, exporter=name, repeat=repeat)
        logger.info("warm-up %s on %s", name, config)
        try:
            with _quiet():
                if setup is not None:
                    setup()
                result = fn()
        except Exception as e:  # a missing converter must not stop the benchmark
            logger.warning("%s failed on %s: %s", name, config, str(e).splitlines()[0])
            first = str(e).split(" (node ")[0].splitlines()[0][:120]
            row.update(error=f"{type(e).__name__}: {first}")
            continue
        row["n_nodes"] = _n_nodes(result)
        if name == "to_onnx":
            row["max_abs_diff"] = _max_diff(result, model, config)
        active[name] = (fn, [])
    for k in range(repeat):
        logger.info("round %d/%d on %s", k + 1, repeat, config)
        for fn, times in active.values():
            times.append(_timed(fn))
    for name, (_, times) in active.items():
        rows[name].update(median_s=statistics.median(times), min_s=min(times), max_s=max(times))
    return list(rows.values())


def ratios(rows: list[dict]) -> list[tuple[str, str, float]]:
    """``(config, description, ratio)`` between the medians of a configuration."""
    out = []
    for config in dict.fromkeys(r["config"] for r in rows):
        med = {r["exporter"]: r.get("median_s") for r in rows if r["config"] == config}
        pairs = [
            ("to_onnx", "torch.export"),
            ("to_onnx(ep)", "torch.export"),
            ("torch.onnx opt=False", "to_onnx"),
            ("torch.onnx opt=True", "to_onnx"),
        ]
        for a, b in pairs:
            if med.get(a) and med.get(b):
                out.append((config, f"{a} / {b}", med[a] / med[b]))
    return out


def format_table(rows: list[dict]) -> str:
    head = (
        f"{'config':8} {'exporter':22} {'median s':>9} {'min s':>8} {'max s':>8} {'nodes':>6}  note"
    )
    lines = [head, "-" * len(head)]
    for r in rows:
        if "error" in r:
            lines.append(f"{r['config']:8} {r['exporter']:22} {'failed':>9}  {r['error']}")
            continue
        note = f"max|diff|={r['max_abs_diff']:.2g}" if "max_abs_diff" in r else ""
        nodes = "" if r["n_nodes"] is None else r["n_nodes"]
        lines.append(
            f"{r['config']:8} {r['exporter']:22} {r['median_s']:9.4f} "
            f"{r['min_s']:8.4f} {r['max_s']:8.4f} {nodes:>6}  {note}"
        )
    lines.append("")
    lines.extend(f"{c:8} {desc:40} {v:6.2f}" for c, desc, v in ratios(rows))
    return "\n".join(lines)


def write_csv(rows: list[dict], filename: str) -> None:
    fields = [
        "config",
        "attn",
        "exporter",
        "repeat",
        "median_s",
        "min_s",
        "max_s",
        "n_nodes",
        "max_abs_diff",
        "error",
    ]
    with open(filename, "w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=fields)
        writer.writeheader()
        writer.writerows(rows)


def _package(filename: str) -> str:
    for key in (
        "experimental_experiment",
        "onnxruntime",
        "onnx_ir",
        "onnxscript",
        "onnx",
        "torch",
        "sympy",
        "transformers",
        "numpy",
    ):
        if f"/{key}/" in filename:
            return key
    return "python/builtins"


def profile_conversion(config: str, attn: str, top: int = 25, full: bool = False) -> str:
    """cProfile of ``to_onnx`` (from a captured program unless ``full``): tottime by
    package then the top functions by cumulative and by own time."""
    from ..torch_interpreter import to_onnx

    model, args, kwargs = make_llama(config, attn)
    with torch.no_grad():
        ep = torch.export.export(model, args, kwargs, dynamic_shapes=dynamic_shapes(False))
        to_onnx(ep)  # warm-up
        prof = cProfile.Profile()
        prof.enable()
        if full:
            to_onnx(model, args, kwargs, dynamic_shapes=dynamic_shapes(True))
        else:
            to_onnx(ep)
        prof.disable()
    stats = pstats.Stats(prof)
    by_package: dict[str, float] = {}
    for (filename, _, _), (_, _, tottime, _, _) in stats.stats.items():
        pkg = _package(filename)
        by_package[pkg] = by_package.get(pkg, 0.0) + tottime
    total = sum(by_package.values())
    out = io.StringIO()
    what = "to_onnx(model) (capture included)" if full else "to_onnx(ep) (conversion only)"
    out.write(f"profile of {what} on {config!r}: {total:.3f}s of own time\n")
    for pkg, t in sorted(by_package.items(), key=lambda kv: -kv[1]):
        out.write(f"  {pkg:24} {t:8.4f}s {100 * t / total:5.1f}%\n")
    for key in ("cumulative", "tottime"):
        out.write(f"\n-- top {top} by {key}\n")
        pstats.Stats(prof, stream=out).strip_dirs().sort_stats(key).print_stats(top)
    return out.getvalue()


def main(argv: list[str] | None = None) -> list[dict]:
    parser = argparse.ArgumentParser(
        prog="python -m experimental_experiment.bench.export_speed",
        description=__doc__.split("\n\n")[0],
    )
    parser.add_argument(
        "--config",
        nargs="*",
        default=list(LLAMA_CONFIGS),
        choices=list(LLAMA_CONFIGS),
        help="model configurations",
    )
    parser.add_argument(
        "--exporter",
        nargs="*",
        default=list(EXPORTERS),
        choices=list(EXPORTERS),
        help="exporters to measure",
    )
    parser.add_argument(
        "--attn",
        default="eager",
        choices=["eager", "sdpa"],
        help="attention implementation of the Llama model",
    )
    parser.add_argument("--repeat", type=int, default=5, help="timed repetitions")
    parser.add_argument("--csv", default=None, help="writes the rows to this CSV file")
    parser.add_argument(
        "--profile", action="store_true", help="profiles to_onnx after the measures (last config)"
    )
    parser.add_argument(
        "--profile-full",
        action="store_true",
        help="profiles to_onnx with the capture instead of to_onnx(ep)",
    )
    parser.add_argument("--top", type=int, default=25, help="functions shown by --profile")
    parser.add_argument("--no-bench", action="store_true", help="only the profile")
    parser.add_argument("-v", "--verbose", action="count", default=0)
    opts = parser.parse_args(argv)
    logging.basicConfig(level=logging.WARNING, format="%(asctime)s %(levelname)s %(message)s")
    logger.setLevel(logging.INFO if opts.verbose else logging.WARNING)
    logging.getLogger("torch.onnx").setLevel(logging.ERROR)  # torchvision warnings
    rows = []
    if not opts.no_bench:
        for config in opts.config:
            rows.extend(bench_config(config, opts.repeat, opts.exporter, opts.attn))
        sys.stdout.write(
            f"torch {torch.__version__}, repeat={opts.repeat}, "
            f"attn={opts.attn}, no_grad, dynamic batch and seq\n"
        )
        sys.stdout.write(format_table(rows) + "\n")
        if opts.csv:
            write_csv(rows, opts.csv)
            logger.info("wrote %s", opts.csv)
    if opts.profile or opts.profile_full:
        sys.stdout.write(
            "\n" + profile_conversion(opts.config[-1], opts.attn, opts.top, full=opts.profile_full)
        )
    return rows


if __name__ == "__main__":
    main()
