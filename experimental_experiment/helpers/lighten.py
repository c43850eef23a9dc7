"""Removes the weights of an ONNX model (kept aside with their statistics) and puts
them back: a light model to share or look at, the weights in a ``.npz`` file."""

from __future__ import annotations

import json

import numpy as np
import onnx
from onnx import numpy_helper

STATS_KEY = "lightened"  # the initializer's doc_string starts with it


def _stats(array: np.ndarray) -> dict:
    stats = {"dtype": str(array.dtype), "shape": list(array.shape)}
    if array.size and array.dtype.kind in "biuf":
        f = array.astype(np.float64)
        stats.update(min=float(f.min()), max=float(f.max()), mean=float(f.mean()),
                     std=float(f.std()))
    return stats


def lighten_model(model: onnx.ModelProto, threshold: int = 128,
                  ) -> tuple[onnx.ModelProto, dict[str, np.ndarray]]:
    """Returns a copy of ``model`` whose initializers of more than ``threshold``
    elements have no data (dims, type and statistics kept in their ``doc_string``),
    and the removed arrays by name.

    .. code-block:: python

        light, weights = lighten_model(onnx.load("model.onnx"))
        model = unlighten_model(light, weights)  # the same model again
    """
    light = onnx.ModelProto()
    light.CopyFrom(model)
    removed = {}
    for init in light.graph.initializer:
        if init.data_location == onnx.TensorProto.EXTERNAL:
            continue  # external data stays where it is
        size = int(np.prod(init.dims)) if init.dims else 1
        if size <= threshold:
            continue
        array = numpy_helper.to_array(init)
        removed[init.name] = array
        stats = json.dumps(_stats(array), sort_keys=True)
        for field in ("raw_data", "float_data", "int32_data", "int64_data", "double_data",
                      "uint64_data", "string_data"):
            init.ClearField(field)
        init.doc_string = f"{STATS_KEY} {stats}"
    return light, removed


def lightened_names(model: onnx.ModelProto) -> list[str]:
    """Initializers whose data :func:`lighten_model` removed."""
    return [i.name for i in model.graph.initializer if i.doc_string.startswith(STATS_KEY)]


def unlighten_model(light: onnx.ModelProto, weights: dict[str, np.ndarray] | None = None,
                    *, seed: int = 0) -> onnx.ModelProto:
    """Puts the weights back; with ``weights=None``, random values drawn with the
    recorded mean and standard deviation (a runnable model, not the original one).
    Raises ValueError when a weight is missing or its shape or type differs."""
    model = onnx.ModelProto()
    model.CopyFrom(light)
    rng = np.random.default_rng(seed)
    for k, init in enumerate(model.graph.initializer):
        if not init.doc_string.startswith(STATS_KEY):
            continue
        stats = json.loads(init.doc_string[len(STATS_KEY):])
        if weights is None:
            array = _random(stats, rng)
        elif init.name not in weights:
            raise ValueError(f"no weight for initializer {init.name!r}")
        else:
            array = np.asarray(weights[init.name])
            if list(array.shape) != stats["shape"] or str(array.dtype) != stats["dtype"]:
                raise ValueError(
                    f"weight {init.name!r} is {array.dtype} {list(array.shape)}, the model "
                    f"expects {stats['dtype']} {stats['shape']}")
        model.graph.initializer[k].CopyFrom(numpy_helper.from_array(array, init.name))
    return model


def _random(stats: dict, rng) -> np.ndarray:
    shape, dtype = stats["shape"], np.dtype(stats["dtype"])
    if dtype.kind == "f":
        values = rng.normal(stats.get("mean", 0.0), stats.get("std", 1.0), size=shape)
    else:
        low, high = int(stats.get("min", 0)), int(stats.get("max", 1))
        values = rng.integers(low, high + 1, size=shape)
    return values.astype(dtype)
