"""Export time at real sizes: vision transformers, CNNs and small LLMs with random weights,
exported with dynamic batch and image size (or sequence and cache length), in one run.

.. code-block:: bash

    python -m experimental_experiment.bench.export_time --csv _doc/bench/export_time.csv
    python -m experimental_experiment.bench.export_time --models swin,mobilevit

Each (model, exporter) runs in its own process (memory and symbolic-shape caches do not
leak from one to the next), which reports:

* ``capture``: :func:`torch.export.export` alone, non-strict, as a user calls it;
* ``capture size-oblivious``: the same under ``backed_size_oblivious=True``, as
  ``torch.onnx.export`` and :func:`to_onnx` capture;
* ``to_onnx``: our exporter, capture included, default optimization;
* ``torch.onnx``: ``torch.onnx.export(..., dynamo=True)`` (optimize on, its default).

For the ONNX exporters the child also runs the model in onnxruntime on other sizes
and records the largest difference with eager PyTorch, the node count and its peak
resident memory (``ru_maxrss``, the model's weights included).
"""

from __future__ import annotations

import argparse
import csv
import io
import json
import logging
import os
import resource
import subprocess
import sys
import tempfile
import time
import warnings

import torch

logger = logging.getLogger("experimental_experiment.bench.export_time")

EXPORTERS = ("capture", "capture size-oblivious", "to_onnx", "torch.onnx")


def _vision(name: str):
    import transformers as tr

    configs = {
        # ViT-Base/16 with 6 of its 12 layers; interpolate_pos_encoding keeps H, W free
        "vit": (tr.ViTModel, tr.ViTConfig(num_hidden_layers=6), 224),
        "swin": (tr.SwinModel, tr.SwinConfig(), 224),  # swin-tiny
        "mobilevit": (tr.MobileViTV2Model, tr.MobileViTV2Config(width_multiplier=0.5), 256),
        "convnext": (tr.ConvNextModel, tr.ConvNextConfig(), 224),  # convnext-tiny
        "resnet": (tr.ResNetModel, tr.ResNetConfig(), 224),  # resnet-50
    }
    cls, config, size = configs[name]
    model = cls(config).eval()
    kwargs = {"interpolate_pos_encoding": True} if name == "vit" else {}

    def inputs(batch, h, w):
        return (torch.randn(batch, 3, h, w),), dict(kwargs)

    spec = {"pixel_values": {0: "batch", 2: "height", 3: "width"}}
    spec.update({k: None for k in kwargs})
    other = (3, size + 32, size - 32)
    if name == "swin":
        # transformers' Swin shrinks its window when the last stage is at most 7 x 7
        # (images up to 255 pixels), a branch fixed at capture: exported above it
        return model, inputs, (2, 256, 256), (3, 288, 320), spec
    if name == "vit":
        # transformers' ViT skips the interpolation when the image has the pretraining
        # size (224 x 224), a branch fixed at capture: exported at another size
        return model, inputs, (2, 192, 160), (3, 256, 224), spec
    return model, inputs, (2, size, size), other, spec


def _llm(hidden: int):
    from transformers import LlamaConfig

    from ..torch_models.llm_helper import build_causal_lm, make_llm_inputs

    config = LlamaConfig(
        hidden_size=hidden,
        num_hidden_layers=4,
        num_attention_heads=8,
        num_key_value_heads=4,
        intermediate_size=hidden * 11 // 4,
        vocab_size=32000,
        max_position_embeddings=4096,
    )
    model = build_causal_lm(config)

    def inputs(batch, seq, past):
        gen = torch.Generator().manual_seed(batch * 1000 + seq + past)
        values, _ = make_llm_inputs(config, batch, seq, past, model=model, generator=gen)
        return (), values

    _, spec = make_llm_inputs(config, 2, 3, 5, model=model)
    return model, inputs, (2, 32, 64), (3, 17, 33), spec


MODELS = {
    "vit": lambda: _vision("vit"),
    "swin": lambda: _vision("swin"),
    "mobilevit": lambda: _vision("mobilevit"),
    "convnext": lambda: _vision("convnext"),
    "resnet": lambda: _vision("resnet"),
    "llama-512": lambda: _llm(512),
    "llama-1024": lambda: _llm(1024),
}


def _torch_spec(spec):
    """The same dynamic_shapes with torch.export.Dim.DYNAMIC instead of names."""
    if isinstance(spec, str):
        return torch.export.Dim.DYNAMIC
    if isinstance(spec, dict):
        return {k: _torch_spec(v) for k, v in spec.items()}
    if isinstance(spec, (list, tuple)):
        return type(spec)(_torch_spec(v) for v in spec)
    return spec


def _export(exporter: str, model, args, kwargs, spec):
    from ..torch_interpreter import to_onnx

    if exporter.startswith("capture"):
        ctx = (
            torch.fx.experimental._config.patch(backed_size_oblivious=True)
            if "oblivious" in exporter
            else _null()
        )
        with ctx:
            return torch.export.export(
                model, args, kwargs, dynamic_shapes=_torch_spec(spec), strict=False
            )
    if exporter == "to_onnx":
        return to_onnx(model, args, kwargs, dynamic_shapes=spec)
    return torch.onnx.export(
        model,
        args,
        kwargs=kwargs,
        dynamic_shapes=_torch_spec(spec),
        dynamo=True,
        report=False,
        verify=False,
    ).model_proto


class _null:
    def __enter__(self):
        return self

    def __exit__(self, *args):
        return False


def _max_diff(onx, model, inputs, sizes) -> float:
    from ..runtime import flatten_tensors, run_onnx

    args, kwargs = inputs(*sizes)
    feeds = flatten_tensors((args, {k: v for k, v in kwargs.items() if not isinstance(v, bool)}))
    with torch.no_grad():
        expected = flatten_tensors(model(*args, **kwargs))
    got = run_onnx(onx, feeds)
    return max(
        float((e.float() - torch.from_numpy(g).float()).abs().max()) for e, g in zip(expected, got)
    )


def run_one(name: str, exporter: str) -> dict:
    """Builds ``name`` and measures one exporter (in the current process)."""
    from ..torch_interpreter.onnx_export_errors import bypass_export_some_errors

    torch.manual_seed(0)
    model, inputs, sizes, other, spec = MODELS[name]()
    args, kwargs = inputs(*sizes)
    row = dict(model=name, exporter=exporter, n_params=sum(p.numel() for p in model.parameters()))
    with (
        torch.no_grad(),
        warnings.catch_warnings(),
        bypass_export_some_errors(patch_transformers=True),
    ):
        warnings.simplefilter("ignore")
        usage = resource.getrusage(resource.RUSAGE_SELF)
        begin = time.perf_counter()
        try:
            result = _export(exporter, model, args, kwargs, spec)
        except Exception as e:
            row.update(error=f"{type(e).__name__}: {str(e).splitlines()[0][:160]}")
            return row
        row["seconds"] = time.perf_counter() - begin
        after = resource.getrusage(resource.RUSAGE_SELF)
        # CPU time (every thread) depends less than wall time on a shared machine's load
        row["cpu_seconds"] = after.ru_utime + after.ru_stime - usage.ru_utime - usage.ru_stime
        row["page_faults"] = after.ru_minflt - usage.ru_minflt
        if not exporter.startswith("capture"):
            row["n_nodes"] = len(result.graph.node)
            try:
                row["max_abs_diff"] = max(
                    _max_diff(result, model, inputs, s) for s in (sizes, other)
                )
            except Exception as e:  # onnxruntime or eager failed on another size
                row["error"] = f"check: {type(e).__name__}: {str(e).splitlines()[0][:160]}"
    row["peak_rss_mb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    return row


def run_one_process(name: str, exporter: str, timeout: float) -> dict:
    """Measures (model, exporter) in a child process; a crash or a timeout is a row."""
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "row.json")
        cmd = [
            sys.executable,
            "-m",
            "experimental_experiment.bench.export_time",
            "--one",
            name,
            exporter,
            out,
        ]
        try:
            proc = subprocess.run(cmd, timeout=timeout, capture_output=True, text=True)
        except subprocess.TimeoutExpired:
            return dict(model=name, exporter=exporter, error=f"timeout after {timeout:.0f} s")
        if os.path.exists(out):
            with open(out) as f:
                return json.load(f)
        tail = (proc.stderr.strip().splitlines() or ["no output"])[-1]
        return dict(model=name, exporter=exporter, error=f"crash: {tail}")


def median_row(runs: list[dict]) -> dict:
    """The run of median time among the successful ones (the lower middle for an even
    count), else the first failure; ``runs`` tells how many were measured."""
    ok = sorted(
        (r for r in runs if "seconds" in r and not r.get("error")), key=lambda r: r["seconds"]
    )
    row = dict(ok[(len(ok) - 1) // 2] if ok else runs[0])
    row["runs"] = len(ok)
    return row


def byte_compile_package() -> None:
    """Byte-compiles this package's modules (``__pycache__``), as pip does when it
    installs a package: torch's modules are compiled at install, this package's are not
    in an editable checkout, and under ``PYTHONDONTWRITEBYTECODE`` every module imported
    during an export (the optimizer's patterns, for one) would be compiled from source
    again in each measured process."""
    import compileall

    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    compileall.compile_dir(root, quiet=1)


def run_all(models, exporters, timeout: float, repeat: int = 1) -> list[dict]:
    """Runs every (model, exporter) ``repeat`` times, each in a fresh child process, in
    rounds (the load of the machine affects every exporter alike); keeps the median."""
    byte_compile_package()
    runs: dict[tuple[str, str], list[dict]] = {(m, e): [] for m in models for e in exporters}
    for k in range(repeat):
        for (name, exporter), done in runs.items():
            logger.info("round %d: %s / %s", k + 1, name, exporter)
            done.append(run_one_process(name, exporter, timeout))
            logger.info("  %s", done[-1])
    return [median_row(done) for done in runs.values()]


def merge_rows(old: list[dict], new: list[dict]) -> list[dict]:
    """``old`` with the rows of the same (model, exporter) replaced by ``new``'s, the
    new cases appended; the order of ``old`` is kept."""
    fresh = {(r["model"], r["exporter"]): r for r in new}
    out = [fresh.pop((r["model"], r["exporter"]), r) for r in old]
    return out + list(fresh.values())


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", default=",".join(MODELS))
    parser.add_argument("--exporters", default=",".join(EXPORTERS))
    parser.add_argument("--timeout", type=float, default=900)
    parser.add_argument("--csv", default=None)
    parser.add_argument("--one", nargs=3, metavar=("MODEL", "EXPORTER", "JSON"))
    parser.add_argument(
        "--repeat", type=int, default=1, help="fresh processes per case, the median is kept"
    )
    parser.add_argument(
        "--merge", action="store_true", help="keep the rows of --csv that this run does not measure"
    )
    ns = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    if ns.one:
        row = run_one(ns.one[0], ns.one[1])
        with open(ns.one[2], "w") as f:
            json.dump(row, f)
        return 0
    rows = run_all(ns.models.split(","), ns.exporters.split(","), ns.timeout, ns.repeat)
    if ns.csv and ns.merge and os.path.exists(ns.csv):
        with open(ns.csv, newline="", encoding="utf-8") as f:
            rows = merge_rows(list(csv.DictReader(f)), rows)
    if ns.csv:
        keys = [
            "model",
            "exporter",
            "n_params",
            "seconds",
            "cpu_seconds",
            "page_faults",
            "n_nodes",
            "max_abs_diff",
            "peak_rss_mb",
            "runs",
            "error",
        ]
        from ..xbuilder.model_container import AtomicFiles

        text = io.StringIO(newline="")
        writer = csv.DictWriter(text, keys)
        writer.writeheader()
        writer.writerows(rows)
        path = os.path.abspath(ns.csv)
        with AtomicFiles(os.path.dirname(path)) as files:
            files.open(path).write(text.getvalue().encode("utf-8"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
