"""Checks a checkpoint file before a library reads it: a ``.safetensors`` header is read
and checked against the file size (header length, every tensor's ``data_offsets``, its
shape and dtype), so that a truncated or forged file raises :class:`CheckpointError`
naming the file and the tensor, before any large allocation.

.. code-block:: python

    from experimental_experiment.large.checkpoint_checks import check_safetensors

    header = check_safetensors("model.safetensors")  # name -> dtype, shape, offsets
"""

from __future__ import annotations

import json
import math
import os
import struct

from ..torch_interpreter.errors import InvalidArgumentError

# the largest header the safetensors library itself accepts
MAX_HEADER = 100_000_000

_ITEMSIZE = {
    "F64": 8,
    "F32": 4,
    "F16": 2,
    "BF16": 2,
    "I64": 8,
    "I32": 4,
    "I16": 2,
    "I8": 1,
    "U64": 8,
    "U32": 4,
    "U16": 2,
    "U8": 1,
    "BOOL": 1,
    "F8_E4M3": 1,
    "F8_E5M2": 1,
    "C64": 8,
}


class CheckpointError(InvalidArgumentError):
    """A checkpoint file is truncated, damaged or inconsistent (header larger than the
    file, tensor data past its end, a size not matching the shape).

    Cause: the file was cut during a download or a copy, or is not the format its
    extension says; checked before anything large is read or allocated.

    Fix: download or save the checkpoint again; the message names the file and the
    tensor."""

    def __init__(self, message: str, *, path: str = "", tensor: str = ""):
        super().__init__(message)
        self.path, self.tensor = path, tensor


def _fail(path: str, what: str, tensor: str = "") -> CheckpointError:
    where = f"tensor {tensor!r} of " if tensor else ""
    return CheckpointError(
        f"checkpoint {path!r}: {where}{what} (the file is truncated or "
        "damaged, download or save it again)",
        path=path,
        tensor=tensor,
    )


def _header(path: str) -> tuple[dict, int]:
    """The parsed JSON header and the number of data bytes after it."""
    size = os.path.getsize(path)
    with open(path, "rb") as f:
        head = f.read(8)
        if len(head) < 8:
            raise _fail(path, f"{size} bytes, too short for a safetensors header")
        (length,) = struct.unpack("<Q", head)
        if length > size - 8:
            raise _fail(path, f"header length {length} exceeds the file size {size}")
        if length > MAX_HEADER:
            raise _fail(path, f"header length {length} over the limit {MAX_HEADER}")
        raw = f.read(length)
    try:
        header = json.loads(raw)
    except (ValueError, UnicodeDecodeError) as e:
        raise _fail(path, f"header is not valid JSON ({e})") from None
    if not isinstance(header, dict):
        raise _fail(path, "header is not a JSON object")
    return header, size - 8 - length


def _check_entry(path: str, name: str, entry, available: int) -> None:
    if not isinstance(entry, dict):
        raise _fail(path, "header entry is not an object", name)
    dtype, shape, offsets = entry.get("dtype"), entry.get("shape"), entry.get("data_offsets")
    if dtype not in _ITEMSIZE:
        raise _fail(path, f"unknown dtype {dtype!r}", name)
    if not isinstance(shape, list) or not all(
        isinstance(d, int) and not isinstance(d, bool) and d >= 0 for d in shape
    ):
        raise _fail(path, f"shape {shape!r} is not a list of non-negative integers", name)
    if (
        not isinstance(offsets, list)
        or len(offsets) != 2
        or not all(isinstance(o, int) and not isinstance(o, bool) for o in offsets)
        or not 0 <= offsets[0] <= offsets[1]
    ):
        raise _fail(path, f"data_offsets {offsets!r} are not two increasing integers", name)
    if offsets[1] > available:
        raise _fail(
            path, f"data_offsets {offsets} end past the {available} data bytes of the file", name
        )
    expected = math.prod(shape) * _ITEMSIZE[dtype]
    if offsets[1] - offsets[0] != expected:
        raise _fail(
            path,
            f"{dtype} {shape} needs {expected} bytes, data_offsets "
            f"{offsets} hold {offsets[1] - offsets[0]}",
            name,
        )


def check_safetensors(path: str) -> dict:
    """The header of a ``.safetensors`` file (``__metadata__`` removed) after checking
    it against the file: :class:`CheckpointError` otherwise. Reads the header only."""
    header, available = _header(path)
    header.pop("__metadata__", None)
    for name, entry in header.items():
        _check_entry(path, name, entry, available)
    return header


__all__ = ["CheckpointError", "check_safetensors"]
