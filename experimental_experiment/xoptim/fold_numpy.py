"""Constant folding of the operators met most (Transpose of a weight, Unsqueeze,
Reshape, Range, arithmetic on shapes...) in numpy, as :mod:`onnx.reference` computes
them, without building a ReferenceEvaluator for each node (importing
:mod:`onnx.reference` alone costs about 0.2 s, once per process).
:func:`evaluate_numpy` returns None for any other operator or case, which the
reference evaluator then folds."""

from __future__ import annotations

from types import MappingProxyType
from typing import Any, Callable, Mapping

import numpy as np
from onnx import AttributeProto, NodeProto, numpy_helper

from ..xbuilder._arrays import contiguous

#: dtypes Range computes directly (the reference stashes float16, bfloat16 in float32)
_RANGE_TYPES = frozenset(
    np.dtype(t) for t in (np.int32, np.int64, np.int16, np.int8, np.float32, np.float64)
)


def _attributes(node: NodeProto) -> dict | None:
    atts = {}
    for a in node.attribute:
        if a.type == AttributeProto.INT:
            atts[a.name] = a.i
        elif a.type == AttributeProto.INTS:
            atts[a.name] = list(a.ints)
        elif a.type == AttributeProto.TENSOR:
            atts[a.name] = numpy_helper.to_array(a.t)
        else:
            return None  # not an attribute these operators take
    return atts


def _transpose(x, perm=None):
    if perm and len(perm) != x.ndim:
        return None
    return np.transpose(x) if not perm else np.transpose(x, axes=perm)


def _reshape(x, shape, allowzero=0):
    new_shape = np.copy(shape)
    if allowzero == 0:
        zeros = np.where(shape == 0)
        new_shape[zeros] = np.array(x.shape)[zeros]
    return np.reshape(x, new_shape)


def _range(start, limit, delta):
    if start.dtype not in _RANGE_TYPES:
        return None
    return np.arange(start.item(), limit.item(), delta.item()).astype(start.dtype)


def _constant_of_shape(shape, value=None):
    if value is None:
        return np.full(tuple(shape), np.array(0, dtype=np.float32))
    if value.size != 1:
        return None
    return np.full(tuple(shape), value.flat[0])


def _concat(*xs, axis=None):
    if axis is None or any(x.ndim == 0 or not -x.ndim <= axis < x.ndim for x in xs):
        return None
    return np.concatenate(xs, axis)


def _squeeze(x, axes=None):
    return np.squeeze(x) if axes is None else np.squeeze(x, axis=tuple(axes))


def _slice(x, starts, ends, axes=None, steps=None):
    """Slice as the ONNX specification clamps it (Python slices differ for negative
    steps: an end of -1 there means the last element, here one before the first)."""
    axes = range(len(starts)) if axes is None else [int(a) + (x.ndim if a < 0 else 0) for a in axes]
    steps = [1] * len(starts) if steps is None else steps
    if x.ndim == 0 or len(set(axes)) != len(starts) or any(not 0 <= a < x.ndim for a in axes):
        return None
    index = [slice(None)] * x.ndim
    for axis, start, end, step in zip(axes, starts.tolist(), ends.tolist(), list(steps)):
        dim, step = x.shape[axis], int(step)
        if step == 0:
            return None
        start, end = start + dim if start < 0 else start, end + dim if end < 0 else end
        if step > 0:
            index[axis] = slice(min(max(start, 0), dim), min(max(end, 0), dim), step)
        else:
            start, end = min(max(start, 0), dim - 1), min(max(end, -1), dim - 1)
            index[axis] = slice(start, None if end < 0 else end, step)
    return x[tuple(index)]


def _gather(x, indices, axis=0):
    return np.take(contiguous(x), contiguous(indices), axis=axis)


def _binary(fct):
    def kernel(x, y):
        if x.dtype != y.dtype:  # the reference evaluator raises, the node is kept
            return None
        res = np.asarray(fct(x, y))
        return res if res.dtype == x.dtype else None

    return kernel


def _div(x, y):
    if issubclass(x.dtype.type, np.integer):  # truncated toward zero, as C++
        q = np.floor_divide(x, y)
        r = np.remainder(x, y)
        return q + ((r != 0) & ((x < 0) ^ (y < 0))).astype(q.dtype)
    return np.divide(x, y)


#: operator -> (function of the inputs and attributes, smallest opset it implements)
_KERNELS: Mapping[str, tuple[Callable[..., Any], int]] = MappingProxyType(
    {
        "Transpose": (_transpose, 1),
        "Unsqueeze": (lambda x, axes: np.expand_dims(x, axis=tuple(axes)), 13),
        "Squeeze": (_squeeze, 13),
        "Reshape": (_reshape, 14),
        "Range": (_range, 11),
        "ConstantOfShape": (_constant_of_shape, 9),
        "Concat": (_concat, 4),
        "Identity": (lambda x: x, 1),
        "Gather": (_gather, 13),
        "Slice": (_slice, 13),
        "Add": (_binary(np.add), 14),
        "Sub": (_binary(np.subtract), 14),
        "Mul": (_binary(np.multiply), 14),
        "Div": (_binary(_div), 14),
    }
)


def evaluate_numpy(
    node: NodeProto, feeds: dict[str, np.ndarray], opset: int
) -> list[np.ndarray] | None:
    """The outputs of ``node`` (a one-element list) or None when it is not one of the
    operators computed here (the caller falls back to the reference evaluator).

    :param node: the node to evaluate (default domain)
    :param feeds: its inputs, ``{name: array}``
    :param opset: the opset of the default domain
    :return: a list with the single output, or None

    .. code-block:: python

        import numpy as np
        from onnx import helper
        from experimental_experiment.xoptim.fold_numpy import evaluate_numpy

        node = helper.make_node("Transpose", ["x"], ["y"], perm=[1, 0])
        (y,) = evaluate_numpy(node, {"x": np.zeros((2, 3), dtype=np.float32)}, 18)
        assert y.shape == (3, 2)
    """
    kernel = _KERNELS.get(node.op_type) if node.domain == "" else None
    if kernel is None or opset < kernel[1] or len(node.output) != 1:
        return None
    atts = _attributes(node)
    if atts is None:
        return None
    try:
        out = kernel[0](*(feeds[i] for i in node.input), **atts)
    except (TypeError, ValueError, IndexError):  # the reference evaluator decides
        return None
    return None if out is None else [out]
