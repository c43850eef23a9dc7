"""Benchmark of large models: wall time and peak resident memory (each case in its own
process) of

* ``weight-free-8b``: a Llama-3-8B configuration built on the ``meta`` device, exported
  without weights and saved (the data file is sparse: declared, not written),
* ``graph-70b``: the same with a Llama-3-70B configuration,
* ``roundtrip-2gb``: a model with just over 2 GB of float32 weights saved by
  ``to_onnx(filename=...)`` (external data chosen by itself), run by onnxruntime from
  another folder and compared with eager,
* ``llama-1b-ours`` / ``llama-1b-torch``: a ~1B-parameter Llama (random weights)
  exported with its weights and external data by ``to_onnx`` and by
  ``torch.onnx.export(dynamo=True, external_data=True)``; one decoding step in
  onnxruntime compared with eager,
* ``llama-1b-fill``: the same model exported without weights, filled from the
  safetensors files ``save_pretrained`` writes; its data file must be byte-identical
  to the one ``llama-1b-ours`` wrote.

``python -m experimental_experiment.bench.large_model --cases all --out _doc/bench/large_model.csv``
"""

from __future__ import annotations

import argparse
import csv
import datetime
import json
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time

CONFIGS = {
    "8b": dict(
        hidden_size=4096,
        intermediate_size=14336,
        num_hidden_layers=32,
        num_attention_heads=32,
        num_key_value_heads=8,
        vocab_size=128256,
    ),
    "70b": dict(
        hidden_size=8192,
        intermediate_size=28672,
        num_hidden_layers=80,
        num_attention_heads=64,
        num_key_value_heads=8,
        vocab_size=128256,
    ),
    # TinyLlama-1.1B's geometry (1.1e9 parameters, 4.4 GB in float32)
    "1b": dict(
        hidden_size=2048,
        intermediate_size=5632,
        num_hidden_layers=22,
        num_attention_heads=32,
        num_key_value_heads=4,
        vocab_size=32000,
    ),
}
MODULE = "experimental_experiment.bench.large_model"
CASES = [
    "weight-free-8b",
    "graph-70b",
    "roundtrip-2gb",
    "llama-1b-ours",
    "llama-1b-torch",
    "llama-1b-fill",
]


def _peak_rss_gb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20  # kB on Linux


def _llama(size: str, meta: bool):
    import transformers

    from ..torch_models.llm_helper import build_causal_lm

    config = transformers.LlamaConfig(
        max_position_embeddings=4096, tie_word_embeddings=False, **CONFIGS[size]
    )
    return config, build_causal_lm(config, meta=meta)


def _export_llama(model, config, path: str, **kwargs) -> dict:
    from ..torch_interpreter import to_onnx
    from ..torch_interpreter.onnx_export_errors import bypass_export_some_errors
    from ..torch_models.llm_helper import make_llm_inputs

    inputs, ds = make_llm_inputs(config, model=model)
    begin = time.perf_counter()
    with bypass_export_some_errors(patch_transformers=True) as modificator:
        container = to_onnx(
            model, (), modificator(inputs), dynamic_shapes=ds, large_model=True, **kwargs
        )
    container.save(path)
    return {
        "time_s": time.perf_counter() - begin,
        "peak_rss_gb": _peak_rss_gb(),
        "weights_gb": container.nbytes / 2**30,
        "n_nodes": len(container.model_proto.graph.node),
    }


def case_weight_free(size: str, folder: str) -> dict:
    begin = time.perf_counter()
    config, model = _llama(size, meta=True)
    res = _export_llama(model, config, os.path.join(folder, f"llama{size}.onnx"))
    res["total_time_s"] = time.perf_counter() - begin
    return res


def _step_expected(model, config):
    """Inputs (flattened, numpy) of one decoding step with a cache and eager's logits."""
    import torch

    from ..runtime import flatten_tensors
    from ..torch_interpreter.onnx_export_errors import bypass_export_some_errors
    from ..torch_models.llm_helper import make_llm_inputs

    inputs, _ = make_llm_inputs(
        config, model=model, batch=2, seq=2, past=4, generator=torch.Generator().manual_seed(1)
    )
    with bypass_export_some_errors(patch_transformers=True):
        flat = [t.numpy() for t in flatten_tensors(inputs)]
        with torch.no_grad():
            expected = model(**inputs).logits.numpy()
    return flat, expected


def _ort_diff(path: str, flat, expected) -> float:
    """max |onnxruntime - eager| on the logits."""
    import numpy as np
    import onnxruntime

    sess = onnxruntime.InferenceSession(path, providers=["CPUExecutionProvider"])
    feeds = dict(zip([i.name for i in sess.get_inputs()], flat))
    return float(np.abs(sess.run(None, feeds)[0] - expected).max())


def case_llama_ours(folder: str) -> dict:
    config, model = _llama("1b", meta=False)
    res = _export_llama(model, config, os.path.join(folder, "ours.onnx"), external_threshold=0)
    model.save_pretrained(os.path.join(folder, "checkpoint"))  # for llama-1b-fill
    flat, expected = _step_expected(model, config)
    del model  # onnxruntime alone in memory
    res["max_abs_diff"] = _ort_diff(os.path.join(folder, "ours.onnx"), flat, expected)
    return res


def case_llama_torch(folder: str) -> dict:
    import torch

    from ..torch_interpreter.onnx_export_errors import bypass_export_some_errors
    from ..torch_models.llm_helper import make_llm_inputs

    config, model = _llama("1b", meta=False)
    inputs, ds = make_llm_inputs(config, model=model)
    ds = torch.utils._pytree.tree_map(
        lambda v: torch.export.Dim.DYNAMIC if isinstance(v, str) else v, ds
    )
    path = os.path.join(folder, "torch.onnx")
    begin = time.perf_counter()
    with bypass_export_some_errors(patch_transformers=True) as modificator:
        torch.onnx.export(
            model,
            (),
            path,
            kwargs=modificator(inputs),
            dynamic_shapes=ds,
            dynamo=True,
            external_data=True,
        )
    res = {
        "time_s": time.perf_counter() - begin,
        "peak_rss_gb": _peak_rss_gb(),
        "weights_gb": sum(p.numel() * p.element_size() for p in model.state_dict().values())
        / 2**30,
    }
    flat, expected = _step_expected(model, config)
    del model, inputs
    res["max_abs_diff"] = _ort_diff(path, flat, expected)
    return res


def case_llama_fill(folder: str) -> dict:
    import hashlib

    from ..large import fill_weights

    checkpoint = os.path.join(folder, "checkpoint")
    if not os.path.isdir(checkpoint):
        return {"error": "run llama-1b-ours first (it writes the checkpoint)"}
    config, model = _llama("1b", meta=True)
    path = os.path.join(folder, "weight_free.onnx")
    res = _export_llama(model, config, path, external_threshold=0)
    res["export_peak_rss_gb"] = res["peak_rss_gb"]
    begin = time.perf_counter()
    report = fill_weights(path, [checkpoint])
    res["fill_time_s"] = time.perf_counter() - begin
    res["peak_rss_gb"] = _peak_rss_gb()  # export then fill
    res["matched"], res["unfilled"] = len(report.matched), len(report.unfilled)

    def digest(model_name):
        import onnx

        proto = onnx.load(os.path.join(folder, model_name), load_external_data=False)
        name = next(
            e.value for i in proto.graph.initializer for e in i.external_data if e.key == "location"
        )
        h = hashlib.sha256()
        with open(os.path.join(folder, name), "rb") as f:
            while chunk := f.read(1 << 24):
                h.update(chunk)
        return h.hexdigest()

    res["identical_data"] = digest("weight_free.onnx") == digest("ours.onnx")
    return res


def case_roundtrip_2gb(folder: str) -> dict:
    import numpy as np
    import onnxruntime
    import torch

    from ..torch_interpreter import to_onnx

    torch.manual_seed(0)
    # 9 x 256 MB = 2.25 GB of float32 weights
    model = torch.nn.Sequential(*[torch.nn.Linear(8192, 8192, bias=False) for _ in range(9)]).eval()
    for p in model.parameters():
        p.data *= 3**0.5  # the variance of the activations stays near 1
    x = torch.randn(3, 8192)
    feeds = [torch.randn(batch, 8192) for batch in (2, 5)]
    with torch.no_grad():  # computed first: the model is freed before onnxruntime runs
        expected = [model(f).numpy() for f in feeds]
    path = os.path.join(folder, "sub", "big.onnx")
    begin = time.perf_counter()
    to_onnx(model, (x,), dynamic_shapes=({0: "batch"},), filename=path)
    res = {
        "time_s": time.perf_counter() - begin,
        "peak_rss_gb": _peak_rss_gb(),
        "weights_gb": 9 * 8192 * 8192 * 4 / 2**30,
        "files": "+".join(sorted(os.listdir(os.path.dirname(path)))),
    }
    del model
    os.chdir(folder)  # another working directory than the model's
    sess = onnxruntime.InferenceSession(os.path.relpath(path), providers=["CPUExecutionProvider"])
    for f, e in zip(feeds, expected):
        got = sess.run(None, {sess.get_inputs()[0].name: f.numpy()})[0]
        res[f"max_abs_diff_batch{f.shape[0]}"] = float(np.abs(got - e).max())
        res[f"max_abs_output_batch{f.shape[0]}"] = float(np.abs(e).max())
    return res


def run_case(case: str, folder: str) -> dict:
    if case == "weight-free-8b":
        return case_weight_free("8b", folder)
    if case == "graph-70b":
        return case_weight_free("70b", folder)
    return {
        "roundtrip-2gb": case_roundtrip_2gb,
        "llama-1b-ours": case_llama_ours,
        "llama-1b-torch": case_llama_torch,
        "llama-1b-fill": case_llama_fill,
    }[case](folder)


def _versions() -> str:
    import onnx
    import onnxruntime
    import torch
    import transformers

    return (
        f"torch {torch.__version__}, transformers {transformers.__version__}, "
        f"onnx {onnx.__version__}, onnxruntime {onnxruntime.__version__}"
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--cases", default="all", help=f"comma-separated among {CASES}")
    parser.add_argument("--out", default="_doc/bench/large_model.csv", help="CSV file")
    parser.add_argument("--folder", default=None, help="working folder (default: a temporary one)")
    parser.add_argument("--child", default=None, help=argparse.SUPPRESS)
    ns = parser.parse_args(argv)
    if ns.child:  # one case in this process: its peak memory is its own
        res = run_case(ns.child, ns.folder)
        usage = resource.getrusage(resource.RUSAGE_SELF)
        res["process_cpu_s"] = usage.ru_utime + usage.ru_stime  # the machine may be busy
        print("RESULT " + json.dumps(res), flush=True)
        return 0
    cases = CASES if ns.cases == "all" else ns.cases.split(",")
    folder = ns.folder or tempfile.mkdtemp(prefix="bench_large_")
    try:
        rows = _run_cases(cases, folder)
    finally:
        if not ns.folder:  # about 20 GB of models and checkpoints
            shutil.rmtree(folder, ignore_errors=True)
    if ns.out:
        _write_csv(ns.out, rows)
    return 0


def _run_cases(cases: list[str], folder: str) -> list[dict]:
    rows, date, versions = [], datetime.date.today().isoformat(), _versions()
    for case in cases:
        proc = subprocess.run(
            [sys.executable, "-m", MODULE, "--child", case, "--folder", folder],
            capture_output=True,
            text=True,
        )
        lines = [x for x in proc.stdout.splitlines() if x.startswith("RESULT ")]
        res = (
            json.loads(lines[-1][7:])
            if lines
            else {"error": (proc.stderr.strip().splitlines() or ["?"])[-1][:200]}
        )
        print(case, res, flush=True)
        rows.append(_row(case, res, date, versions))
    return rows


def _write_csv(out: str, rows: list[dict]) -> None:
    """Writes the rows, keeping the rows of the cases not run this time."""
    done = {r["case"] for r in rows}
    if os.path.exists(out):
        with open(out, newline="") as f:
            rows = [r for r in csv.DictReader(f) if r["case"] not in done] + rows
    rows.sort(key=lambda r: CASES.index(r["case"]) if r["case"] in CASES else len(CASES))
    os.makedirs(os.path.dirname(os.path.abspath(out)), exist_ok=True)
    with open(out, "w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=COLUMNS)
        writer.writeheader()
        writer.writerows(rows)


COLUMNS = [
    "case",
    "time_s",
    "peak_rss_gb",
    "weights_gb",
    "peak_over_weights",
    "max_abs_diff",
    "details",
    "date",
    "versions",
]


def _row(case: str, res: dict, date: str, versions: str) -> dict:
    """One CSV row: the common measures in columns, the rest in ``details``."""
    res = {k: float(f"{v:.4g}") if isinstance(v, float) else v for k, v in res.items()}
    row = {k: res.pop(k, "") for k in ("time_s", "peak_rss_gb", "weights_gb")}
    diffs = [res.pop(k) for k in sorted(res) if k.startswith("max_abs_diff")]
    row["max_abs_diff"] = max(diffs) if diffs else ""
    if row["peak_rss_gb"] and row["weights_gb"]:
        row["peak_over_weights"] = round(row["peak_rss_gb"] / row["weights_gb"], 3)
    else:
        row["peak_over_weights"] = ""
    row.update(
        case=case,
        date=date,
        versions=versions,
        details="; ".join(f"{k}={v}" for k, v in sorted(res.items())),
    )
    return row


if __name__ == "__main__":
    sys.exit(main())
