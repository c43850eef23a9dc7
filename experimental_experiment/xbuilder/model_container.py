"""Models whose weights live outside the protobuf: a container keeping the graph and
references to the tensors, and the one atomic saver of the package (external data past
2 GB, weights streamed tensor by tensor, temporary files renamed at the end).

The graph of a :class:`ModelContainer` declares its large initializers as external data
(``data_location=EXTERNAL``); their bytes stay in the objects the exporter holds (torch
tensors, numpy arrays) until :meth:`ModelContainer.save` streams them to one data file
next to the model, with a relative location, so the model loads from any folder.
A reference without data (a tensor on the ``meta`` device) gets its place in the data
file (a sparse hole) and is listed as *unfilled* in the model's metadata, to be filled
later from a checkpoint (:func:`experimental_experiment.large.fill_weights`).
"""

from __future__ import annotations

import json
import logging
import os
import tempfile
from typing import Any, Iterator

import numpy as np
from onnx import ModelProto, TensorProto, numpy_helper

from ..progress import Progress, sub_bar
from ._arrays import contiguous
from .paired_save import PairedSave, check_recorded_data, set_json_metadata
from .safe_paths import ExternalDataError, UnsafeLocationError, external_entries, resolve_inside

logger = logging.getLogger(__name__)

#: protobuf refuses to serialize a message of 2 GB or more; margin for the graph
PROTOBUF_LIMIT = 2**31 - 2**24
#: key of the model metadata recording unfilled initializers and weight sources
METADATA_KEY = "experimental_experiment.weights"
_ALIGN = 4096
#: constants created by the converters stay in the graph below this size
_SMALL = 1024


def _nbytes(value) -> int:
    return int(value.nbytes)


def _has_data(value) -> bool:
    return getattr(value, "has_data", True)


def _write(value, f) -> None:
    """Writes the little-endian bytes of an initializer value at the file position."""
    if isinstance(value, np.ndarray):
        contiguous(value).tofile(f)
    elif hasattr(value, "write_to"):
        value.write_to(f)
    else:  # a reference only able to give a TensorProto (loaded models)
        proto = value.to_tensor_proto("_")
        f.write(
            proto.raw_data if proto.HasField("raw_data") else numpy_helper.to_array(proto).tobytes()
        )


def declare_external(name: str, value) -> TensorProto:
    """A TensorProto with type and dims only, data declared external (location set
    when the container is saved)."""
    proto = TensorProto()
    proto.name = name
    proto.data_type = (
        value.elem_type
        if hasattr(value, "elem_type")
        else (numpy_helper.from_array(np.zeros((0,), dtype=value.dtype)).data_type)
    )
    proto.dims.extend(int(d) for d in value.shape)
    proto.data_location = TensorProto.EXTERNAL
    return proto


class ModelContainer:
    """A model with its large initializers kept as references (no copy).

    :param model_proto: the model; initializers in ``tensors`` are declared external
    :param tensors: initializer name -> value (numpy array, or a reference with
        ``elem_type``, ``shape``, ``nbytes``, ``has_data``, ``write_to(file)``)
    :param sources: initializer name -> name of the model weight it holds (state dict
        key; the list of its names for a tied weight)

    .. code-block:: python

        container = to_onnx(model, (x,), large_model=True)
        container.save("model.onnx")  # model.onnx + model.onnx.<hash>.data
    """

    def __init__(
        self,
        model_proto: ModelProto,
        tensors: dict[str, Any],
        sources: dict[str, Any] | None = None,
    ):
        self.model_proto = model_proto
        self.tensors = tensors
        self.sources = dict(sources or {})

    @property
    def unfilled(self) -> list[str]:
        """Initializers without data (meta or fake tensors), to be filled later."""
        return [n for n, v in self.tensors.items() if not _has_data(v)]

    @property
    def nbytes(self) -> int:
        """Size of the external data."""
        return sum(_nbytes(v) for v in self.tensors.values())

    def external_protos(self) -> Iterator[TensorProto]:
        for init in self.model_proto.graph.initializer:
            if init.name in self.tensors:
                yield init

    def layout(
        self, location: str, all_tensors_to_one_file: bool = True
    ) -> list[tuple[TensorProto, str, int, int]]:
        """(proto, location, offset, length) of every external tensor, offsets aligned."""
        rows, offset = [], 0
        for i, proto in enumerate(self.external_protos()):
            length = _nbytes(self.tensors[proto.name])
            if all_tensors_to_one_file:
                offset = -(-offset // _ALIGN) * _ALIGN if length >= _ALIGN else offset
                rows.append((proto, location, offset, length))
                offset += length
            else:
                rows.append((proto, f"{location}.{i}", 0, length))
        return rows

    def save(
        self,
        path: str,
        *,
        all_tensors_to_one_file: bool = True,
        location: str | None = None,
        progress: Progress | None = None,
    ) -> ModelProto:
        """Saves the model to ``path`` and the tensors to one data file next to it
        named after its content (``<model file name>.<hash>.data``) or ``location``
        (relative to the model's folder), model and data replaced as one
        (:class:`PairedSave <experimental_experiment.xbuilder.paired_save.PairedSave>`).

        Returns the saved ModelProto (initializers pointing to the data file);
        ``progress`` (a ``experimental_experiment.progress.Progress``)
        counts the bytes written (or left as holes for the unfilled tensors).
        """
        folder = os.path.dirname(os.path.abspath(path))
        if location is not None:
            resolve_inside(
                folder, location, what="location of the data file", error=UnsafeLocationError
            )
        rows = self.layout("", all_tensors_to_one_file)
        index = {loc: i for i, loc in enumerate(dict.fromkeys(r[1] for r in rows))}
        self._set_metadata()
        total = sum(r[3] for r in rows)
        with PairedSave(path, location) as save, sub_bar(progress, total, "save", unit="B") as bar:
            for loc, i in index.items():
                f = save.data_file(i)
                for proto, _, offset, length in (r for r in rows if r[1] == loc):
                    value = self.tensors[proto.name]
                    if _has_data(value):
                        f.seek(offset)
                        _write(value, f)
                        if f.tell() != offset + length:
                            raise ExternalDataError(
                                f"{proto.name!r}: wrote {f.tell() - offset} bytes, "
                                f"expected {length}"
                            )
                    bar.update(length)
                # holes for unfilled tensors: the file has its final size
                f.truncate(max((o + n for p, lc, o, n in rows if lc == loc), default=0))
            save.commit(
                self.model_proto, [(p, index[lc], o, n) for p, lc, o, n in rows], set(self.unfilled)
            )
        logger.info(
            "saved %r, %d external tensors (%d bytes, %d unfilled)",
            path,
            len(rows),
            self.nbytes,
            len(self.unfilled),
        )
        return self.model_proto

    def _set_metadata(self) -> None:
        info = {
            "unfilled": sorted(self.unfilled),
            "sources": {k: v for k, v in sorted(self.sources.items())},
        }
        set_weights_metadata(self.model_proto, info)


def get_weights_metadata(model: ModelProto) -> dict:
    """The record of unfilled initializers and weight sources stored in the model."""
    for prop in model.metadata_props:
        if prop.key == METADATA_KEY:
            return json.loads(prop.value)
    return {"unfilled": [], "sources": {}}


def set_weights_metadata(model: ModelProto, info: dict) -> None:
    """Stores ``info`` (JSON, sorted keys: deterministic) in the model's metadata."""
    set_json_metadata(model, METADATA_KEY, info)


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


class AtomicFiles:
    """Opens temporary files in a folder; renames them to their final names when the
    block succeeds, removes them when it fails (nothing half written is left)."""

    def __init__(self, folder: str):
        self.folder = folder
        self.files: list[tuple[Any, str, str]] = []

    def __enter__(self):
        os.makedirs(self.folder, exist_ok=True)
        return self

    def open(self, final: str):
        os.makedirs(os.path.dirname(final), exist_ok=True)
        fd, tmp = tempfile.mkstemp(
            suffix=".tmp", prefix=os.path.basename(final) + ".", dir=os.path.dirname(final)
        )
        os.chmod(tmp, 0o666 & ~_umask())  # mkstemp makes it private, a model is not
        f = os.fdopen(fd, "w+b")
        self.files.append((f, tmp, final))
        return f

    def __exit__(self, exc_type, exc, tb):
        try:
            for f, _, _ in self.files:
                if exc_type is None:
                    f.flush()
                    os.fsync(f.fileno())
                f.close()
            if exc_type is None:
                # data files first: a renamed model always finds its data
                for _, tmp, final in self.files:
                    os.replace(tmp, final)
        finally:
            for _, tmp, _ in self.files:
                if os.path.exists(tmp):
                    os.remove(tmp)
        return False


class _RawBytes:
    """The raw bytes of an initializer taken out of a TensorProto."""

    __slots__ = ("data", "elem_type", "shape")

    def __init__(self, data: bytes, elem_type: int, shape: tuple):
        self.data, self.elem_type, self.shape = data, elem_type, shape

    @property
    def nbytes(self) -> int:
        return len(self.data)

    def write_to(self, f) -> None:
        f.write(self.data)


def builder_to_container(g, threshold: int = 1024) -> ModelContainer:
    """The container of a GraphBuilder: references the builder must not fold (model
    weights without data or pinned to external data) and other values of ``threshold``
    bytes or more become external data; smaller ones stay in the graph (small constants,
    such as shapes, stay there whatever ``threshold``: onnxruntime reads them while
    loading the model)."""
    from ._serialize import builder_to_model, tensor_proto

    tensors: dict[str, Any] = {}

    def make(name, value):
        pinned = not isinstance(value, np.ndarray) and not getattr(value, "foldable", True)
        if pinned or _nbytes(value) >= max(threshold, _SMALL):
            tensors[name] = value
            return declare_external(name, value)
        return tensor_proto(name, value)

    model = builder_to_model(g, make_initializer=make)
    sources = {n: v.source for n, v in tensors.items() if getattr(v, "source", None)}
    return ModelContainer(model, tensors, sources)


def container_from_proto(model: ModelProto, threshold: int = 1024) -> ModelContainer:
    """A container over a ModelProto whose initializers of ``threshold`` bytes or more
    move to external data (the ModelProto is modified: their data is cleared)."""
    tensors: dict[str, Any] = {}
    for init in model.graph.initializer:
        if init.data_location == TensorProto.EXTERNAL:
            raise ExternalDataError(
                f"initializer {init.name!r} already refers to external "
                "data: load the model with its data before saving it"
            )
        if init.HasField("raw_data") and len(init.raw_data) >= threshold:
            tensors[init.name] = _RawBytes(init.raw_data, init.data_type, tuple(init.dims))
            init.ClearField("raw_data")
            init.data_location = TensorProto.EXTERNAL
    return ModelContainer(model, tensors)


def save_model(
    model: ModelProto | ModelContainer,
    path: str,
    *,
    external_data: bool | None = None,
    threshold: int = 1024,
    all_tensors_to_one_file: bool = True,
    location: str | None = None,
) -> None:
    """Saves a model atomically (temporary files renamed at the end).

    :param model: a ModelProto or a :class:`ModelContainer`
    :param path: the model file; external data goes to ``<path>.<hash>.data`` next to it
    :param external_data: None chooses: a container always writes external data, a
        ModelProto only when it does not fit in one protobuf message (2 GB)
    :param threshold: initializers of this size in bytes or more go to external data
        (a ModelProto saved with external data)
    :param all_tensors_to_one_file: a container writes every weight in one data file
        (False: one file per weight)
    :param location: name of a container's data file (default: ``<file name>.data``)

    .. code-block:: python

        from experimental_experiment.xbuilder.model_container import save_model

        save_model(onx, "model.onnx")  # model.onnx.<hash>.data too if onx is over 2 GB
    """
    if isinstance(model, ModelContainer):
        model.save(path, all_tensors_to_one_file=all_tensors_to_one_file, location=location)
        return
    if external_data is None:
        external_data = model.ByteSize() >= PROTOBUF_LIMIT
    if not external_data:
        with PairedSave(path) as save:  # also removes the data of a replaced model
            save.commit(model, [], set())
        return
    # the user's model is left unchanged: the data goes back once saved
    saved = {i.name: i for i in model.graph.initializer}
    props = [(p.key, p.value) for p in model.metadata_props]
    container = container_from_proto(model, threshold)
    try:
        container.save(path, all_tensors_to_one_file=all_tensors_to_one_file, location=location)
    finally:
        _restore(model, saved, container, props)


def _restore(model: ModelProto, saved: dict, container: ModelContainer, props: list) -> None:
    """Puts back the data :func:`container_from_proto` moved out of ``model``."""
    for name, raw in container.tensors.items():
        proto = saved[name]
        del proto.external_data[:]
        proto.ClearField("data_location")
        proto.raw_data = raw.data
    del model.metadata_props[:]
    for key, value in props:
        prop = model.metadata_props.add()
        prop.key, prop.value = key, value


def check_external_data(model: ModelProto, folder: str, *, checksum: bool = True) -> dict[str, int]:
    """Checks every external initializer stays inside ``folder`` and lies inside its
    data file, and that each data file is the one the model was saved with (size and
    SHA-256 the save recorded, read again when ``checksum``); returns the size of every
    data file. Raises :class:`UnsafeLocationError` for a location leaving ``folder``,
    :class:`StaleDataError <experimental_experiment.xbuilder.safe_paths.StaleDataError>`
    for a data file of another save, :class:`ExternalDataError` for a missing or
    short file. Nothing outside ``folder`` is opened.

    :param model: a model whose initializers may be external
    :param folder: the folder of the model's file (external locations are relative to it)
    :param checksum: reads every data file again to compare its SHA-256
    :return: ``{location: size in bytes}``

    .. code-block:: python

        import onnx
        from experimental_experiment.xbuilder.model_container import check_external_data

        onx = onnx.load("model.onnx", load_external_data=False)
        print(check_external_data(onx, "."))  # {'model.<hash>.data': 4194304}
    """
    sizes: dict[str, int] = {}
    entries = external_entries(model, folder)
    for e in entries:
        if e.location not in sizes:
            if not os.path.isfile(e.path):
                raise ExternalDataError(
                    f"initializer {e.name!r}: data file {e.path!r} "
                    "does not exist (was it moved apart from the model?)"
                )
            sizes[e.location] = os.path.getsize(e.path)
        end = e.offset + (sizes[e.location] - e.offset if e.length is None else e.length)
        if end > sizes[e.location] or e.offset > sizes[e.location]:
            raise ExternalDataError(
                f"initializer {e.name!r} ends at byte {end} but {e.path!r} has "
                f"{sizes[e.location]} bytes: the data file is truncated (copy it again, or "
                "save the model again)"
            )
    check_recorded_data(model, folder, checksum=checksum)
    return sizes


def load_model(path: str, *, load_external_data: bool = True) -> ModelProto:
    """Loads an ONNX model; its external data only after
    :func:`check_external_data` accepted it (locations inside the model's folder,
    offsets inside the files, the data files of the same save): nothing outside the
    model's folder is opened. With ``load_external_data=False`` only the locations are
    checked.

    :param path: the model's file (``.onnx``)
    :param load_external_data: loads the external data into the model
    :return: the model

    .. code-block:: python

        from experimental_experiment.xbuilder.model_container import load_model

        model = load_model("model.onnx")
    """
    import onnx
    from onnx.external_data_helper import load_external_data_for_model

    model = onnx.load(path, load_external_data=False)
    folder = os.path.dirname(os.path.abspath(path))
    if not external_entries(model, folder) or not load_external_data:
        return model
    check_external_data(model, folder)
    load_external_data_for_model(model, folder)
    return model
