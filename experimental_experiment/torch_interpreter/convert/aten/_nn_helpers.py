"""Helpers shared by the neural-network converters (activations, norms, conv, attention)."""

from __future__ import annotations

from onnx import TensorProto

from ....xbuilder import GraphBuilder
from ....xbuilder.dtypes import i64
from ...errors import UnsupportedOpError
from ._helpers import INT64, cast_to

FLOAT = TensorProto.FLOAT
HALF_TYPES = frozenset({TensorProto.FLOAT16, TensorProto.BFLOAT16})


def compute_type(g: GraphBuilder, x: str) -> int:
    """Type torch computes in for ``x``: float32 for float16/bfloat16 (opmath)."""
    t = g.get_type(x)
    return FLOAT if t in HALF_TYPES else t


def upcast(g: GraphBuilder, x: str) -> str:
    """``x`` cast to float32 when it is float16 or bfloat16."""
    return cast_to(g, x, compute_type(g, x))


def expand_param(value, n: int, name: str = "parameter") -> list:
    """An int or a list of length 1 or n repeated to a list of n values."""
    if isinstance(value, (int, str)):
        return [value] * n
    value = list(value)
    if len(value) == 1:
        return value * n
    if len(value) != n:
        raise ValueError(f"{name}={value} does not match {n} spatial dimension(s)")
    return value


def static_ints(values, what: str) -> list[int]:
    """Refuses dynamic (SymInt) values where ONNX needs attributes."""
    if any(not isinstance(v, int) for v in values):
        raise UnsupportedOpError(
            f"{what}={values} must be static integers (ONNX attribute)", argument=what
        )
    return [int(v) for v in values]


def dim(g: GraphBuilder, x: str, axis: int) -> int | str:
    """Dimension ``axis`` of ``x``: an int when static, else a 1-D int64 tensor name."""
    shape = g.get_shape(x)
    if shape is not None and isinstance(shape[axis], int):
        return shape[axis]
    rank = g.get_rank(x)
    axis = axis % rank
    return g.op.Shape(x, start=axis, end=axis + 1)


def dims_tensor(g: GraphBuilder, dims) -> str:
    """1-D int64 tensor from ints and 1-D int64 tensor names (as :func:`dim` returns)."""
    if all(isinstance(d, int) for d in dims):
        return g.make_constant(i64(dims))
    parts = [
        g.make_constant(i64([d])) if isinstance(d, int) else cast_to(g, d, INT64) for d in dims
    ]
    return g.op.Concat(*parts, axis=0)


def unsqueeze_batch(g: GraphBuilder, x: str, spatial: int) -> tuple[str, bool]:
    """Adds a batch dimension to an unbatched input (rank spatial + 1)."""
    if g.get_rank(x) == spatial + 1:
        return g.op.Unsqueeze(x, i64([0])), True
    return x, False


def squeeze_batch(g: GraphBuilder, y: str, added: bool) -> str:
    return g.op.Squeeze(y, i64([0])) if added else y


def channel_shaped(g: GraphBuilder, v: str, rank: int) -> str:
    """Reshapes a per-channel vector [C] into [C, 1, ..., 1] to broadcast on axis 1."""
    if rank <= 2:
        return v
    return g.op.Reshape(v, i64([-1] + [1] * (rank - 2)))
