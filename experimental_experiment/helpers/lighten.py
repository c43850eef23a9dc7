"""Removes the weights of an ONNX model (kept aside with their statistics) and puts
them back: a light model to share or look at, the weights in a ``.npz`` file."""

from __future__ import annotations

import json
import math
import os
import zipfile

import numpy as np
import onnx
from onnx import numpy_helper

from ..errors import ExportError

STATS_KEY = "lightened"  # the initializer's doc_string starts with it


class LightenError(ExportError, ValueError):
    """A light model or its weights file is inconsistent: a missing weight, a recorded
    shape or dtype that is not valid or does not match, an array larger than the data
    that holds it. The message names the initializer.

    Cause: the light model, its recorded statistics or its weights file were modified
    or come from different runs; checked before allocating.

    Fix: lighten the original model again, or give the weights file saved with it."""


def _stats(array: np.ndarray) -> dict:
    stats = {"dtype": str(array.dtype), "shape": list(array.shape)}
    if array.size and array.dtype.kind in "biuf":
        f = array.astype(np.float64)
        stats.update(
            min=float(f.min()), max=float(f.max()), mean=float(f.mean()), std=float(f.std())
        )
    return stats


def lighten_model(
    model: onnx.ModelProto,
    threshold: int = 128,
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
        for field in (
            "raw_data",
            "float_data",
            "int32_data",
            "int64_data",
            "double_data",
            "uint64_data",
            "string_data",
        ):
            init.ClearField(field)
        init.doc_string = f"{STATS_KEY} {stats}"
    return light, removed


def lightened_names(model: onnx.ModelProto) -> list[str]:
    """Initializers whose data :func:`lighten_model` removed."""
    return [i.name for i in model.graph.initializer if i.doc_string.startswith(STATS_KEY)]


def unlighten_model(
    light: onnx.ModelProto,
    weights: dict[str, np.ndarray] | None = None,
    *,
    seed: int = 0,
    max_bytes: int | None = None,
) -> onnx.ModelProto:
    """Puts the weights back; with ``weights=None``, random values drawn with the
    recorded mean and standard deviation (a runnable model, not the original one).
    Raises :class:`LightenError` (a ValueError) when a weight is missing or its shape or
    type differs, when a recorded shape or dtype is invalid or disagrees with the
    initializer, or when the random weights would exceed ``max_bytes`` (default: the
    physical memory), all checked before anything is allocated."""
    model = onnx.ModelProto()
    model.CopyFrom(light)
    rng = np.random.default_rng(seed)
    budget = _physical_memory() if max_bytes is None else max_bytes
    for k, init in enumerate(model.graph.initializer):
        if not init.doc_string.startswith(STATS_KEY):
            continue
        stats, nbytes = _recorded(init)
        if weights is None:
            if nbytes > budget:
                raise LightenError(
                    f"initializer {init.name!r}: recorded {stats['dtype']} {stats['shape']} "
                    f"needs {nbytes:,} bytes, more than the {budget:,} bytes left "
                    "(max_bytes), the light model is damaged or too large for --random"
                )
            budget -= nbytes
            array = _random(stats, rng)
        elif init.name not in weights:
            raise LightenError(f"no weight for initializer {init.name!r}")
        else:
            array = np.asarray(weights[init.name])
            if list(array.shape) != stats["shape"] or str(array.dtype) != stats["dtype"]:
                raise LightenError(
                    f"weight {init.name!r} is {array.dtype} {list(array.shape)}, the model "
                    f"expects {stats['dtype']} {stats['shape']}"
                )
        model.graph.initializer[k].CopyFrom(numpy_helper.from_array(array, init.name))
    return model


def _physical_memory() -> int:
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):  # not on Linux or macOS
        return 2**34


def _recorded(init: onnx.TensorProto) -> tuple[dict, int]:
    """The statistics lighten recorded in the doc_string, checked (a JSON object, a
    known dtype, the shape of the initializer), and the number of bytes they describe."""
    try:
        stats = json.loads(init.doc_string[len(STATS_KEY) :])
        shape, recorded = stats["shape"], stats["dtype"]
        dtype = onnx.helper.tensor_dtype_to_np_dtype(init.data_type)
    except (ValueError, TypeError, KeyError) as e:
        raise LightenError(
            f"initializer {init.name!r}: the statistics lighten recorded are "
            f"damaged ({type(e).__name__}: {e})"
        ) from None
    if (
        not isinstance(shape, list)
        or shape != list(init.dims)
        or any(not isinstance(d, int) or d < 0 for d in shape)
    ):
        raise LightenError(
            f"initializer {init.name!r}: recorded shape {shape!r} differs "
            f"from its dims {list(init.dims)}, the light model is damaged"
        )
    if str(dtype) != recorded:
        raise LightenError(
            f"initializer {init.name!r}: recorded dtype {recorded!r} differs "
            f"from its type {dtype}, the light model is damaged"
        )
    return stats, math.prod(shape) * dtype.itemsize


def _npy_header(f, where: str) -> tuple[tuple, bool, np.dtype]:
    try:
        version = np.lib.format.read_magic(f)
        read = (
            np.lib.format.read_array_header_1_0
            if version == (1, 0)
            else np.lib.format.read_array_header_2_0
        )
        shape, fortran, dtype = read(f)
    except (ValueError, OSError, EOFError, zipfile.BadZipFile) as e:
        raise LightenError(f"{where}: not a .npy array ({e})") from None
    if dtype.hasobject:
        raise LightenError(f"{where}: holds Python objects, refused")
    return shape, fortran, dtype


def load_weights(path: str) -> dict[str, np.ndarray]:
    """The arrays of a ``.npz`` file written by lighten, each one's header checked
    against the bytes the file holds before the array is built:
    :class:`LightenError` naming the array for a truncated or forged file."""
    try:
        archive = zipfile.ZipFile(path)
    except (OSError, zipfile.BadZipFile) as e:
        raise LightenError(f"weights {path!r} is not a .npz file ({e})") from None
    arrays = {}
    with archive:
        for info in archive.infolist():
            name = info.filename[:-4] if info.filename.endswith(".npy") else info.filename
            where = f"weights {path!r}, array {name!r}"
            try:
                with archive.open(info) as f:
                    shape, fortran, dtype = _npy_header(f, where)
                    expected = math.prod(shape) * dtype.itemsize
                    available = info.file_size - f.tell()  # recorded size less header
                    if expected != available:
                        raise LightenError(
                            f"{where}: {dtype} {list(shape)} needs "
                            f"{expected:,} bytes, the file holds "
                            f"{available:,} (truncated or forged)"
                        )
                    data = f.read(expected)  # what is there, not what the header says
            except (OSError, EOFError, zipfile.BadZipFile) as e:
                raise LightenError(f"{where}: cannot be read ({e})") from None
            if len(data) != expected:
                raise LightenError(
                    f"{where}: {len(data):,} bytes, {expected:,} expected (the file is truncated)"
                )
            flat = np.frombuffer(data, dtype=dtype)
            arrays[name] = flat.reshape(shape[::-1]).T if fortran else flat.reshape(shape)
    return arrays


def _random(stats: dict, rng) -> np.ndarray:
    shape, dtype = stats["shape"], np.dtype(stats["dtype"])
    if dtype.kind == "f":
        values = rng.normal(stats.get("mean", 0.0), stats.get("std", 1.0), size=shape)
    else:
        low, high = int(stats.get("min", 0)), int(stats.get("max", 1))
        values = rng.integers(low, high + 1, size=shape)
    return values.astype(dtype)
