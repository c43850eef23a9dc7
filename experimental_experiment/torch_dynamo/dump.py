"""Where backends save the ONNX models they build (dump_onnx, ONNXRT_DUMP_PATH)."""

from __future__ import annotations

import os

import onnx
import torch

_STATE = {"prefix": None, "count": 0}


def set_prefix(prefix: str | None) -> str | None:
    """Sets the dump prefix (None stops dumping); returns the previous one."""
    previous = _STATE["prefix"]
    _STATE["prefix"] = prefix
    _STATE["count"] = 0
    return previous


def current_prefix() -> str | None:
    return _STATE["prefix"] or os.environ.get("ONNXRT_DUMP_PATH") or None


def save(onx: onnx.ModelProto, graph_module: torch.fx.GraphModule | None = None) -> str | None:
    """Saves ``<prefix><n>.onnx`` and ``<prefix><n>.txt`` (the FX graph) when dumping."""
    prefix = current_prefix()
    if not prefix:
        return None
    folder = os.path.dirname(prefix)
    if folder:
        os.makedirs(folder, exist_ok=True)
    n = _STATE["count"]
    while os.path.exists(f"{prefix}{n}.onnx"):
        n += 1
    _STATE["count"] = n + 1
    from ..xbuilder.model_container import save_model

    save_model(onx, f"{prefix}{n}.onnx")
    if graph_module is not None:
        with open(f"{prefix}{n}.txt", "w", encoding="utf-8") as f:
            f.write(str(graph_module.graph))
    return f"{prefix}{n}.onnx"
