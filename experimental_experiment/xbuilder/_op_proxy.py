"""``g.op.<OnnxOp>(*inputs, **attributes)``: adds a node and returns its output name(s)."""

from __future__ import annotations

from typing import Any

import numpy as np
from onnx import TensorProto

from .dtypes import FLOAT_TYPES, onnx_to_np_dtype

# Operators whose inputs must all share one element type: a python scalar given to
# them takes the type of the first tensor input.
_SAME_TYPE_INPUTS = frozenset(
    "Add Sub Mul Div Pow Max Min Mod Equal Less Greater LessOrEqual GreaterOrEqual "
    "Where Sum Mean And Or Xor Clip PRelu BitwiseAnd BitwiseOr BitwiseXor".split()
)

#: branch types onnxruntime's Where has no CPU kernel for (the model is valid ONNX but
#: does not load), with the type the selection is made in (exact both ways; None: bool,
#: selected with And, Or and Not)
_WHERE_IN: dict[int, int | None] = {
    TensorProto.BOOL: None,
    TensorProto.INT16: TensorProto.INT32,
    TensorProto.UINT16: TensorProto.INT32,
    TensorProto.UINT64: TensorProto.INT64,  # a cast keeps the bits both ways
    TensorProto.BFLOAT16: TensorProto.FLOAT,
}


class OpProxy:
    """Gives access to ONNX operators as methods of a builder.

    ``g.op.Add(x, 1.0)`` adds a node ``Add`` whose second input is a constant of the
    same type as ``x``. Keyword ``outputs=n`` asks for several outputs, ``domain=`` sets
    the operator domain, ``name=`` a name prefix; every other keyword is an attribute.
    """

    def __init__(self, builder):
        self._builder = builder

    def __getattr__(self, op_type: str):
        if op_type.startswith("_"):
            raise AttributeError(op_type)

        def make(
            *inputs: Any,
            outputs: int | list[str] = 1,
            domain: str = "",
            name: str | None = None,
            **attributes: Any,
        ):
            names = self._inputs_to_names(op_type, inputs)
            if op_type == "Where" and not domain and len(names) == 3:
                branch = self._builder.get_type(names[1]) if self._builder.has_type(names[1]) else 0
                if branch in _WHERE_IN:
                    return self._where_in(names, branch, name)
            return self._builder.make_node(
                op_type, names, outputs, domain=domain, name=name, **attributes
            )

        make.__name__ = op_type
        return make

    def _where_in(self, names: list[str], branch: int, name: str | None) -> str:
        """``Where(c, x, y)`` for a branch type onnxruntime's Where lacks (``_WHERE_IN``)."""
        g, (c, x, y) = self._builder, names
        if _WHERE_IN[branch] is None:  # bool: (c and x) or (not c and y)
            return self.Or(self.And(c, x), self.And(self.Not(c), y), name=name)
        wide = _WHERE_IN[branch]
        picked = g.make_node(
            "Where", [c, self.Cast(x, to=wide), self.Cast(y, to=wide)], 1, name=name
        )
        return self.Cast(picked, to=branch)

    def _inputs_to_names(self, op_type: str, inputs) -> list[str]:
        g = self._builder
        like = 0
        if op_type in _SAME_TYPE_INPUTS:
            # Where: the condition (bool) does not give the type of the branches
            for i in inputs[1:] if op_type == "Where" else inputs:
                if isinstance(i, str) and i and g.has_type(i):
                    like = g.get_type(i)
                    break
        names = []
        for i in inputs:
            if i is None:
                names.append("")
            elif isinstance(i, str):
                names.append(i)
            else:
                names.append(g.make_constant(_to_array(i, like)))
        while names and not names[-1]:
            names.pop()  # trailing missing optional inputs are omitted (onnxruntime)
        return names


def _to_array(value: Any, like: int) -> np.ndarray:
    """Converts a python scalar, list or numpy value into an array."""
    if isinstance(value, np.ndarray):
        return value
    if isinstance(value, np.generic):
        return np.asarray(value)
    if isinstance(value, (list, tuple)):
        arr = np.asarray(value)
        if arr.dtype == np.float64:
            arr = arr.astype(np.float32)
        return arr if like == 0 else arr.astype(onnx_to_np_dtype(like))
    if isinstance(value, bool):
        return np.asarray(value, dtype=onnx_to_np_dtype(like) if like else np.bool_)
    if isinstance(value, (int, float)):
        if like:
            if isinstance(value, float) and like not in FLOAT_TYPES and like != TensorProto.BOOL:
                # a float scalar with an integer tensor keeps float semantics upstream
                return np.asarray(value, dtype=np.float32)
            return np.asarray(value, dtype=onnx_to_np_dtype(like))
        return np.asarray(value, dtype=np.int64 if isinstance(value, int) else np.float32)
    if hasattr(value, "__array__"):
        return np.asarray(value)
    raise TypeError(f"cannot turn {type(value).__name__} into an ONNX constant")
