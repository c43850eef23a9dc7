"""First stage of the exporter: the user's inputs and the capture.

Checks the arguments and the dynamic shapes, captures the model with
``torch.export.export`` (size-oblivious first, on a fresh stack), rewrites in-place
operators, falls back to decompositions or Python implementations of custom ops where no
converter exists, and records the shape guards with the user's source lines.

It may import the bottom modules of :mod:`experimental_experiment.torch_interpreter`
(errors, options, report recording, patches) and ask
``torch_interpreter.convert.registry`` whether an operator has a converter; nothing else
from ``convert`` or ``result``.
"""
