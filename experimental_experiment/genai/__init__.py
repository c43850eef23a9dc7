"""onnxruntime-genai packages from a transformers decoder: :func:`package_model` exports
the model with :func:`to_onnx <experimental_experiment.torch_interpreter.to_onnx>` (the
onnxruntime patterns fuse the attention), renames its inputs and outputs to genai's
names, writes ``genai_config.json`` and the tokenizer.

.. code-block:: python

    from experimental_experiment.genai import package_model

    package_model(model, "llama-genai")  # python -m experimental_experiment package
"""

from .errors import (
    GenAIPackageError,
    MissingTokenizerError,
    NotADecoderError,
    OutputFolderError,
    PackageModelTypeError,
    PackagePrecisionError,
)
from .package import PRECISIONS, PackageReport, package_model

__all__ = [
    "PRECISIONS",
    "GenAIPackageError",
    "MissingTokenizerError",
    "NotADecoderError",
    "OutputFolderError",
    "PackageReport",
    "PackageModelTypeError",
    "PackagePrecisionError",
    "package_model",
]
