"""Writes the bytes of large initializers into a TensorProto with one copy into fresh
memory instead of two.

Assigning ``proto.raw_data = array.tobytes()`` copies the array twice: into a new
``bytes`` object, then into the message's arena (protobuf's upb runtime accepts only
``bytes`` there). A ``bytes`` object above glibc's mmap threshold (at most 32 MiB) is fresh
memory, paid in page faults, and each page fault costs about as much as copying the page
several times. Here the field is parsed instead, ``proto.MergeFromString`` from a reused
numpy buffer holding the field's header and the bytes: numpy maps large buffers on huge
pages, so the only fresh memory left is the arena's copy, which the ModelProto keeps.
The message is the same: upb serializes fields in field-number order, whatever the order
they were set in.
"""

from __future__ import annotations

import sys

import numpy as np
from onnx import TensorProto, numpy_helper

#: field number of TensorProto.raw_data, wire type 2 (length-delimited)
_RAW_DATA_TAG = bytes([TensorProto.RAW_DATA_FIELD_NUMBER << 3 | 2])
#: below this many bytes, the ``bytes`` object comes from memory glibc reuses
_LARGE = 1 << 20


def _varint(n: int) -> bytes:
    out = bytearray()
    while n >= 0x80:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


class RawDataWriter:
    """Fills TensorProtos with their name, type, shape and raw bytes, reusing one buffer
    (as large as the largest array written) for the large ones."""

    def __init__(self):
        self._buffer = np.empty((0,), dtype=np.uint8)

    def fill(self, proto: TensorProto, name: str, elem_type: int, array: np.ndarray) -> None:
        """Writes ``array`` (C-contiguous, of a numpy type stored as raw bytes) into
        ``proto``, an element just added to the graph."""
        proto.dims.extend(array.shape)
        if name:
            proto.name = name
        proto.data_type = elem_type
        if array.nbytes < _LARGE or sys.byteorder != "little" or array.dtype.byteorder == ">":
            proto.raw_data = numpy_helper.tobytes_little_endian(array)
            return
        header = _RAW_DATA_TAG + _varint(array.nbytes)
        size = len(header) + array.nbytes
        if self._buffer.size < size:
            self._buffer = np.empty((size,), dtype=np.uint8)
        self._buffer[: len(header)] = np.frombuffer(header, dtype=np.uint8)
        self._buffer[len(header) : size] = array.reshape(-1).view(np.uint8)
        proto.MergeFromString(memoryview(self._buffer)[:size])
