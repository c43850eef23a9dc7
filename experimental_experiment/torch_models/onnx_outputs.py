"""The outputs of an exported model its user reads: without the ``<input>_updated``
values :func:`to_onnx <experimental_experiment.torch_interpreter.to_onnx>` appends for
the inputs a model changes in place."""

from __future__ import annotations

#: suffix of the outputs :func:`to_onnx` appends for inputs the model changes in place
MUTATION_SUFFIX = "_updated"


def user_outputs(sess, got: list) -> list:
    """The outputs of ``sess`` (onnxruntime) the model returns, without the new values
    of the inputs it changed in place (``<input>_updated``, appended last by
    :func:`to_onnx <experimental_experiment.torch_interpreter.to_onnx>`): hybrid
    decoders update their convolution and recurrent states in place and also return
    them in the cache."""
    names = [o.name for o in sess.get_outputs()]
    return [g for n, g in zip(names, got) if not n.endswith(MUTATION_SUFFIX)]


__all__ = ["MUTATION_SUFFIX", "user_outputs"]
