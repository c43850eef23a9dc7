"""Runs an ONNX model on torch inputs: the runtime helpers the library itself uses.

It sits beside :mod:`experimental_experiment.torch_interpreter` (it may import torch,
onnx, onnxruntime, never the exporter nor the test helpers).

.. code-block:: python

    from experimental_experiment.runtime import flatten_tensors, run_onnx

    got = run_onnx(onx, flatten_tensors((x, {"mask": mask})))
"""

from __future__ import annotations

from typing import Sequence

import numpy as np
import onnx
import torch


def tensor_to_numpy(t: torch.Tensor) -> np.ndarray:
    """Numpy copy of a tensor; bfloat16 becomes ml_dtypes.bfloat16."""
    t = t.detach().cpu()
    if t.dtype == torch.bfloat16:
        import ml_dtypes

        return t.view(torch.int16).numpy().view(ml_dtypes.bfloat16)
    return t.numpy()


def flatten_tensors(value) -> list[torch.Tensor]:
    """Tensors of a nested structure, in pytree order."""
    leaves, _ = torch.utils._pytree.tree_flatten(value)
    return [t for t in leaves if isinstance(t, torch.Tensor)]


def run_onnx(onx: onnx.ModelProto, inputs: Sequence[torch.Tensor], *,
             use_reference: bool = False) -> list[np.ndarray]:
    """Runs the model with onnxruntime (or onnx's reference evaluator) on CPU.

    :param onx: the model
    :param inputs: one tensor per graph input, in order
    :param use_reference: run :class:`onnx.reference.ReferenceEvaluator` instead
    :return: the outputs as numpy arrays
    """
    names = [i.name for i in onx.graph.input]
    if len(names) != len(inputs):
        raise ValueError(f"the model has {len(names)} inputs, {len(inputs)} were given")
    feeds = {n: tensor_to_numpy(t) for n, t in zip(names, inputs)}
    if use_reference:
        from onnx.reference import ReferenceEvaluator

        return ReferenceEvaluator(onx).run(None, feeds)
    import onnxruntime

    sess = onnxruntime.InferenceSession(
        onx.SerializeToString(), providers=["CPUExecutionProvider"]
    )
    return sess.run(None, feeds)


__all__ = ["flatten_tensors", "run_onnx", "tensor_to_numpy"]
