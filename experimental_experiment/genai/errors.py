"""Errors of :func:`experimental_experiment.genai.package_model`, all raised before any
file is written."""

from __future__ import annotations

from ..errors import ExportError


class GenAIPackageError(ExportError):
    """Base class of the errors raised while building an onnxruntime-genai package.

    Cause: one of the subclasses says what is wrong.

    Fix: ``except GenAIPackageError`` catches every one of them."""


class PackagePrecisionError(GenAIPackageError, ValueError):
    """The precision is not one the packager writes.

    Cause: ``precision`` is not in ``experimental_experiment.genai.PRECISIONS``.

    Fix: use ``"fp32"`` or ``"int4"`` (``--precision fp32|int4``)."""


class NotADecoderError(GenAIPackageError, TypeError):
    """The model is not a decoder onnxruntime-genai can run: an encoder, an
    encoder-decoder, or a model whose forward takes no cache.

    Cause: onnxruntime-genai feeds the keys and values of every layer back at each
    step, the model must be a causal language model with a cache.

    Fix: give a ``*ForCausalLM`` model (or its ``save_pretrained`` folder)."""


class PackageModelTypeError(GenAIPackageError, ValueError):
    """The ``model_type`` of the configuration is not a type onnxruntime-genai knows.

    Cause: genai_config.json's ``model.type`` selects the runtime's implementation and
    it refuses a type it does not list.

    Fix: pass ``model_type=`` a type it knows with the same decoding loop (``llama``
    for most decoders)."""


class MissingTokenizerError(GenAIPackageError, FileNotFoundError):
    """The tokenizer folder is missing or holds no tokenizer file.

    Cause: ``tokenizer`` names a folder without ``tokenizer.json`` (or
    ``tokenizer.model``), or ``require_tokenizer=True`` and none was found.

    Fix: give the folder the tokenizer was saved in (``tokenizer.save_pretrained``),
    or a tokenizer object."""


class OutputFolderError(GenAIPackageError, FileExistsError):
    """The output folder exists and is not empty, or is not a folder.

    Cause: the package would mix its files with others.

    Fix: choose another folder, empty it, or pass ``overwrite=True``
    (``--overwrite``)."""


__all__ = [
    "GenAIPackageError",
    "MissingTokenizerError",
    "NotADecoderError",
    "OutputFolderError",
    "PackageModelTypeError",
    "PackagePrecisionError",
]
