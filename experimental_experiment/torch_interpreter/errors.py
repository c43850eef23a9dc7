"""Typed errors raised by the exporter."""

from __future__ import annotations


class ExportError(RuntimeError):
    """Base class of every error raised by :func:`to_onnx`."""


class InvalidArgumentError(ExportError, TypeError):
    """An argument given to :func:`to_onnx` has the wrong type or structure."""


class CaptureError(ExportError):
    """torch.export.export failed to capture the model."""


class UnsupportedOpError(ExportError):
    """An FX node calls an operator with no converter."""


class ConversionError(ExportError):
    """A converter failed or produced a result inconsistent with the FX graph."""


def user_source_line(node) -> str:
    """The last frame of the node's stack trace outside torch's own modules
    (``nn.Conv2d.forward`` is not the user's line): the user's line that created it."""
    trace = node.meta.get("stack_trace") if node is not None else None
    if not trace:
        return "<unknown source line>"
    lines = [line.strip() for line in trace.strip().splitlines() if line.strip()]
    frames = [i for i, line in enumerate(lines) if line.startswith("File ")]
    if not frames:
        return lines[-1]
    torch_dir = _torch_dir()
    outside = [i for i in frames if torch_dir not in lines[i]]
    last = (outside or frames)[-1]
    code = lines[last + 1] if last + 1 < len(lines) else ""
    return f"{lines[last]}\n    {code}".rstrip()


def _torch_dir() -> str:
    """Folder of the torch package, as written in stack traces."""
    import os

    import torch

    return os.path.dirname(torch.__file__) + os.sep
