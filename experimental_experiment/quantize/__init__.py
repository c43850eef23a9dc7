"""Low precision after export: int4, int8 or float16 weights with onnxruntime's
quantization tools (:func:`quantize_model`), from Python or the command line
(``python -m experimental_experiment quantize IN.onnx OUT.onnx --precision int4``).

.. code-block:: python

    from experimental_experiment.quantize import quantize_model

    q4 = quantize_model(onx, "int4", block_size=32, accuracy_level=4)
"""

from .errors import (
    AlreadyQuantizedError,
    MissingWeightsError,
    NothingToQuantizeError,
    QuantizeError,
    QuantizeOptionError,
    UnsupportedPrecisionError,
)
from .graph import find_lm_head, node_type_counts
from .quantizer import PRECISIONS, gather_block_quantized_available, quantize_model

__all__ = [
    "PRECISIONS",
    "AlreadyQuantizedError",
    "MissingWeightsError",
    "NothingToQuantizeError",
    "QuantizeError",
    "QuantizeOptionError",
    "UnsupportedPrecisionError",
    "find_lm_head",
    "gather_block_quantized_available",
    "node_type_counts",
    "quantize_model",
]
