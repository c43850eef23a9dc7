"""Saves a model and its external data files as one.

The data goes to files named after their content (``model.onnx.<hash>.data``), the
model is renamed last, then the data files of the model it replaced are removed:
whatever the moment a save stops, the model on disk reads the data it was saved with
(the previous pair or the new one). Saves to one path are serialized by a lock file.
The model records the size and SHA-256 of every data file (metadata
``experimental_experiment.external_data``) so that a data file from another save is
detected (:func:`check_recorded_data`).

.. code-block:: python

    with PairedSave("model.onnx") as save:
        f = save.data_file(0)
        f.write(weight_bytes)
        save.commit(model, [(proto, 0, 0, len(weight_bytes))], unfilled=set())
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import os
import re
import tempfile
import time

from .safe_paths import (
    OutputPathError,
    StaleDataError,
    check_output_path,
    external_entries,
)

logger = logging.getLogger(__name__)

#: metadata key of the size and checksum of every data file
DATA_KEY = "experimental_experiment.external_data"
_CHUNK = 1 << 24
_LOCK_TIMEOUT = 600.0


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def _fsync_folder(folder: str) -> None:
    if os.name != "posix":
        return
    fd = os.open(folder, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


@contextlib.contextmanager
def path_lock(path: str):
    """Holds ``.<name>.lock`` next to ``path`` while the block runs: a second save to
    the same path (thread or process) waits. The lock file is removed afterwards."""
    folder, name = os.path.split(os.path.abspath(path))
    lock = os.path.join(folder, f".{name}.lock")
    try:
        import fcntl
    except ImportError:  # no flock: exclusive creation, polled
        fcntl = None
    fd, start = None, time.monotonic()
    while fd is None:
        if fcntl is None:
            try:
                fd = os.open(lock, os.O_CREAT | os.O_EXCL | os.O_RDWR, 0o666)
            except FileExistsError:
                if time.monotonic() - start > _LOCK_TIMEOUT:
                    raise OutputPathError(
                        f"{path!r} is being saved by another process "
                        f"({lock!r} exists; remove it if none is)"
                    ) from None
                time.sleep(0.05)
            continue
        fd = os.open(lock, os.O_CREAT | os.O_RDWR, 0o666)
        fcntl.flock(fd, fcntl.LOCK_EX)
        try:  # the holder before us may have removed the file: lock the new one
            same = os.path.samestat(os.fstat(fd), os.stat(lock))
        except FileNotFoundError:
            same = False
        if not same:
            os.close(fd)
            fd = None
    try:
        yield lock
    finally:
        with contextlib.suppress(FileNotFoundError):
            os.remove(lock)
        os.close(fd)  # releases the flock


def range_checksum(path: str, ranges: list[tuple[int, int | None]]) -> str:
    """SHA-256 of the bytes of ``ranges`` (offset, length or None for the rest of the
    file), in the order given: the tensors of a data file, holes left out."""
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for offset, length in ranges:
            f.seek(offset)
            left = length
            while left is None or left > 0:
                chunk = f.read(_CHUNK if left is None else min(_CHUNK, left))
                if not chunk:
                    break
                digest.update(chunk)
                if left is not None:
                    left -= len(chunk)
    return digest.hexdigest()


def get_data_metadata(model) -> dict:
    """``{location: {"size": bytes, "sha256": hex}}`` recorded by the save, or {}."""
    for prop in model.metadata_props:
        if prop.key == DATA_KEY:
            return json.loads(prop.value)
    return {}


def set_json_metadata(model, key: str, info: dict) -> None:
    """Stores ``info`` as JSON (sorted keys: deterministic) in ``model.metadata_props``
    under ``key``, replacing a previous value."""
    text = json.dumps(info, sort_keys=True)
    for prop in model.metadata_props:
        if prop.key == key:
            prop.value = text
            return
    prop = model.metadata_props.add()
    prop.key, prop.value = key, text


def _set_data_metadata(model, info: dict) -> None:
    set_json_metadata(model, DATA_KEY, info)


def _unfilled(model) -> set[str]:
    """Initializers without data (holes), recorded by the model container."""
    for prop in model.metadata_props:
        if prop.key == "experimental_experiment.weights":  # model_container.METADATA_KEY
            return set(json.loads(prop.value).get("unfilled", []))
    return set()


def check_recorded_data(model, folder: str, *, checksum: bool = True) -> None:
    """Compares the data files with the size (and checksum) the model recorded when it
    was saved: :class:`StaleDataError` when one differs. Models saved without the
    record pass."""
    recorded = get_data_metadata(model)
    if not recorded:
        return
    entries = external_entries(model, folder)
    unfilled = _unfilled(model)
    for loc, info in sorted(recorded.items()):
        rows = [e for e in entries if e.location == loc]
        if not rows:
            continue
        path = rows[0].path
        size = os.path.getsize(path)
        if size != info.get("size"):
            raise StaleDataError(
                f"data file {loc!r} has {size} bytes, the model was saved with "
                f"{info.get('size')}: it belongs to another save of the model (save the "
                "model again, or copy the data file saved with it)"
            )
        if checksum:
            ranges = sorted((e.offset, e.length) for e in rows if e.name not in unfilled)
            if range_checksum(path, ranges) != info.get("sha256"):
                raise StaleDataError(
                    f"data file {loc!r} does not hold the bytes the model was saved with "
                    "(SHA-256 differs): it belongs to another save of the model (save the "
                    "model again, or copy the data file saved with it)"
                )


class PairedSave:
    """Writes a model and its data files so that a reader sees the old pair or the new
    one: see the module's documentation.

    :param path: the model file
    :param location: the data file's name instead of one derived from its content
        (then a save stopped between two renames can leave a mixed pair, which
        :func:`check_recorded_data` detects)
    """

    def __init__(self, path: str, location: str | None = None):
        self.path = check_output_path(path, what="model")
        self.folder, self.base = os.path.split(self.path)
        self.location = location
        self.temps: dict[int, tuple[object, str]] = {}
        self._lock = None
        self.saved_locations: list[str] = []

    def __enter__(self):
        os.makedirs(self.folder, exist_ok=True)
        self._lock = path_lock(self.path)
        self._lock.__enter__()
        return self

    def _temp(self):
        fd, tmp = tempfile.mkstemp(suffix=".tmp", prefix=f".{self.base}.saving.", dir=self.folder)
        os.chmod(tmp, 0o666 & ~_umask())  # mkstemp makes it private, a model is not
        return os.fdopen(fd, "w+b"), tmp

    def data_file(self, index: int):
        """The temporary file of the ``index``-th data file (created once)."""
        if index not in self.temps:
            self.temps[index] = self._temp()
        return self.temps[index][0]

    def _names(self, digests: dict[int, str]) -> dict[int, str]:
        several = len(digests) > 1
        if self.location:
            return {i: f"{self.location}.{i}" if several else self.location for i in digests}
        tag = hashlib.sha256("".join(digests[i] for i in sorted(digests)).encode())
        stem = f"{self.base}.{tag.hexdigest()[:16]}.data"
        return {i: f"{stem}.{i}" if several else stem for i in digests}

    def commit(self, model, rows: list[tuple], unfilled: set[str]) -> list[str]:
        """Names the data files, records them in ``model`` (external data entries,
        metadata), renames the data files, then the model; removes the data files of
        the replaced model. ``rows``: (TensorProto, file index, offset, length).
        Returns the data file names."""
        old = self._old_locations()
        digests, sizes = {}, {}
        for i, (f, tmp) in sorted(self.temps.items()):
            f.flush()
            os.fsync(f.fileno())
            sizes[i] = os.fstat(f.fileno()).st_size
            ranges = sorted((o, n) for p, j, o, n in rows if j == i and p.name not in unfilled)
            digests[i] = range_checksum(tmp, ranges)
        names = self._names(digests)
        for proto, i, offset, length in rows:
            del proto.external_data[:]
            for key, val in (
                ("location", names[i]),
                ("offset", str(offset)),
                ("length", str(length)),
            ):
                entry = proto.external_data.add()
                entry.key, entry.value = key, val
        if names:  # a model without data files is saved unchanged
            _set_data_metadata(
                model, {names[i]: {"sha256": digests[i], "size": sizes[i]} for i in names}
            )
        for i, (f, tmp) in sorted(self.temps.items()):
            f.close()
            target = os.path.join(self.folder, names[i])
            os.makedirs(os.path.dirname(target), exist_ok=True)  # location="sub/w.data"
            os.replace(tmp, target)
        _fsync_folder(self.folder)
        f, tmp = self._temp()
        self.temps[-1] = (f, tmp)
        f.write(model.SerializeToString())
        f.flush()
        os.fsync(f.fileno())
        f.close()
        os.replace(tmp, self.path)  # the model last: it now reads the new data
        _fsync_folder(self.folder)
        keep = set(names.values()) | {e.location for e in external_entries(model, self.folder)}
        self._remove_old(old, keep)
        self.saved_locations = [names[i] for i in sorted(names)]
        return self.saved_locations

    def _old_locations(self) -> set[str]:
        """Data files of the model being replaced that this save may remove: in the
        folder, named after the model (``<model>.*``)."""
        if not os.path.isfile(self.path):
            return set()
        import onnx

        try:
            model = onnx.load(self.path, load_external_data=False)
            entries = external_entries(model, self.folder)
        except Exception as e:  # not a model of ours: nothing to clean up
            logger.debug("no data files to remove for %r: %s", self.path, e)
            return set()
        return {
            e.location
            for e in entries
            if os.path.basename(e.location) == e.location and e.location.startswith(self.base + ".")
        } | self._left_by_crashes()

    def _left_by_crashes(self) -> set[str]:
        """Files of saves to this path stopped before their end (the lock is held, no
        save is running): temporary files, data files named after their content."""
        base = re.escape(self.base)
        pattern = re.compile(
            rf"^(\.{base}\.saving\.\w+\.tmp|{base}\.[0-9a-f]{{16}}"
            r"\.data(\.\d+)?)$"
        )
        mine = {os.path.basename(tmp) for _, tmp in self.temps.values()}
        return {f for f in os.listdir(self.folder) if pattern.match(f) and f not in mine}

    def _remove_old(self, old: set[str], new: set[str]) -> None:
        for loc in sorted(old - new):
            with contextlib.suppress(FileNotFoundError):
                os.remove(os.path.join(self.folder, loc))
                logger.debug("removed %r, the data of the replaced model", loc)

    def __exit__(self, exc_type, exc, tb):
        try:
            for f, tmp in self.temps.values():
                if not f.closed:
                    f.close()
                with contextlib.suppress(FileNotFoundError):
                    os.remove(tmp)
        finally:
            self._lock.__exit__(exc_type, exc, tb)
        return False


__all__ = [
    "DATA_KEY",
    "PairedSave",
    "check_recorded_data",
    "get_data_metadata",
    "path_lock",
    "range_checksum",
]
