"""Reads checkpoints tensor by tensor: ``.safetensors`` files (memory-mapped, a sharded
checkpoint through its ``*.safetensors.index.json``), ``.pt``/``.bin`` files
(``torch.load(weights_only=True, mmap=True)``). Only one tensor is materialized at a time.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from typing import Callable

import torch

from ..torch_interpreter.errors import InvalidArgumentError
from ..xbuilder.safe_paths import resolve_inside
from .checkpoint_checks import CheckpointError, check_safetensors


@dataclass(frozen=True)
class CheckpointTensor:
    """A tensor of a checkpoint: where it is, its shape and dtype, and how to load it."""

    name: str
    file: str
    shape: tuple[int, ...]
    dtype: torch.dtype
    load: Callable[[], torch.Tensor]


_SAFETENSORS_DTYPES = {
    "F64": torch.float64,
    "F32": torch.float32,
    "F16": torch.float16,
    "BF16": torch.bfloat16,
    "I64": torch.int64,
    "I32": torch.int32,
    "I16": torch.int16,
    "I8": torch.int8,
    "U8": torch.uint8,
    "BOOL": torch.bool,
}


def _load_safetensors(path: str, name: str) -> torch.Tensor:
    """One tensor, the file mapped only while it is read: the pages of the tensors
    already written do not stay in the resident memory of the process."""
    from safetensors import safe_open

    try:
        with safe_open(path, framework="pt") as handle:
            return handle.get_tensor(name)
    except Exception as e:  # SafetensorError: the file changed since it was checked
        raise CheckpointError(
            f"checkpoint {path!r}: tensor {name!r} cannot be read ({type(e).__name__}: {e})",
            path=path,
            tensor=name,
        ) from e


def _safetensors(path: str) -> list[CheckpointTensor]:
    """The tensors a header declares, the header checked against the file size first
    (:class:`CheckpointError` for a truncated or forged file, nothing mapped)."""
    rows = []
    for name, entry in sorted(check_safetensors(path).items()):
        dtype = _SAFETENSORS_DTYPES.get(entry["dtype"])
        if dtype is None:
            raise InvalidArgumentError(
                f"{path!r}: tensor {name!r} has dtype "
                f"{entry['dtype']} with no ONNX counterpart here"
            )
        rows.append(
            CheckpointTensor(
                name, path, tuple(entry["shape"]), dtype, lambda n=name: _load_safetensors(path, n)
            )
        )
    return rows


def _torch_file(path: str) -> list[CheckpointTensor]:
    try:
        state = torch.load(path, weights_only=True, mmap=True, map_location="cpu")
    except Exception as e:
        first = str(e).splitlines()[0] if str(e) else ""
        raise CheckpointError(
            f"checkpoint {path!r} cannot be loaded with torch.load("
            f"weights_only=True, mmap=True), truncated or not a torch "
            f"file ({type(e).__name__}: {first})",
            path=path,
        ) from e
    if isinstance(state, dict) and "state_dict" in state and isinstance(state["state_dict"], dict):
        state = state["state_dict"]
    if not isinstance(state, dict):
        raise InvalidArgumentError(f"{path!r} holds a {type(state).__name__}, not a state dict")
    return [
        CheckpointTensor(k, path, tuple(v.shape), v.dtype, lambda v=v: v)
        for k, v in sorted(state.items())
        if isinstance(v, torch.Tensor)
    ]


def _expand(path: str) -> list[str]:
    """A folder gives its index file or its checkpoint files; an index its shards.
    A shard named by an index stays inside the index's folder: no absolute name, no
    ``..`` (:class:`UnsafePathError
    <experimental_experiment.xbuilder.safe_paths.UnsafePathError>` otherwise, before
    anything is read). Symbolic links are followed: checkpoint files are only read, and
    the Hugging Face cache links its snapshots to ``../../blobs``."""
    if os.path.isdir(path):
        index = sorted(f for f in os.listdir(path) if f.endswith(".index.json"))
        if index:
            return _expand(
                resolve_inside(path, index[0], what=f"index of folder {path!r}", links_out=True)
            )
        files = sorted(
            f for f in os.listdir(path) if f.endswith((".safetensors", ".bin", ".pt", ".pth"))
        )
        if not files:
            raise InvalidArgumentError(f"folder {path!r} has no checkpoint file")
        return [
            resolve_inside(path, f, what=f"checkpoint in folder {path!r}", links_out=True)
            for f in files
        ]
    if path.endswith(".index.json"):
        weight_map = _weight_map(path)
        folder = os.path.dirname(os.path.abspath(path))
        return [
            resolve_inside(folder, f, what=f"shard of {path!r}", links_out=True)
            for f in sorted(set(weight_map.values()))
        ]
    return [path]


def _weight_map(path: str) -> dict[str, str]:
    """The ``weight_map`` of an index file: tensor name -> shard file name."""
    try:
        with open(path) as f:
            weight_map = json.load(f).get("weight_map", {})
    except (OSError, ValueError, AttributeError) as e:
        raise InvalidArgumentError(
            f"index {path!r} is not a JSON object with a 'weight_map' ({type(e).__name__}: {e})"
        ) from e
    if not isinstance(weight_map, dict) or not all(isinstance(v, str) for v in weight_map.values()):
        raise InvalidArgumentError(
            f"index {path!r}: 'weight_map' must map tensor names to shard file names"
        )
    return weight_map


def read_checkpoints(paths: list[str]) -> dict[str, CheckpointTensor]:
    """Every tensor of the checkpoints, by name (nothing loaded yet).

    :param paths: checkpoint files (``.safetensors``, a ``.safetensors.index.json``
        index naming its shards, or a file saved by ``torch.save``) or folders
        holding them
    :return: ``{tensor name: CheckpointTensor}``, each loaded by its ``load()`` method

    .. code-block:: python

        tensors = read_checkpoints(["model.safetensors"])
        weight = tensors["lm_head.weight"].load()
    """
    result: dict[str, CheckpointTensor] = {}
    for path in paths:
        for file in _expand(path):
            if not os.path.isfile(file):
                raise InvalidArgumentError(f"checkpoint {file!r} does not exist")
            rows = _safetensors(file) if file.endswith(".safetensors") else _torch_file(file)
            for row in rows:
                if row.name in result:
                    raise InvalidArgumentError(
                        f"tensor {row.name!r} is in {result[row.name].file!r} and {file!r}"
                    )
                result[row.name] = row
    return result
