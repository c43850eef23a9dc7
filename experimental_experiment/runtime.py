"""Runs an ONNX model on torch inputs: the runtime helpers the library itself uses.

It sits beside :mod:`experimental_experiment.torch_interpreter` (it may import torch,
onnx, onnxruntime, never the exporter nor the test helpers).

.. code-block:: python

    from experimental_experiment.runtime import flatten_tensors, run_onnx

    got = run_onnx(onx, flatten_tensors((x, {"mask": mask})))
"""

from __future__ import annotations

import copy
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


def run_onnx(
    onx: onnx.ModelProto, inputs: Sequence[torch.Tensor], *, use_reference: bool = False
) -> list[np.ndarray]:
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

    bf16 = onnx.TensorProto.BFLOAT16
    if any(_elem_type(v) == bf16 for v in [*onx.graph.input, *onx.graph.output]):
        # onnxruntime's python API takes no bfloat16 numpy array: float32 at the edges
        onx = _bfloat16_edges_as_float(onx)
        feeds = {
            (f"{k}__f32" if v.dtype.name == "bfloat16" else k): (
                v.astype(np.float32) if v.dtype.name == "bfloat16" else v
            )
            for k, v in feeds.items()
        }
        sess = onnxruntime.InferenceSession(
            onx.SerializeToString(), providers=["CPUExecutionProvider"]
        )
        got = sess.run(None, feeds)
        import ml_dtypes

        return [
            g.astype(ml_dtypes.bfloat16) if o.doc_string == "bfloat16" else g
            for g, o in zip(got, onx.graph.output)
        ]
    sess = onnxruntime.InferenceSession(onx.SerializeToString(), providers=["CPUExecutionProvider"])
    return sess.run(None, feeds)


def _elem_type(value: onnx.ValueInfoProto) -> int:
    return value.type.tensor_type.elem_type


def _bfloat16_edges_as_float(onx: onnx.ModelProto) -> onnx.ModelProto:
    """A copy of the model whose bfloat16 inputs and outputs are float32 (casts inside,
    exact both ways for bfloat16 values); such outputs get the doc string ``bfloat16``."""
    from onnx import helper as oh

    bf16, f32 = onnx.TensorProto.BFLOAT16, onnx.TensorProto.FLOAT
    onx = copy.deepcopy(onx)
    graph = onx.graph
    first, last = [], []
    for v in graph.input:
        if _elem_type(v) == bf16:
            first.append(oh.make_node("Cast", [f"{v.name}__f32"], [v.name], to=bf16))
            v.name = f"{v.name}__f32"
            v.type.tensor_type.elem_type = f32
    for v in graph.output:
        if _elem_type(v) == bf16:
            last.append(oh.make_node("Cast", [v.name], [f"{v.name}__f32"], to=f32))
            v.name = f"{v.name}__f32"
            v.type.tensor_type.elem_type = f32
            v.doc_string = "bfloat16"
    nodes = first + list(graph.node) + last
    del graph.node[:]
    graph.node.extend(nodes)
    return onx


__all__ = ["flatten_tensors", "run_onnx", "tensor_to_numpy"]
