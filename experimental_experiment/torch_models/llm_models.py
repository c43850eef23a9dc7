"""Exports tiny transformers models with and without a cache, with :func:`to_onnx` and
:func:`torch.onnx.export`, checks them with onnxruntime on a second shape, and writes
a table (``python -m experimental_experiment models`` or ``main(argv)``).
"""

from __future__ import annotations

import argparse
import copy
import csv
import os
import time
from typing import Any

import numpy as np
import torch

from .llm_helper import TINY_ARCHITECTURES, get_tiny_llm
from .onnx_outputs import user_outputs

#: sizes used for the export and for the check (the check uses other sizes)
EXPORT_SIZES = dict(batch=2, seq=3, past=5)
CHECK_SIZES = dict(batch=3, seq=4, past=7)


def _flat_tensors(value) -> list[torch.Tensor]:
    """Tensors of a (registered) pytree in torch.export's order."""
    return [t for t in torch.utils._pytree.tree_leaves(value) if isinstance(t, torch.Tensor)]


def ort_feeds(sess, inputs: dict) -> dict[str, np.ndarray]:
    """Feeds for an ONNX model exported from ``inputs``: flattened tensors in order."""
    tensors = _flat_tensors(inputs)
    names = [i.name for i in sess.get_inputs()]
    if len(names) != len(tensors):
        raise ValueError(f"{len(names)} ONNX inputs {names} for {len(tensors)} tensors")
    return {n: t.detach().cpu().numpy() for n, t in zip(names, tensors)}


def _to_torch_dynamic_shapes(ds):
    """Strings (dim names) to ``Dim.DYNAMIC`` for torch.export and torch.onnx.export."""
    if isinstance(ds, dict):
        return {
            k: (torch.export.Dim.DYNAMIC if isinstance(v, str) else _to_torch_dynamic_shapes(v))
            for k, v in ds.items()
        }
    if isinstance(ds, (list, tuple)):
        return type(ds)(_to_torch_dynamic_shapes(v) for v in ds)
    return ds


def export_model(model, inputs: dict, dynamic_shapes, exporter: str, *, optimize: bool = True):
    """Exports with ``exporter`` in ``to_onnx`` or ``torch.onnx.export``
    inside ``bypass_export_some_errors(patch_transformers=True)``."""
    from ..torch_interpreter import to_onnx
    from ..torch_interpreter.onnx_export_errors import bypass_export_some_errors

    with torch.no_grad(), bypass_export_some_errors(patch_transformers=True) as modificator:
        inputs = modificator(inputs)
        if exporter == "to_onnx":
            return to_onnx(model, (), inputs, dynamic_shapes=dynamic_shapes, optimize=optimize)
        if exporter == "torch.onnx.export":
            prog = torch.onnx.export(
                model,
                (),
                kwargs=inputs,
                dynamic_shapes=_to_torch_dynamic_shapes(dynamic_shapes),
                dynamo=True,
                verbose=False,
            )
            return prog.model_proto
        raise ValueError(f"unknown exporter {exporter!r}")


def eager_outputs(model, inputs: dict) -> list[torch.Tensor]:
    """Runs the model without any patch (on a copy of the inputs), returns the flattened
    outputs (caches flattened as keys then values)."""
    from ..torch_interpreter.patches.cache_registration import register_cache_classes

    with torch.no_grad():
        outputs = model(**copy.deepcopy(inputs))
    with register_cache_classes():
        return _flat_tensors(outputs)


def compare_outputs(expected: list[torch.Tensor], got: list[np.ndarray]) -> float:
    """Max absolute difference, raises AssertionError if shapes or counts differ."""
    if len(got) != len(expected):
        raise AssertionError(f"{len(got)} ONNX outputs, {len(expected)} eager outputs")
    diff = 0.0
    for i, (e, g) in enumerate(zip(expected, got)):
        e = e.detach().numpy()
        if e.shape != g.shape:
            raise AssertionError(f"output {i}: shape {g.shape} != eager {e.shape}")
        diff = max(diff, float(np.abs(e.astype(np.float64) - g).max()) if e.size else 0.0)
    return diff


def check_onnx(model, onx, inputs: dict, *, atol: float = 1e-4) -> float:
    """Runs ``onx`` with onnxruntime on ``inputs``, returns the max absolute difference
    with eager (run without any patch) over the outputs the model returns
    (:func:`user_outputs`), raises AssertionError above ``atol``."""
    import onnxruntime

    from ..torch_interpreter.patches.cache_registration import register_cache_classes

    sess = onnxruntime.InferenceSession(onx.SerializeToString(), providers=["CPUExecutionProvider"])
    with register_cache_classes():
        feeds = ort_feeds(sess, inputs)
    diff = compare_outputs(eager_outputs(model, inputs), user_outputs(sess, sess.run(None, feeds)))
    if diff > atol:
        raise AssertionError(f"max absolute difference {diff} > {atol}")
    return diff


def run_one(
    arch: str,
    with_cache: bool,
    exporter: str = "to_onnx",
    atol: float = 1e-4,
    optimize: bool = True,
) -> dict[str, Any]:
    """Exports one model and checks it on a second shape; never raises, returns a row."""
    row: dict[str, Any] = dict(model=arch, cache=int(with_cache), exporter=exporter)
    try:
        data = get_tiny_llm(arch, with_cache=with_cache, **EXPORT_SIZES)
        other = get_tiny_llm(arch, with_cache=with_cache, seed=1, **CHECK_SIZES)
        begin = time.perf_counter()
        onx = export_model(
            data["model"],
            copy.deepcopy(data["inputs"]),
            data["dynamic_shapes"],
            exporter,
            optimize=optimize,
        )
        row["export_time"] = round(time.perf_counter() - begin, 3)
        row["max_abs_diff"] = check_onnx(data["model"], onx, other["inputs"], atol=atol)
        row["status"] = "pass"
        if with_cache and TINY_ARCHITECTURES[arch] == "decoder":
            row["decoding"] = _decoding(data["model"], onx)
    except Exception as e:  # the table records the failure
        row["status"] = "fail"
        row["error"] = (
            f"{type(e).__name__}: {str(e).strip().splitlines()[0][:150]}"
            if str(e).strip()
            else type(e).__name__
        )
    return row


def _decoding(model, onx, steps: int = 8) -> str:
    """Greedy decoding for ``steps`` steps, the ONNX model feeding its own cache back."""
    from .decoding_check import check_greedy_decoding

    input_ids = torch.randint(0, 1000, (2, 5), generator=torch.Generator().manual_seed(3))
    try:
        report = check_greedy_decoding(model, onx, input_ids, steps=steps)
    except Exception as e:
        return f"fail: {type(e).__name__}"
    if report["ok"]:
        return f"ok ({steps} steps)"
    return f"mismatch at step {report['first_token_mismatch']}, diff {report['max_abs_diff']:.2g}"


def _parse(argv):
    parser = argparse.ArgumentParser(
        prog="models", description="exports tiny transformers models, writes a CSV table"
    )
    parser.add_argument(
        "--models", default=",".join(TINY_ARCHITECTURES), help="comma separated architectures"
    )
    parser.add_argument("--exporters", default="to_onnx,torch.onnx.export")
    parser.add_argument("--output", default=os.path.join("_doc", "bench", "llm_models.csv"))
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    """Writes the table model x cache x exporter; returns 0."""
    args = _parse(argv)
    rows = []
    for arch in args.models.split(","):
        caches = (
            [False, True] if TINY_ARCHITECTURES[arch] in ("decoder", "encoder-decoder") else [False]
        )
        for with_cache in caches:
            for exporter in args.exporters.split(","):
                rows.append(run_one(arch, with_cache, exporter))
    fields = [
        "model",
        "cache",
        "exporter",
        "status",
        "max_abs_diff",
        "export_time",
        "decoding",
        "error",
    ]
    os.makedirs(os.path.dirname(os.path.abspath(args.output)), exist_ok=True)
    with open(args.output, "w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=fields)
        writer.writeheader()
        for row in rows:
            writer.writerow({k: row.get(k, "") for k in fields})
    return 0
