"""The package folder appears whole or not at all: everything is written into a
temporary folder next to it, renamed at the end, removed on failure."""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile

from .errors import OutputFolderError


def check_out_dir(out_dir: str, overwrite: bool) -> str:
    """The absolute path of ``out_dir``; :class:`OutputFolderError` when it is a file,
    or a folder which is not empty (unless ``overwrite``)."""
    full = os.path.abspath(os.fspath(out_dir))
    if os.path.lexists(full) and not os.path.isdir(full):
        raise OutputFolderError(
            f"output {str(out_dir)!r} exists and is not a folder; choose a folder name"
        )
    if os.path.isdir(full) and os.listdir(full) and not overwrite:
        raise OutputFolderError(
            f"output folder {str(out_dir)!r} is not empty ({len(os.listdir(full))} "
            "entries); choose another folder or pass overwrite=True (--overwrite)"
        )
    parent = os.path.dirname(full)
    while not os.path.exists(parent):  # created by staged_folder, not here
        parent = os.path.dirname(parent)
    if not os.path.isdir(parent) or not os.access(parent, os.W_OK | os.X_OK):
        raise OutputFolderError(
            f"cannot create a folder in {parent!r} (not a folder or "
            "no permission); choose another output folder"
        )
    return full


@contextlib.contextmanager
def staged_folder(out_dir: str):
    """Yields a temporary folder next to ``out_dir``; renamed ``out_dir`` when the block
    ends without error (an existing ``out_dir`` is replaced), removed otherwise."""
    parent, base = os.path.split(out_dir)
    os.makedirs(parent, exist_ok=True)
    tmp = tempfile.mkdtemp(prefix=f".{base}.tmp-", dir=parent)
    try:
        yield tmp
        os.chmod(tmp, 0o777 & ~_umask())
        if os.path.isdir(out_dir):
            trash = tempfile.mkdtemp(prefix=f".{base}.old-", dir=parent)
            os.rename(out_dir, os.path.join(trash, base))
            os.rename(tmp, out_dir)
            shutil.rmtree(trash, ignore_errors=True)
        else:
            os.rename(tmp, out_dir)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


__all__ = ["check_out_dir", "staged_folder"]
