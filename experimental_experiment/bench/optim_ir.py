"""Benchmark of the pattern optimizer on two representations: xoptim (NodeProtos linked
by names, the GraphBuilder) and the onnx_ir prototype
(:mod:`experimental_experiment.xoptim.ir`), both running the same three patterns
(Transpose(Transpose), MatMul+Add->Gemm, RMSNorm->SimplifiedLayerNormalization) on
large unoptimized graphs:

* ``llama-8b`` / ``llama-70b``: Llama-3-8B / 70B configurations built on the ``meta``
  device and exported without weights and without optimization (the data file is
  sparse, the graph is loaded without it),
* ``zoo:<type>``: the zoo's largest graphs (tiny random weights), exported without
  optimization.

Each (graph, representation) runs in a fresh process: the time of the optimizer alone,
the time to load the model and convert it back (the IR side includes onnx's shape
inference, its patterns read shapes), and the child's peak RSS
(``resource.getrusage(RUSAGE_SELF)`` in the child). ``ops_digest`` hashes the operator
counts of the result (Identity aside): equal digests, same graphs.

``python -m experimental_experiment.bench.optim_ir --graphs llama-8b,zoo:nemo_speechlm
--folder /tmp/optir --out _doc/bench/optim_ir.csv``
"""

from __future__ import annotations

import argparse
import collections
import csv
import datetime
import hashlib
import json
import logging
import os
import subprocess
import sys
import time

MODULE = "experimental_experiment.bench.optim_ir"
ZOO = {
    "nemo_speechlm": "seq2seq-lm",
    "deformable_detr": "vision-encoder",
    "qwen3_5_moe": "causal-lm",
}
DEFAULT_GRAPHS = ["llama-8b", "llama-70b"] + [f"zoo:{k}" for k in ZOO]
REPRESENTATIONS = ["xoptim", "ir"]
COLUMNS = [
    "graph",
    "representation",
    "n_nodes_before",
    "n_nodes_after",
    "rewrites",
    "ops_digest",
    "optim_s",
    "optim_cpu_s",
    "load_save_s",
    "process_cpu_s",
    "peak_rss_mb",
    "date",
]
logger = logging.getLogger(__name__)


def graph_path(folder: str, graph: str) -> str:
    return os.path.join(folder, graph.replace(":", "_") + ".onnx")


def export_graph(graph: str, folder: str) -> str:
    """Exports ``graph`` without optimization into ``folder`` (skipped if it exists)."""
    import onnx

    path = graph_path(folder, graph)
    if os.path.exists(path):
        return path
    if graph.startswith("llama-"):
        from .large_model import _export_llama, _llama

        config, model = _llama(graph.split("-")[1], meta=True)
        _export_llama(model, config, path, optimize=False)
        return path
    from ..torch_models.llm_models import export_model
    from .zoo_cases import ZooCase, build_case

    name = graph.split(":", 1)[1]
    data = build_case(ZooCase(name, ZOO.get(name, "causal-lm")))
    onx = export_model(
        data["model"], data["inputs"], data["dynamic_shapes"], "to_onnx", optimize=False
    )
    proto = getattr(onx, "model_proto", onx)
    onnx.save(proto, path)  # type: ignore[arg-type]
    return path


def optimize_once(representation: str, path: str) -> dict:
    """Loads ``path`` (no external data), runs the three patterns, converts back."""
    import onnx

    begin = time.perf_counter()
    model = onnx.load(path, load_external_data=False)
    n_before = len(model.graph.node)
    if representation == "xoptim":
        from ..xoptim.ir.compare import XOPTIM_PATTERNS, patterns_only
        from ..xoptim.loader import model_to_builder
        from ..xoptim.optimizer import optimize_builder

        g = model_to_builder(model)
        t0, c0 = time.perf_counter(), time.process_time()
        report = optimize_builder(g, patterns_only(), patterns=[p() for p in XOPTIM_PATTERNS])
        optim, cpu = time.perf_counter() - t0, time.process_time() - c0
        rewrites = sum(e.applied for e in report)
        out = g.to_onnx(optimize=False)
    else:
        from ..xoptim.ir import default_passes, load, save

        irm = load(model)  # with onnx's shape inference: the patterns read shapes
        del model
        t0, c0 = time.perf_counter(), time.process_time()
        result = default_passes().call(irm)
        optim, cpu = time.perf_counter() - t0, time.process_time() - c0
        rewrites = result.rewrites
        out = save(result.model)
    n_after = len(out.graph.node)
    ops = collections.Counter(n.op_type for n in out.graph.node if n.op_type != "Identity")
    digest = hashlib.sha1(repr(sorted(ops.items())).encode()).hexdigest()[:10]
    return {
        "n_nodes_before": n_before,
        "n_nodes_after": n_after,
        "rewrites": rewrites,
        "ops_digest": digest,
        "optim_s": round(optim, 4),
        "optim_cpu_s": round(cpu, 4),
        "load_save_s": round(time.perf_counter() - begin - optim, 4),
    }


def run_child(representation: str, path: str) -> dict:
    """Runs ``optimize_once`` in a fresh process; adds the child's peak RSS."""
    proc = subprocess.Popen(
        [sys.executable, "-m", MODULE, "--child", representation, path],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    out, err = proc.communicate()
    lines = [x for x in out.splitlines() if x.startswith("RESULT ")]
    if not lines:
        return {"error": (err.strip().splitlines() or ["?"])[-1][:200]}
    return json.loads(lines[-1][7:])


def _child(representation: str, path: str) -> int:
    import resource

    res = optimize_once(representation, path)
    usage = resource.getrusage(resource.RUSAGE_SELF)
    res["peak_rss_mb"] = round(usage.ru_maxrss / 1024, 1)  # kB on Linux
    res["process_cpu_s"] = round(usage.ru_utime + usage.ru_stime, 3)  # the machine is shared
    print("RESULT " + json.dumps(res), flush=True)
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument(
        "--graphs",
        default=",".join(DEFAULT_GRAPHS),
        help="comma-separated: llama-8b, llama-70b, zoo:<model_type>",
    )
    parser.add_argument("--folder", default="_bench_optim_ir", help="where the graphs are")
    parser.add_argument("--out", default="_doc/bench/optim_ir.csv", help="CSV file")
    parser.add_argument("--repeat", type=int, default=1, help="runs per representation")
    parser.add_argument("--export-only", action="store_true", help="only export the graphs")
    parser.add_argument("--child", nargs=2, default=None, help=argparse.SUPPRESS)
    ns = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    if ns.child:
        return _child(*ns.child)
    os.makedirs(ns.folder, exist_ok=True)
    rows, date = [], datetime.date.today().isoformat()
    for graph in ns.graphs.split(","):
        begin = time.perf_counter()
        try:
            path = export_graph(graph, ns.folder)
        except Exception as e:  # a graph that cannot be exported is reported, not fatal
            logger.warning("export of %s failed: %s", graph, e)
            continue
        logger.info("%s exported in %.1fs", graph, time.perf_counter() - begin)
        if ns.export_only:
            continue
        for _ in range(ns.repeat):
            for rep in REPRESENTATIONS:
                res = run_child(rep, path)
                logger.info("%s %s %s", graph, rep, res)
                rows.append({"graph": graph, "representation": rep, "date": date, **res})
    if rows and ns.out:
        _write(ns.out, rows)
    return 0


def _write(out: str, rows: list[dict]) -> None:
    with open(out, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=COLUMNS + ["error"], extrasaction="ignore")
        w.writeheader()
        for r in rows:
            w.writerow(r)


if __name__ == "__main__":
    sys.exit(main())
