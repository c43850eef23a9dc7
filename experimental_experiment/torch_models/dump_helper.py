"""dump_onnx: saves every ONNX model a backend builds."""

from __future__ import annotations

import contextlib
import os
import shutil

from ..torch_dynamo import dump


@contextlib.contextmanager
def dump_onnx(prefix: str, folder: str | None = None, clean: bool = False):
    """Under this context manager, every model a backend builds is saved as
    ``<folder>/<prefix>_<n>.onnx`` with the FX graph in ``<prefix>_<n>.txt``.

    :param prefix: file prefix
    :param folder: folder (created if missing)
    :param clean: removes the folder first

    Without this context manager, the environment variable ``ONNXRT_DUMP_PATH`` does
    the same: every model is saved as ``$ONNXRT_DUMP_PATH<n>.onnx`` (the variable is
    the whole prefix, ``dump/model_`` gives ``dump/model_0.onnx``, ...). A model whose
    session comes from the cache is saved again.

    .. code-block:: python

        with dump_onnx("dort-llama-ort", folder="dump_llama", clean=True):
            train_loop(optimized_mod, input_ids, input_mask)
    """
    if folder:
        if clean and os.path.exists(folder):
            shutil.rmtree(folder)
        os.makedirs(folder, exist_ok=True)
        prefix = os.path.join(folder, prefix)
    previous = dump.set_prefix(f"{prefix}_")
    try:
        yield prefix
    finally:
        dump.set_prefix(previous)
