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
    (:func:`to_onnx <experimental_experiment.torch_interpreter.to_onnx>` included).

    Cause: raised as such only for an inconsistent FX graph (no output node); every
    other failure raises one of its subclasses, which says more.

    Fix: ``except ExportError`` catches every error of the package; for a graph
    without output, export the model through :func:`torch.export.export` first."""


class ConstrainedDimensionWarning(UserWarning):
    """A dimension declared dynamic that the model's code bounded during the capture
    (``seq <= 3`` after a branch on the sequence length): the exported model is valid
    only inside that range. The message names the input, the range and the guard.

    Cause: a python branch or a check on a size, evaluated at the example size, added
    a guard torch keeps; the ONNX model does not check it and silently computes the
    branch taken at the example size.

    Fix: export with example sizes inside the range the model should serve, or write
    the branch with :func:`torch.cond` (:ref:`l-plot-exporter-recipes-custom-cond`);
    a limit of the model itself (a table of positions) needs nothing."""


__all__ = ["ConstrainedDimensionWarning", "ExportError"]
