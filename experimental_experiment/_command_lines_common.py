"""What every command line module shares: the one-line error, the model loader and saver
(imported by ``_command_lines`` and ``_command_lines_investigate``, imports neither)."""

from __future__ import annotations

import argparse
import os


class CommandLineError(Exception):
    """An error the command line reports in one line, without a traceback.

    Cause: a file given on the command line is missing or is not an ONNX model, or an
    argument is invalid; the command prints ``<command>: <message>`` and exits with 2.

    Fix: check the path and the argument the message names
    (``python -m experimental_experiment <command> --help``, :ref:`l-command-lines`)."""


def add_progress(parser: argparse.ArgumentParser, quiet: bool = False) -> None:
    """Adds ``--progress/--no-progress`` (default on: a bar on stderr when it is a
    terminal, none when it is redirected); ``quiet`` adds ``--quiet`` too, the older
    spelling of ``--no-progress``."""
    parser.add_argument(
        "--progress",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="a progress bar on stderr, the step in progress and its count (default: "
        "on, none when stderr is not a terminal)",
    )
    if quiet:
        parser.add_argument("--quiet", action="store_true", help="same as --no-progress")


def wants_progress(ns: argparse.Namespace) -> bool:
    """What ``--progress``, ``--no-progress`` and ``--quiet`` asked."""
    return bool(ns.progress) and not getattr(ns, "quiet", False)


def check_model_file(path: str) -> None:
    """:class:`CommandLineError` when ``path`` cannot be an ONNX file: missing, a
    folder, empty."""
    if os.path.isdir(path):
        raise CommandLineError(f"{path!r} is a folder, give an ONNX file")
    if not os.path.isfile(path):
        raise CommandLineError(f"no file {path!r}")
    if os.path.getsize(path) == 0:
        raise CommandLineError(f"{path!r} is empty, not an ONNX model")


def check_model_proto(model, path: str) -> None:
    """:class:`CommandLineError` when the parsed ``model`` lacks what every ONNX model
    has: protobuf parses a truncated file cut between two fields, or some other file,
    into a partial model without error."""
    missing = [
        what
        for what, ok in (
            ("ir_version", model.ir_version > 0),
            ("graph", model.HasField("graph")),
            ("opset_import", len(model.opset_import) > 0),
        )
        if not ok
    ]
    if missing:
        raise CommandLineError(
            f"{path!r} is not an ONNX model or is truncated (no {', no '.join(missing)})"
        )


def load_model(path: str, load_external_data: bool = True):
    """Loads an ONNX model, :class:`CommandLineError` when it is missing, a folder,
    empty, invalid or truncated, or when its external data leaves its folder, is
    truncated or belongs to another save (checked before any data file is opened, see
    :mod:`experimental_experiment.xbuilder.safe_paths`)."""
    from .xbuilder.model_container import load_model as _load
    from .xbuilder.safe_paths import ExternalDataError

    check_model_file(path)
    try:
        model = _load(path, load_external_data=load_external_data)
    except ExternalDataError as e:
        raise CommandLineError(f"{path!r}: {e}") from e
    except Exception as e:  # protobuf raises its own DecodeError
        raise CommandLineError(f"{path!r} is not an ONNX model ({type(e).__name__}: {e})") from e
    check_model_proto(model, path)
    return model


def check_output(path: str | None, what: str = "output") -> None:
    """:class:`CommandLineError` when ``path`` cannot be written (a folder, a read-only
    folder, a file as parent), before the command does any work."""
    from .xbuilder.safe_paths import OutputPathError, check_output_path

    if path is None:
        return
    try:
        check_output_path(path, what=what)
    except OutputPathError as e:
        raise CommandLineError(str(e)) from e


def save_model(model, path: str) -> None:
    """Saves an ONNX model to ``path`` atomically; models over 2 GB store their
    weights in ``<path>.data`` (see
    :func:`experimental_experiment.xbuilder.model_container.save_model`)."""
    from .xbuilder.model_container import save_model as _save

    _save(model, path)
