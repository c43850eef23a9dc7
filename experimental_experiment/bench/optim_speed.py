"""Size and onnxruntime speed of optimized models: node count and CPU latency of tiny
transformers models and a small CNN exported by :func:`to_onnx` (not optimized, default
patterns, default+onnxruntime patterns), by ``torch.onnx.export(dynamo=True)`` (its
default ``optimize=True``) and run eagerly, measured in one run.

.. code-block:: bash

    python -m experimental_experiment.bench.optim_speed --repeat 50 --output optim.csv
    python -m experimental_experiment.bench.optim_speed --model llama,bert --repeat 10

Every model has random weights (the normalization weights too, so that no
multiplication by one disappears), 2 layers, a hidden size of 64 to 128 and is
exported with a dynamic batch and sequence length; the inputs are ``input_ids`` and an
``attention_mask`` of batch 2 and sequence 32 (images of 2x3x32x32 for the CNN).
Latency: median of ``--repeat`` runs after ``--warmup`` runs, the variants of a model
timed in turns, one intra-op thread for onnxruntime (default session options, its own
graph optimizations included) and for torch. ``max_abs_diff`` compares the first output
with eager. Ratios below 1 mean fewer nodes or faster than the reference.
"""

from __future__ import annotations

import argparse
import contextlib
import copy
import csv
import logging
import sys
from typing import Callable

import numpy as np
import torch

from ._timing import interleaved_medians
from .export_speed import _quiet

logger = logging.getLogger("experimental_experiment.bench.optim_speed")

VARIANTS = ("to_onnx no-opt", "to_onnx default", "to_onnx default+ort", "torch.onnx", "eager")
_LM = dict(vocab_size=1024, max_position_embeddings=512)
_DEC = dict(
    hidden_size=64,
    intermediate_size=128,
    num_hidden_layers=2,
    num_attention_heads=4,
    num_key_value_heads=2,
    **_LM,
)
#: transformers class names (config, model) and config of every language model
LM_CONFIGS = {
    "llama": ("LlamaConfig", "LlamaModel", _DEC),
    "mistral": ("MistralConfig", "MistralModel", _DEC),
    "qwen2": ("Qwen2Config", "Qwen2Model", _DEC),
    "phi3": ("Phi3Config", "Phi3Model", dict(_DEC, pad_token_id=0)),
    "gpt2": (
        "GPT2Config",
        "GPT2Model",
        dict(n_embd=64, n_layer=2, n_head=4, n_inner=128, vocab_size=1024, n_positions=512),
    ),
    "bert": (
        "BertConfig",
        "BertModel",
        dict(
            hidden_size=128,
            intermediate_size=256,
            num_hidden_layers=2,
            num_attention_heads=4,
            **_LM,
        ),
    ),
}
#: real sizes: the models of :mod:`export_time` (ViT-B/16, Swin-T, MobileViTv2, ConvNeXt-T,
#: ResNet-50, Llama-like decoders with a cache), timed at their export sizes
REAL_MODELS = ("vit", "swin", "mobilevit", "convnext", "resnet", "llama-512", "llama-1024")
MODELS = (*LM_CONFIGS, "cnn", *REAL_MODELS)


class SmallCNN(torch.nn.Module):
    """Two convolution blocks (conv, batch norm, relu, pooling) and a linear head."""

    def __init__(self):
        super().__init__()
        self.features = torch.nn.Sequential(
            torch.nn.Conv2d(3, 16, 3, padding=1),
            torch.nn.BatchNorm2d(16),
            torch.nn.ReLU(),
            torch.nn.MaxPool2d(2),
            torch.nn.Conv2d(16, 32, 3, padding=1),
            torch.nn.BatchNorm2d(32),
            torch.nn.ReLU(),
            torch.nn.AdaptiveAvgPool2d(1),
        )
        self.head = torch.nn.Linear(32, 10)

    def forward(self, x):
        return self.head(torch.flatten(self.features(x), 1))


def _randomize(model: torch.nn.Module) -> torch.nn.Module:
    """Adds noise to every parameter and buffer of float type (normalization weights
    and batch norm statistics are no longer ones and zeros)."""
    gen = torch.Generator().manual_seed(1)
    with torch.no_grad():
        for p in list(model.parameters()) + list(model.buffers()):
            if p.dtype.is_floating_point and p.numel() > 1:
                p.add_(torch.randn(p.shape, generator=gen) * 0.05)
    return model.eval()


def make_model(name: str, batch: int = 2, seq: int = 32):
    """Returns ``(model, args, kwargs, dims)``, dims maps every input to its dynamic
    axes ``{axis: name}``."""
    torch.manual_seed(0)
    if name in REAL_MODELS:
        from .export_time import MODELS as REAL

        model, inputs, sizes, _, dims = REAL[name]()
        args, kwargs = inputs(*sizes)
        return model, args, kwargs, dims
    if name == "cnn":
        model = _randomize(SmallCNN())
        return model, (torch.randn(batch, 3, 32, 32),), {}, {"x": {0: "batch"}}
    import transformers

    config_cls, model_cls, kwargs = LM_CONFIGS[name]
    config = getattr(transformers, config_cls)(**kwargs)
    config._attn_implementation = "sdpa"
    config.use_cache = False
    model = _randomize(getattr(transformers, model_cls)(config))
    gen = torch.Generator().manual_seed(0)
    ids = torch.randint(0, 1024, (batch, seq), generator=gen)
    mask = torch.ones((batch, seq), dtype=torch.int64)
    axes = {0: "batch", 1: "seq"}
    return model, (ids,), {"attention_mask": mask}, {"input_ids": axes, "attention_mask": axes}


def _patches(name: str):
    """The transformers patches for the real-size models (as export_time runs them)."""
    if name not in REAL_MODELS:
        return contextlib.nullcontext()
    from ..torch_interpreter.onnx_export_errors import bypass_export_some_errors

    return bypass_export_some_errors(patch_transformers=True)


def _fresh(kwargs: dict) -> dict:
    """``kwargs`` with a copy of every value that is not a tensor: the model appends the
    new positions to a cache given as input (tensors are not changed, not copied)."""
    return {k: v if isinstance(v, torch.Tensor) else copy.deepcopy(v) for k, v in kwargs.items()}


def _first(outputs) -> np.ndarray:
    """The first output tensor of a model (a ModelOutput, a tuple or a tensor)."""
    if isinstance(outputs, torch.Tensor):
        return outputs.detach().numpy()
    if hasattr(outputs, "to_tuple"):
        outputs = outputs.to_tuple()
    return _first(outputs[0])


def export_functions(model, args, kwargs, dims) -> dict[str, Callable]:
    """One function per exporter returning an ONNX ModelProto."""
    from ..torch_interpreter import to_onnx
    from ..xbuilder import OptimizationOptions

    def ours(optimize: bool, patterns: str | None):
        options = OptimizationOptions(patterns=patterns) if patterns else None
        return lambda: to_onnx(
            model, args, kwargs, dynamic_shapes=dims, optimize=optimize, options=options
        )

    def torch_onnx():
        from .export_time import _torch_spec

        ds = _torch_spec(dims)
        if not kwargs:  # a positional model (the CNN): a tuple of dynamic shapes
            ds = tuple(ds.values())
        return torch.onnx.export(
            model, args, kwargs=kwargs, dynamo=True, dynamic_shapes=ds, verbose=False
        ).model_proto

    return {
        "to_onnx no-opt": ours(False, None),
        "to_onnx default": ours(True, "default"),
        "to_onnx default+ort": ours(True, "default+onnxruntime"),
        "torch.onnx": torch_onnx,
    }


def _ort_session(onx):
    import onnxruntime

    opts = onnxruntime.SessionOptions()
    opts.intra_op_num_threads = 1
    opts.inter_op_num_threads = 1
    return onnxruntime.InferenceSession(
        onx.SerializeToString(), opts, providers=["CPUExecutionProvider"]
    )


def bench_model(name: str, *, warmup: int = 5, repeat: int = 30, variants=VARIANTS) -> list[dict]:
    """Rows ``{model, variant, nodes, latency_ms, max_abs_diff, error}`` of one model.

    The variants are timed in turns (one run of each, ``repeat`` times) so that a
    change of the machine's load affects all of them alike."""
    from ..runtime import flatten_tensors

    model, args, kwargs, dims = make_model(name)
    rows, runs = [], {}
    with _quiet(), _patches(name):
        # one array per ONNX input (a cache flattened: the patches register it; flags
        # such as interpolate_pos_encoding=True are constants of the graph)
        inputs = [t.numpy() for t in flatten_tensors((args, kwargs))]
        expected = _first(model(*args, **_fresh(kwargs)))
        functions = export_functions(model, args, kwargs, dims)
        for variant in variants:
            row = dict(
                model=name,
                variant=variant,
                nodes=None,
                latency_ms=None,
                max_abs_diff=None,
                error="",
            )
            rows.append(row)
            try:
                if variant == "eager":
                    runs[variant] = lambda: model(*args, **_fresh(kwargs))  # noqa: E731
                    continue
                onx = functions[variant]()
                row["nodes"] = len(onx.graph.node)
                sess = _ort_session(onx)
                feeds = dict(zip([i.name for i in sess.get_inputs()], inputs))
                got = sess.run(None, feeds)[0]
                row["max_abs_diff"] = float(np.abs(got.astype(np.float64) - expected).max())
                runs[variant] = lambda sess=sess, feeds=feeds: sess.run(None, feeds)
            except Exception as e:  # a failing exporter is reported, the others go on
                row["error"] = f"{type(e).__name__}: {str(e).splitlines()[0][:150]}"
                logger.warning("%s %s failed: %s", name, variant, row["error"])
        times = interleaved_medians(runs, warmup, repeat)
    for row in rows:
        if row["variant"] in times:
            row["latency_ms"] = times[row["variant"]][0] * 1000
        logger.info("%s", row)
    _add_ratios(rows)
    return rows


def _add_ratios(rows: list[dict]) -> None:
    """latency / latency of torch.onnx, latency / eager, nodes / nodes of torch.onnx."""
    ref = {r["variant"]: r for r in rows}
    for r in rows:
        for key, base, col in [
            ("latency_ms", "torch.onnx", "speed_vs_torch_onnx"),
            ("latency_ms", "eager", "speed_vs_eager"),
            ("nodes", "torch.onnx", "nodes_vs_torch_onnx"),
        ]:
            b = ref.get(base, {}).get(key)
            r[col] = None if not b or r[key] is None else r[key] / b


COLUMNS = (
    "model",
    "variant",
    "nodes",
    "nodes_vs_torch_onnx",
    "latency_ms",
    "speed_vs_torch_onnx",
    "speed_vs_eager",
    "max_abs_diff",
    "error",
)


def _fmt(v) -> str:
    if v is None:
        return ""
    if isinstance(v, float):
        return f"{v:.3g}" if abs(v) < 1e-2 else f"{v:.3f}"
    return str(v)


def format_table(rows: list[dict]) -> str:
    """A markdown table of the rows (ratios < 1 mean smaller or faster)."""
    lines = ["| " + " | ".join(COLUMNS) + " |", "|" + "---|" * len(COLUMNS)]
    lines += ["| " + " | ".join(_fmt(r.get(c)) for c in COLUMNS) + " |" for r in rows]
    return "\n".join(lines)


def write_csv(rows: list[dict], filename: str) -> None:
    with open(filename, "w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=COLUMNS, extrasaction="ignore")
        writer.writeheader()
        writer.writerows({c: _fmt(r.get(c)) for c in COLUMNS} for r in rows)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m experimental_experiment.bench.optim_speed",
        description="Node count and onnxruntime latency of optimized models.",
    )
    parser.add_argument(
        "--model", default=",".join(MODELS), help=f"comma-separated models among {','.join(MODELS)}"
    )
    parser.add_argument(
        "--variant",
        default=",".join(VARIANTS),
        help=f"comma-separated variants among {','.join(VARIANTS)}",
    )
    parser.add_argument("--repeat", type=int, default=30, help="timed runs (median)")
    parser.add_argument("--warmup", type=int, default=5, help="runs before timing")
    parser.add_argument("--output", default=None, help="writes the rows to this CSV file")
    parser.add_argument("-v", "--verbose", action="count", default=0)
    ns = parser.parse_args(argv)
    if ns.verbose:
        logging.basicConfig(level=logging.INFO)
    models = [m for m in ns.model.split(",") if m]
    variants = [v for v in ns.variant.split(",") if v]
    unknown = [m for m in models if m not in MODELS] + [v for v in variants if v not in VARIANTS]
    if unknown:
        parser.error(f"unknown models or variants: {unknown}")
    torch.set_num_threads(1)
    rows = []
    for name in models:
        rows.extend(bench_model(name, warmup=ns.warmup, repeat=ns.repeat, variants=variants))
    if ns.output:
        write_csv(rows, ns.output)
    print(format_table(rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
