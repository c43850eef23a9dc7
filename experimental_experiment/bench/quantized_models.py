"""Quantized models exported to ONNX: torchao's PT2E flows on ResNet-50, ViT-B/16,
bert-base and a small Llama (random weights), exported by :func:`to_onnx` and by
``torch.onnx.export(..., dynamo=True)`` in the same run.

.. code-block:: bash

    python -m experimental_experiment.bench.quantized_models --out /tmp/qbench
    python -m experimental_experiment.bench.quantized_models --out /tmp/q --size tiny \\
        --models bert --flows x86_static,qat

Flows: ``x86_static`` and ``x86_dynamic`` (``X86InductorQuantizer``), ``xnnpack``
(``XNNPACKQuantizer``, symmetric per-channel weights, static), ``qat``
(``prepare_qat_pt2e`` with the X86 QAT configuration, two training steps, observers off,
exported before ``convert_pt2e`` so the graph keeps its fake-quantize nodes) and
``qat_converted`` (the same model after ``convert_pt2e``).

Each row of the CSV gives the export status and time, the node count and size of the
model, the largest difference with the eager quantized model on two input sizes
(onnxruntime with all its optimizations), the fused quantized nodes onnxruntime made
(``QLinearConv``, ``QLinearMatMul``, ``MatMulInteger``, ``DynamicQuantizeLinear``...)
and the median latency on one thread of the quantized model and of the float model.
"""

from __future__ import annotations

import argparse
import csv
import logging
import os
import statistics
import sys
import tempfile
import time
import warnings
from dataclasses import dataclass
from typing import Callable

import numpy as np
import torch

logger = logging.getLogger("experimental_experiment.bench.quantized_models")

MODELS = ("resnet", "vit", "bert", "llama")
FLOWS = ("x86_static", "x86_dynamic", "xnnpack", "qat", "qat_converted")
#: flows skipped for a model: dynamic quantization only quantizes linear layers
SKIPPED = {"resnet": ("x86_dynamic",)}
EXPORTERS = ("to_onnx", "torch.onnx")
#: node types counted in the model onnxruntime optimized
FUSED = (
    "QLinearConv",
    "QLinearMatMul",
    "MatMulInteger",
    "DynamicQuantizeLinear",
    "QLinearAdd",
    "QLinearMul",
    "QLinearGlobalAveragePool",
    "QGemm",
    "DynamicQuantizeMatMul",
    "MatMulIntegerToFloat",
    "QuantizeLinear",
    "DequantizeLinear",
)
COLUMNS = (
    "model",
    "flow",
    "exporter",
    "status",
    "error",
    "export_s",
    "nodes",
    "size_mb",
    "max_abs_diff",
    "diff_noopt",
    "one_step",
    "fused",
    "latency_int8_ms",
    "latency_fp32_ms",
)


@dataclass
class Case:
    """A float model taking one tensor, and how to make its inputs."""

    name: str
    model: torch.nn.Module
    inputs: Callable[[int, int], tuple]  # (batch, size) -> args
    sizes: tuple  # ((batch, size), ...): export, second size, latency
    dynamic: dict  # axis -> name of the dynamic dimensions of the input


class _Logits(torch.nn.Module):
    """``model(x).logits`` (``kwargs`` fixed), a module with one tensor in and out."""

    def __init__(self, model, **kwargs):
        super().__init__()
        self.model = model
        self.kwargs = kwargs

    def forward(self, x):
        return self.model(x, **self.kwargs).logits


def _images(channels: int = 3):
    def make(batch, size, seed=0):
        gen = torch.Generator().manual_seed(seed + batch * 1000 + size)
        return (torch.randn(batch, channels, size, size, generator=gen),)

    return make


def _tokens(vocab: int):
    def make(batch, size, seed=0):
        gen = torch.Generator().manual_seed(seed + batch * 1000 + size)
        return (torch.randint(0, vocab, (batch, size), generator=gen),)

    return make


def make_case(name: str, size: str = "real") -> Case:
    """A model of the benchmark, ``tiny`` (tests) or ``real`` (ResNet-50, ViT-B/16,
    bert-base, the small Llama of :mod:`.llm_exporters`), random weights."""
    import transformers as tr

    torch.manual_seed(0)
    tiny = size == "tiny"
    if name == "resnet":
        config = (
            tr.ResNetConfig(embedding_size=8, hidden_sizes=[8, 16], depths=[1, 1], num_labels=10)
            if tiny
            else tr.ResNetConfig()
        )
        model = _Logits(tr.ResNetForImageClassification(config))
        sizes = ((2, 32), (3, 48), (1, 224)) if tiny else ((2, 224), (1, 256), (1, 224))
        return Case(name, model.eval(), _images(), sizes, {0: "batch", 2: "h", 3: "w"})
    if name == "vit":
        config = (
            tr.ViTConfig(
                hidden_size=32,
                num_hidden_layers=2,
                num_attention_heads=2,
                intermediate_size=64,
                image_size=32,
                patch_size=8,
                num_labels=10,
            )
            if tiny
            else tr.ViTConfig(num_labels=1000)
        )
        model = _Logits(tr.ViTForImageClassification(config))
        # the image size stays: the patch count is specialized by the PT2E capture
        sizes = ((2, 32), (3, 32), (1, 32)) if tiny else ((2, 224), (1, 224), (1, 224))
        return Case(name, model.eval(), _images(), sizes, {0: "batch"})
    if name == "bert":
        config = (
            tr.BertConfig(
                hidden_size=32,
                num_hidden_layers=2,
                num_attention_heads=2,
                intermediate_size=64,
                vocab_size=100,
            )
            if tiny
            else tr.BertConfig()
        )
        model = _Logits(tr.BertForSequenceClassification(config))
        sizes = ((2, 8), (3, 13), (1, 32)) if tiny else ((2, 32), (1, 64), (1, 128))
        return Case(name, model.eval(), _tokens(config.vocab_size), sizes, {0: "batch", 1: "seq"})
    if name == "llama":
        from .llm_exporters import make_llama

        config, model = make_llama("tiny" if tiny else "small")
        model = _Logits(model, use_cache=False)
        sizes = ((2, 8), (3, 13), (1, 8)) if tiny else ((2, 16), (1, 24), (1, 32))
        return Case(name, model.eval(), _tokens(config.vocab_size), sizes, {0: "batch", 1: "seq"})
    raise ValueError(f"unknown model {name!r}, expected one of {MODELS}")


def _export_dims(case: Case) -> tuple:
    return ({k: torch.export.Dim.DYNAMIC for k in case.dynamic},)


def _quantizer(flow: str):
    """The torchao quantizer of ``flow``."""
    from torchao.quantization.pt2e.quantizer import x86_inductor_quantizer as xiq

    if flow == "xnnpack":
        from torchao.testing.pt2e._xnnpack_quantizer import (
            XNNPACKQuantizer,
            get_symmetric_quantization_config,
        )

        return XNNPACKQuantizer().set_global(get_symmetric_quantization_config(is_per_channel=True))
    config = xiq.get_default_x86_inductor_quantization_config(
        is_dynamic=flow == "x86_dynamic", is_qat=flow.startswith("qat")
    )
    return xiq.X86InductorQuantizer().set_global(config)


def quantize(case: Case, flow: str, calibration: int = 3, steps: int = 2) -> torch.fx.GraphModule:
    """The model quantized by torchao's PT2E ``flow`` (see the module docstring)."""
    from torchao.quantization.pt2e import (
        disable_observer,
        move_exported_model_to_eval,
    )
    from torchao.quantization.pt2e.quantize_pt2e import (
        convert_pt2e,
        prepare_pt2e,
        prepare_qat_pt2e,
    )

    (batch, size) = case.sizes[0]
    example = case.inputs(batch, size)
    qat = flow.startswith("qat")
    model = case.model.train() if qat else case.model.eval()
    graph = torch.export.export(model, example, dynamic_shapes=_export_dims(case)).module()
    case.model.eval()
    if qat:
        prepared = prepare_qat_pt2e(graph, _quantizer(flow))
        optimizer = torch.optim.SGD(prepared.parameters(), lr=1e-3)
        for i in range(steps):
            out = prepared(*case.inputs(batch, size, seed=10 + i))
            out.float().square().mean().backward()
            optimizer.step()
            optimizer.zero_grad()
        prepared.apply(disable_observer)
        move_exported_model_to_eval(prepared)
        if flow == "qat":
            return prepared
        return convert_pt2e(prepared)
    prepared = prepare_pt2e(graph, _quantizer(flow))
    with torch.no_grad():
        for i in range(calibration):
            prepared(*case.inputs(batch, size, seed=20 + i))
    return convert_pt2e(prepared)


def export(model, case: Case, exporter: str):
    """``(onnx.ModelProto, seconds)`` exported with a dynamic batch and size."""
    (batch, size) = case.sizes[0]
    args = case.inputs(batch, size)
    begin = time.perf_counter()
    if exporter == "to_onnx":
        from ..torch_interpreter import to_onnx

        onx = to_onnx(model, args, dynamic_shapes=(dict(case.dynamic),))
    elif exporter == "torch.onnx":
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            program = torch.onnx.export(
                model, args, dynamic_shapes=_export_dims(case), dynamo=True, verbose=False
            )
        onx = program.model_proto
    else:
        raise ValueError(f"unknown exporter {exporter!r}, expected one of {EXPORTERS}")
    return onx, time.perf_counter() - begin


def session(onx, level: str = "all", path: str | None = None, threads: int = 0):
    """An onnxruntime CPU session; ``path`` receives the optimized model."""
    import onnxruntime

    so = onnxruntime.SessionOptions()
    so.graph_optimization_level = (
        onnxruntime.GraphOptimizationLevel.ORT_ENABLE_ALL
        if level == "all"
        else onnxruntime.GraphOptimizationLevel.ORT_DISABLE_ALL
    )
    if path:
        so.optimized_model_filepath = path
    if threads:
        so.intra_op_num_threads = threads
        so.inter_op_num_threads = 1
    data = onx if isinstance(onx, str) else onx.SerializeToString()
    return onnxruntime.InferenceSession(data, so, providers=["CPUExecutionProvider"])


def _run(sess, args) -> np.ndarray:
    feeds = {i.name: a.numpy() for i, a in zip(sess.get_inputs(), args)}
    return sess.run(None, feeds)[0]


def max_diff(sess, model, case: Case) -> float:
    """Largest absolute difference with the eager model over the first two sizes."""
    worst = 0.0
    for batch, size in case.sizes[:2]:
        args = case.inputs(batch, size, seed=30)
        with torch.no_grad():
            expected = model(*args).float().numpy()
        got = _run(sess, args)
        if got.shape != expected.shape:
            raise AssertionError(f"shape {got.shape} != {expected.shape} for {(batch, size)}")
        worst = max(worst, float(np.abs(got.astype(np.float32) - expected).max()))
    return worst


def one_step(model: torch.fx.GraphModule) -> float:
    """The change of the output when every input of the last linear layer moves by one
    quantization step: its input scale times the largest row sum of ``|weight|``; nan
    when the graph does not end with a statically quantized linear layer."""
    qd = torch.ops.quantized_decomposed
    scale, weight = None, None
    for node in model.graph.nodes:
        if node.target in (qd.quantize_per_tensor.default,) and isinstance(node.args[1], float):
            scale = node.args[1]
        if node.op == "call_module":  # a fake quantizer (QAT) of an activation
            fq_scale = getattr(model.get_submodule(node.target), "scale", None)
            if isinstance(fq_scale, torch.Tensor) and fq_scale.numel() == 1:
                scale = float(fq_scale)
        if node.target in (torch.ops.aten.linear.default, torch.ops.aten.addmm.default):
            w = node.args[1] if node.target == torch.ops.aten.linear.default else None
            weight = w
    if scale is None or weight is None:
        return float("nan")
    w = _value(model, weight)
    if w is None:
        return float("nan")
    return scale * float(w.abs().sum(dim=1).max())


def _value(model, node):
    """The float weight behind ``node`` (dequantized when it is), or None."""
    qd = torch.ops.quantized_decomposed
    if node.op == "get_attr":
        value = model
        for part in node.target.split("."):
            value = getattr(value, part)
        return value.detach().float()
    if node.op == "call_module":  # the fake quantizer of a weight: a bound is enough
        return _value(model, node.args[0])
    if node.target in (qd.dequantize_per_channel.default, qd.dequantize_per_tensor.default):
        try:
            args = [_value(model, a) if isinstance(a, torch.fx.Node) else a for a in node.args]
            args[0] = args[0].to(
                node.args[-1] if isinstance(node.args[-1], torch.dtype) else args[0].dtype
            )
            return node.target(*args).float()
        except Exception:  # noqa: BLE001 - a bound only, nan when not computable
            return None
    return None


def fused_counts(onx, path: str) -> dict[str, int]:
    """Node types of :data:`FUSED` in the model onnxruntime optimized (saved to ``path``)."""
    import onnx

    session(onx, "all", path)
    optimized = onnx.load(path, load_external_data=False)
    counts: dict[str, int] = {}
    for node in optimized.graph.node:
        if node.op_type in FUSED:
            counts[node.op_type] = counts.get(node.op_type, 0) + 1
    return counts


def latency(onx, args, repeat: int = 7) -> float:
    """Median milliseconds of one call on one thread."""
    sess = session(onx, "all", threads=1)
    _run(sess, args)
    times = []
    for _ in range(repeat):
        begin = time.perf_counter()
        _run(sess, args)
        times.append(time.perf_counter() - begin)
    return statistics.median(times) * 1000


def run_case(name: str, size: str, flows, exporters, out: str, repeat: int, writer) -> None:
    """Every (flow, exporter) row of model ``name``."""
    import onnx

    case = make_case(name, size)
    lat_args = case.inputs(*case.sizes[2])
    fp32_ms = float("nan")
    try:
        fp32, _ = export(case.model, case, "to_onnx")
        fp32_ms = latency(fp32, lat_args, repeat)
        del fp32
    except Exception as e:  # noqa: BLE001 - a benchmark row, not a failure
        logger.warning("%s float export failed: %s", name, e)
    for flow in flows:
        if flow in SKIPPED.get(name, ()):
            continue
        try:
            qmodel = quantize(case, flow)
            step = one_step(qmodel)
        except Exception as e:  # noqa: BLE001
            for exporter in exporters:
                writer(
                    dict(
                        model=name,
                        flow=flow,
                        exporter=exporter,
                        status="quantize failed",
                        error=_first_line(e),
                    )
                )
            continue
        for exporter in exporters:
            row = dict(
                model=name,
                flow=flow,
                exporter=exporter,
                one_step=_fmt(step),
                latency_fp32_ms=_fmt(fp32_ms),
            )
            try:
                onx, seconds = export(qmodel, case, exporter)
            except Exception as e:  # noqa: BLE001
                writer(dict(row, status="export failed", error=_first_line(e)))
                continue
            row.update(
                export_s=f"{seconds:.1f}",
                nodes=len(onx.graph.node),
                size_mb=f"{onx.ByteSize() / 2**20:.1f}",
            )
            try:
                row["diff_noopt"] = _fmt(max_diff(session(onx, "none"), qmodel, case))
                row["max_abs_diff"] = _fmt(max_diff(session(onx, "all"), qmodel, case))
                tag = f"{name}-{flow}-{exporter}".replace(".", "_")
                counts = fused_counts(onx, os.path.join(out, f"{tag}.opt.onnx"))
                row["fused"] = " ".join(f"{k}:{v}" for k, v in sorted(counts.items()))
                row["latency_int8_ms"] = _fmt(latency(onx, lat_args, repeat))
                row["status"] = "ok"
            except Exception as e:  # noqa: BLE001
                row.update(status="run failed", error=_first_line(e))
            writer(row)
            del onx
            for f in os.listdir(out):
                if f.endswith(".opt.onnx"):
                    os.remove(os.path.join(out, f))
        del qmodel
    _ = onnx


def _fmt(v: float) -> str:
    return "" if v != v else f"{v:.4g}"


def _first_line(e: Exception) -> str:
    """The error's first line, followed by the first line of its root cause (the
    exporters wrap the reason in a generic error)."""
    from .report_format import head_line

    root = e
    while root.__cause__ is not None:
        root = root.__cause__
    text = f"{type(e).__name__}: {head_line(str(e))}"
    if root is not e:
        text += f" <- {type(root).__name__}: {head_line(str(root))}"
    return text.replace("\x1b[96m", "").replace("\x1b[0m", "")[:400]


def write_meta(csv_path: str, argv: list[str]) -> str:
    """The JSON next to the CSV (read by the report pages): date, commit, versions of
    the packages (torchao included), the command line."""
    import datetime
    import importlib.metadata
    import json
    import subprocess

    versions = {}
    for name in ("torch", "torchao", "transformers", "onnx", "onnxruntime", "onnxscript"):
        try:
            versions[name] = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            versions[name] = "not installed"
    here = os.path.dirname(os.path.abspath(__file__))
    try:
        commit = subprocess.run(
            ["git", "rev-parse", "HEAD"], cwd=here, capture_output=True, text=True, check=False
        ).stdout.strip()
    except OSError:
        commit = ""
    meta = dict(
        date=datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M"),
        commit=commit,
        versions=versions,
        cpu_count=os.cpu_count(),
        command="python -m experimental_experiment.bench.quantized_models " + " ".join(argv),
    )
    path = os.path.splitext(csv_path)[0] + ".json"
    with open(path, "w", encoding="utf-8") as f:
        json.dump(meta, f, indent=2)
    return path


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", required=True, help="folder of the CSV")
    parser.add_argument("--models", default=",".join(MODELS))
    parser.add_argument("--flows", default=",".join(FLOWS))
    parser.add_argument("--exporters", default=",".join(EXPORTERS))
    parser.add_argument("--size", default="real", choices=("real", "tiny"))
    parser.add_argument("--repeat", type=int, default=7, help="latency runs (median)")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.WARNING)
    os.makedirs(args.out, exist_ok=True)
    path = os.path.join(args.out, "quantized_models.csv")
    tmp = tempfile.mkdtemp(prefix="qbench")
    with open(path, "w", newline="") as f:
        out = csv.DictWriter(f, fieldnames=COLUMNS)
        out.writeheader()

        def writer(row):
            out.writerow({k: row.get(k, "") for k in COLUMNS})
            f.flush()
            logger.warning("%s", row)

        for name in args.models.split(","):
            run_case(
                name,
                args.size,
                args.flows.split(","),
                args.exporters.split(","),
                tmp,
                args.repeat,
                writer,
            )
    write_meta(path, sys.argv[1:] if argv is None else list(argv))
    sys.stdout.write(f"written {path}\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
