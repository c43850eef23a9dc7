"""What every command line module shares: the one-line error, the model loader and saver
(imported by ``_command_lines`` and ``_command_lines_investigate``, imports neither)."""

from __future__ import annotations

import os


class CommandLineError(Exception):
    """An error the command line reports in one line, without a traceback.

    Cause: a file given on the command line is missing or is not an ONNX model, or an
    argument is invalid; the command prints ``<command>: <message>`` and exits with 2.

    Fix: check the path and the argument the message names
    (``python -m experimental_experiment <command> --help``, :ref:`l-command-lines`)."""


def load_model(path: str, load_external_data: bool = True):
    """Loads an ONNX model, :class:`CommandLineError` when it is missing or invalid."""
    import onnx

    if not os.path.isfile(path):
        raise CommandLineError(f"no file {path!r}")
    try:
        return onnx.load(path, load_external_data=load_external_data)
    except Exception as e:  # protobuf raises its own DecodeError
        raise CommandLineError(f"{path!r} is not an ONNX model ({type(e).__name__}: {e})") from e


def save_model(model, path: str) -> None:
    """Saves an ONNX model to ``path`` atomically; models over 2 GB store their
    weights in ``<path>.data`` (see
    :func:`experimental_experiment.xbuilder.model_container.save_model`)."""
    from .xbuilder.model_container import save_model as _save

    _save(model, path)
