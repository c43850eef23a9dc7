"""The errors of :func:`quantize_model
<experimental_experiment.quantize.quantize_model>`, raised before any work.

.. code-block:: python

    from experimental_experiment.quantize import QuantizeError, quantize_model

    try:
        q = quantize_model(onx, "int4")
    except QuantizeError as e:
        print(e)
"""

from __future__ import annotations

from ..errors import ExportError


class QuantizeError(ExportError, ValueError):
    """Base class of the errors of :func:`quantize_model
    <experimental_experiment.quantize.quantize_model>`.

    Cause: the model or the options cannot be quantized as asked; a subclass says why.

    Fix: ``except QuantizeError`` catches every one of them; read the subclass's
    message, it names the option or the node to change."""


class UnsupportedPrecisionError(QuantizeError):
    """The precision asked is not one the package quantizes to.

    Cause: ``precision`` is not ``"int4"``, ``"int8"`` or ``"fp16"`` (the message lists
    them).

    Fix: give one of the supported precisions (``--precision`` on the command line)."""


class QuantizeOptionError(QuantizeError):
    """An option of the quantization is out of its range: a block size which is not a
    power of two of at least 16, an accuracy level outside 0..4, embeddings asked with
    a precision or an onnxruntime which cannot quantize them.

    Cause: the option has no kernel in onnxruntime (``MatMulNBits`` and
    ``GatherBlockQuantized`` take power-of-two blocks of 16 or more).

    Fix: use the value the message suggests (block size 32, 64 or 128; accuracy level 4
    on CPU, or None for the kernel's default)."""


class AlreadyQuantizedError(QuantizeError):
    """The model already holds quantized weights or quantization operators
    (``MatMulNBits``, ``QuantizeLinear``, ``DequantizeLinear``, ``MatMulInteger``...)
    and ``int4`` or ``int8`` was asked.

    Cause: quantizing twice would quantize the remaining float weights with another
    scheme and mix two precisions in one model, which is never what was meant.

    Fix: quantize the float model the exporter produced, not the quantized one."""


class NothingToQuantizeError(QuantizeError):
    """No ``MatMul`` of the model multiplies by a constant weight (an initializer),
    once the language model head is left aside.

    Cause: the weights are graph inputs, the model has no matrix multiplication, or its
    only one is the head kept in float (``quantize_lm_head=False``).

    Fix: export the model with its weights as initializers (the default of
    :func:`to_onnx <experimental_experiment.torch_interpreter.to_onnx>`), or pass
    ``quantize_lm_head=True`` (``--lm-head``) when the head is the only one."""


class MissingWeightsError(QuantizeError):
    """Some initializers of the model have no data in the ModelProto: their data is
    external and was not loaded (a weight-free export, ``onnx.load(...,
    load_external_data=False)``, a model container).

    Cause: the quantization reads every weight it rewrites; it does not open files the
    proto only names, so that nothing outside the model given is read.

    Fix: load the model with its data (``onnx.load(path)``, data files next to it; fill
    a weight-free export first with ``python -m experimental_experiment fill-weights``)
    or use ``python -m experimental_experiment quantize IN.onnx OUT.onnx``, which loads
    the data and saves the output with external data when it exceeds 2 GB."""


__all__ = [
    "AlreadyQuantizedError",
    "MissingWeightsError",
    "NothingToQuantizeError",
    "QuantizeError",
    "QuantizeOptionError",
    "UnsupportedPrecisionError",
]
