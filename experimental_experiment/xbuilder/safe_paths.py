"""One guard for every path the package reads or writes on the user's behalf.

A model names its external data files, a checkpoint index names its shards: such a name
must stay inside the folder the user gave (relative, no ``..``, no symbolic link leading
out), and an external-data entry's offset and length must be non-negative integers.
An output path must be a file in a folder the process can write. Every check runs
before any byte is read or written and raises a typed error naming the entry.

.. code-block:: python

    from experimental_experiment.xbuilder.safe_paths import external_entries

    for entry in external_entries(onnx.load("m.onnx", load_external_data=False), "."):
        print(entry.name, entry.path, entry.offset, entry.length)
"""

from __future__ import annotations

import ntpath
import os
import re
import tempfile
from dataclasses import dataclass

from .errors import GraphBuilderError


class ExternalDataError(GraphBuilderError, ValueError):
    """External data is missing, truncated or inconsistent with the model.

    Cause: the data file next to a model is missing or shorter than the model says, an
    offset or a length is negative or past the end of the file, or a tensor was written
    with the wrong size.

    Fix: keep the model and its data files together (locations are relative), save
    with :meth:`ModelContainer.save` or ``to_onnx(..., filename=...)``; a weight-free
    model is filled with :func:`experimental_experiment.large.fill_weights`."""


class UnsafePathError(GraphBuilderError, ValueError):
    """A path read from a file (external data location, checkpoint shard) leaves the
    folder it must stay in: absolute, with ``..``, or through a symbolic link.

    Cause: nothing is read or written outside the folder the user named; the file
    names another place (a crafted or damaged model or checkpoint index).

    Fix: rewrite the entry with a name relative to the folder (the message names the
    entry), or move the file inside the folder."""

    def __init__(self, message: str, *, path: str = "", folder: str = ""):
        super().__init__(message)
        self.path, self.folder = path, folder


class UnsafeLocationError(UnsafePathError, ExternalDataError):
    """The external data location of an initializer leaves the model's folder.

    Cause: a location is absolute, contains ``..`` or follows a link out of the folder.

    Fix: save the model again with this package (locations relative to the model), or
    move the data file next to the model and fix the location."""


class StaleDataError(ExternalDataError):
    """A data file is not the one the model was saved with (other size or checksum):
    a model and a data file from two different saves.

    Cause: the data file was replaced or damaged after the model was saved (the size or
    SHA-256 the model records differs).

    Fix: save the model and its data again together; never copy one without the
    other."""


class OutputPathError(GraphBuilderError, ValueError):
    """An output path cannot be written: a folder, a file as parent folder, a folder
    the process cannot write in.

    Cause: checked before any work: the output path is a folder, its parent is a file,
    or the folder is not writable.

    Fix: give a file path in a writable folder (``model.onnx``)."""


_SEP = re.compile(r"[\\/]")


def resolve_inside(
    folder: str,
    name: str,
    *,
    what: str,
    error: type[UnsafePathError] = UnsafePathError,
    links_out: bool = False,
) -> str:
    """The real path of ``name`` relative to ``folder``, raising ``error`` when it is
    empty, absolute, has a ``..`` part or resolves (symbolic links followed) outside
    ``folder``. ``what`` names the entry in the message (``initializer 'w'``).
    ``links_out=True`` accepts a symbolic link leading out (files only read, laid out
    by the user: the snapshots of the Hugging Face cache link to ``../../blobs``)."""
    hint = "(it must be a relative path inside that folder)"
    if not isinstance(name, str) or not name or "\x00" in name:
        raise error(f"{what}: invalid path {name!r} {hint}", path=str(name), folder=folder)
    if os.path.isabs(name) or ntpath.isabs(name) or ntpath.splitdrive(name)[0]:
        raise error(
            f"{what}: absolute path {name!r} refused, {folder!r} is the only folder "
            f"read or written {hint}",
            path=name,
            folder=folder,
        )
    if ".." in _SEP.split(name):
        raise error(
            f"{what}: path {name!r} goes up with '..' out of {folder!r} {hint}",
            path=name,
            folder=folder,
        )
    root = os.path.realpath(folder)
    full = os.path.realpath(os.path.join(root, name))
    if links_out:
        return full
    if os.path.commonpath([root, full]) != root:
        raise error(
            f"{what}: path {name!r} leads to {full!r} through a symbolic link, "
            f"outside {folder!r} {hint}",
            path=name,
            folder=folder,
        )
    return full


@dataclass(frozen=True)
class ExternalEntry:
    """An external initializer: its location, the resolved path, offset and length
    (None when the entry has none: the rest of the file)."""

    name: str
    location: str
    path: str
    offset: int
    length: int | None


def _non_negative(init_name: str, key: str, value: str) -> int:
    try:
        number = int(value)
    except ValueError:
        number = -1
    if number < 0:
        raise ExternalDataError(
            f"initializer {init_name!r}: external data {key} {value!r} "
            "is not a non-negative integer (the model file is damaged)"
        )
    return number


def external_entries(model, folder: str) -> list[ExternalEntry]:
    """Every external initializer of ``model`` (a ModelProto) with its location checked
    to stay inside ``folder``: :class:`UnsafeLocationError` or
    :class:`ExternalDataError` otherwise. Nothing is opened."""
    from onnx import TensorProto

    rows = []
    for init in model.graph.initializer:
        if init.data_location != TensorProto.EXTERNAL:
            continue
        info = {e.key: e.value for e in init.external_data}
        loc = info.get("location")
        if not loc:
            raise ExternalDataError(f"initializer {init.name!r} is external without location")
        path = resolve_inside(
            folder,
            loc,
            what=f"initializer {init.name!r}: external data location",
            error=UnsafeLocationError,
        )
        offset = _non_negative(init.name, "offset", info.get("offset", "0"))
        length = _non_negative(init.name, "length", info["length"]) if "length" in info else None
        rows.append(ExternalEntry(init.name, loc, path, offset, length))
    return rows


def _writable(folder: str) -> bool:
    """Whether a file can be created in ``folder`` (tried, not guessed: root ignores
    permissions, a read-only mount does not). The file has no name where the system
    allows it (``O_TMPFILE``): nothing is left behind."""
    try:
        with tempfile.TemporaryFile(dir=folder):
            pass
    except OSError:
        return False
    return True


def check_output_path(path: str, *, what: str = "output") -> str:
    """The absolute path of an output file, :class:`OutputPathError` when it cannot be
    written there: empty, an existing folder, a parent which is a file, a folder the
    process cannot write in. Missing parent folders are fine (they are created)."""
    if not isinstance(path, (str, os.PathLike)) or not str(path):
        raise OutputPathError(f"{what}: empty path, give a file name")
    full = os.path.abspath(os.fspath(path))
    if os.path.isdir(full):
        raise OutputPathError(
            f"{what} {str(path)!r} is a folder, give a file name "
            f"inside it (such as {os.path.join(str(path), 'model.onnx')!r})"
        )
    if os.path.lexists(full) and not os.path.isfile(full) and not os.path.islink(full):
        raise OutputPathError(f"{what} {str(path)!r} exists and is not a regular file")
    parent = os.path.dirname(full)
    while not os.path.exists(parent):
        parent = os.path.dirname(parent)
    if not os.path.isdir(parent):
        raise OutputPathError(f"{what} {str(path)!r}: {parent!r} is a file, not a folder")
    if os.path.dirname(full) == parent and not _writable(parent):
        raise OutputPathError(
            f"{what} {str(path)!r}: cannot create a file in {parent!r} "
            "(read-only folder or no permission), choose another folder"
        )
    if os.path.dirname(full) != parent and not os.access(parent, os.W_OK | os.X_OK):
        raise OutputPathError(
            f"{what} {str(path)!r}: cannot create folders in {parent!r} "
            "(read-only folder or no permission), choose another folder"
        )
    return full


__all__ = [
    "ExternalDataError",
    "ExternalEntry",
    "OutputPathError",
    "StaleDataError",
    "UnsafeLocationError",
    "UnsafePathError",
    "check_output_path",
    "external_entries",
    "resolve_inside",
]
