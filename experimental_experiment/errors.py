"""The base class of every error the package raises on purpose.

It lives at the bottom of the layers (no torch import) so that the builder, the
optimizer and the exporter all derive their errors from it:
:class:`experimental_experiment.xbuilder.GraphBuilderError`,
:class:`experimental_experiment.xoptim.passes.PassError`, and the errors of
:mod:`experimental_experiment.torch_interpreter.errors` (``InvalidArgumentError``,
``CaptureError``, ``UnsupportedOpError``, ``ConversionError``).

.. code-block:: python

    from experimental_experiment.errors import ExportError

    try:
        onx = to_onnx(model, (x,))
    except ExportError as e:
        print(e)
"""


class ExportError(RuntimeError):
    """Base class of every error raised by the package on purpose
    (:func:`experimental_experiment.torch_interpreter.to_onnx` included)."""


class ConstrainedDimensionWarning(UserWarning):
    """A dimension declared dynamic that the model's code bounded during the capture
    (``seq <= 3`` after a branch on the sequence length): the exported model is valid
    only inside that range. The message names the input, the range and the guard."""


__all__ = ["ConstrainedDimensionWarning", "ExportError"]
