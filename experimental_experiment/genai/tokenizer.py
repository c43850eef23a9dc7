"""Finds and writes the tokenizer files of a package (genai's tokenizer reads
``tokenizer.json`` or ``tokenizer.model`` with ``tokenizer_config.json``)."""

from __future__ import annotations

import os
import shutil

from .errors import MissingTokenizerError

#: files copied from a tokenizer folder when present
TOKENIZER_FILES = (
    "tokenizer.json",
    "tokenizer.model",
    "tokenizer_config.json",
    "special_tokens_map.json",
    "added_tokens.json",
    "vocab.json",
    "merges.txt",
    "generation_config.json",
)
_REQUIRED = ("tokenizer.json", "tokenizer.model")


def has_tokenizer(folder: str) -> bool:
    return any(os.path.isfile(os.path.join(folder, f)) for f in _REQUIRED)


def resolve_tokenizer(tokenizer, model, *, required: bool):
    """What to write: a tokenizer object, a folder holding tokenizer files, or None.
    ``tokenizer`` wins; else the model's folder when it holds one."""
    if tokenizer is not None and not isinstance(tokenizer, (str, os.PathLike)):
        if not hasattr(tokenizer, "save_pretrained"):
            raise MissingTokenizerError(
                f"tokenizer {type(tokenizer).__name__} has no save_pretrained; give a "
                "transformers tokenizer or the folder it was saved in"
            )
        return tokenizer
    if tokenizer is not None:
        folder = os.fspath(tokenizer)
        if not os.path.isdir(folder) or not has_tokenizer(folder):
            what = (
                "holds no " + " or ".join(_REQUIRED) if os.path.isdir(folder) else "does not exist"
            )
            raise MissingTokenizerError(
                f"tokenizer folder {folder!r} {what}; give the folder "
                "tokenizer.save_pretrained wrote"
            )
        return folder
    if isinstance(model, (str, os.PathLike)) and has_tokenizer(os.fspath(model)):
        return os.fspath(model)
    if required:
        where = f"in {os.fspath(model)!r} " if isinstance(model, (str, os.PathLike)) else ""
        raise MissingTokenizerError(
            f"no tokenizer given and none found {where}(tokenizer.json or "
            "tokenizer.model); pass tokenizer= (--tokenizer DIR)"
        )
    return None


def write_tokenizer(source, folder: str) -> list[str]:
    """Writes the tokenizer ``source`` (an object or a folder) into ``folder``;
    returns the names of the files written."""
    if source is None:
        return []
    if not isinstance(source, str):
        before = set(os.listdir(folder))
        source.save_pretrained(folder)
        return sorted(set(os.listdir(folder)) - before)
    written = []
    for name in TOKENIZER_FILES:
        path = os.path.join(source, name)
        if os.path.isfile(path) and name != "generation_config.json":
            shutil.copyfile(path, os.path.join(folder, name))
            written.append(name)
    return written


__all__ = ["TOKENIZER_FILES", "has_tokenizer", "resolve_tokenizer", "write_tokenizer"]
