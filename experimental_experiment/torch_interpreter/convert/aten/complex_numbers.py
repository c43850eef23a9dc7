"""Complex tensors, converted as real tensors with a trailing dimension 2 (real, imag).

ONNX has complex element types but onnxruntime runs almost no operator on them, so a
complex tensor of shape ``(..., n)`` is carried as a float tensor of shape
``(..., n, 2)``, what ``torch.view_as_real`` returns (complex64 -> float32, complex128
-> float64). The interpreter stamps that representation on every complex value, and
the model's complex inputs and outputs cross the boundary the same way, named with the
suffix ``_real_imag`` (see :func:`to_onnx
<experimental_experiment.torch_interpreter.to_onnx>`).

Every converter of this file is registered for the variant ``"complex"`` of its
operator (the registry picks it when the node reads or produces a complex tensor):

* an arithmetic converter (``mul``, ``matmul``, ``polar``, ``abs``...),
* a layout operator (``reshape``, ``transpose``, ``cat``...): its plain converter
  called with its arguments rewritten for the extra axis (negative dims, target shapes)
  and its node context (``ctx``) describing the real pairs.

Converters already written for pairs (FFTs, ``view_as_real``, copies) register their
complex variant where they are (``aten/fft.py``, ``aten/conversion.py``). An operator
without a complex variant fails with a typed error naming it.
"""

from __future__ import annotations

from types import MappingProxyType

import numpy as np
import torch
from onnx import TensorProto

from ....xbuilder import GraphBuilder
from ...errors import UnsupportedOpError
from ..node_context import NodeContext
from ..pairs import PAIR_DTYPE, PAIR_TYPE
from ..pairs import is_complex_value as _is_complex_val
from ..registry import COMPLEX, DEFAULT_REGISTRY, call_converter, converter
from ._helpers import aten, cast_to

_I64 = np.int64
_NP = MappingProxyType({TensorProto.FLOAT: np.float32, TensorProto.DOUBLE: np.float64})


class _PairView(NodeContext):
    """The node context as a converter written for real tensors must see it: complex
    outputs are real tensors with one more trailing dimension 2."""

    def __init__(self, ctx: NodeContext):
        super().__init__(ctx.node, ctx.namer, ctx.interpreter)
        self._ctx = ctx

    def _complex(self, i: int) -> bool:
        val = self.val
        val = val[i] if isinstance(val, (list, tuple)) else val
        return _is_complex_val(val)

    def torch_dtype(self, i: int = 0) -> torch.dtype:
        dtype = self._ctx.torch_dtype(i)
        return PAIR_DTYPE.get(dtype, dtype)

    def dtype(self, i: int = 0) -> int:
        return PAIR_TYPE.get(self._ctx.torch_dtype(i), self._ctx.dtype(i))

    def shape(self, i: int = 0) -> tuple:
        shape = self._ctx.shape(i)
        return (*shape, 2) if self._complex(i) else shape


# layout operators: how their arguments change for the trailing axis


def _norm(d, rank: int):
    if isinstance(d, (list, tuple)):
        return [x % rank for x in d]
    return d % rank if isinstance(d, int) else d


def _with_pair_axis(values: list) -> list:
    return [*values, 2]


_DIM_ARGS = (
    "dim",
    "dims",
    "start_dim",
    "end_dim",
    "dim0",
    "dim1",
    "source",
    "destination",
    "shifts_dims",
)
#: op -> how its arguments change: "dims" (negative dims made positive), "dims+1"
#: (same on the output rank), "size" (target shape gets the axis 2), "perm", "repeat",
#: "reduce" (dims, None meaning all of them), "same" (nothing to change)
_LAYOUT = MappingProxyType(
    {
        aten.flatten.using_ints: "dims",
        aten.unflatten.int: "dims",
        aten.transpose.int: "dims",
        aten.swapaxes.default: "dims",
        aten.movedim.int: "dims",
        aten.movedim.intlist: "dims",
        aten.squeeze.dim: "dims",
        aten.squeeze.dims: "dims",
        aten.squeeze.default: "same",
        aten.slice.Tensor: "dims",
        aten.select.int: "dims",
        aten.narrow.default: "dims",
        aten.cat.default: "dims",
        aten.split.Tensor: "dims",
        aten.split_with_sizes.default: "dims",
        aten.chunk.default: "dims",
        aten.unbind.int: "dims",
        aten.flip.default: "dims",
        aten.roll.default: "dims",
        aten.index_select.default: "dims",
        aten.unsqueeze.default: "dims+1",
        aten.stack.default: "dims+1",
        aten.view.default: "size",
        aten.reshape.default: "size",
        aten.view_copy.default: "size",
        aten._unsafe_view.default: "size",
        aten.expand.default: "size",
        aten.expand_copy.default: "size",
        aten.permute.default: "perm",
        aten.permute_copy.default: "perm",
        aten.repeat.default: "repeat",
        aten.sum.dim_IntList: "reduce",
        aten.mean.dim: "reduce",
        aten.zeros_like.default: "same",
        aten.clone.default: "same",
        aten.alias.default: "same",
        aten.detach.default: "same",
        aten.contiguous.default: "same",
        aten.lift_fresh_copy.default: "same",
        aten._assert_tensor_metadata.default: "same",
    }
)


def _complex_rank(node: torch.fx.Node) -> int:
    """Rank of the first complex tensor the node reads (or of its output)."""
    for arg in torch.fx.node.map_aggregate(node.args, lambda a: a):
        vals = [arg] if not isinstance(arg, (list, tuple)) else arg
        for a in vals:
            val = a.meta.get("val") if isinstance(a, torch.fx.Node) else None
            if _is_complex_val(val):
                return val.dim()
    val = node.meta.get("val")
    return (val[0] if isinstance(val, (list, tuple)) else val).dim()


def _adapt(kind: str, node: torch.fx.Node, args: tuple, kwargs: dict):
    """The arguments of a layout operator, rewritten for the real pairs."""
    schema = node.target._schema.arguments
    bound = dict(zip([a.name for a in schema], args))
    bound.update(kwargs)
    rank = _complex_rank(node)
    if kind in ("dims", "dims+1", "reduce"):
        r = rank + 1 if kind == "dims+1" else rank
        for name in _DIM_ARGS:
            if name in bound:
                bound[name] = _norm(bound[name], r)
        if kind == "reduce" and not bound.get("dim"):
            bound["dim"] = list(range(rank))
    elif kind == "size":
        key = "size" if "size" in bound else "shape"
        bound[key] = _with_pair_axis(list(bound[key]))
    elif kind == "perm":
        bound["dims"] = [*_norm(list(bound["dims"]), rank), rank]
    elif kind == "repeat":
        bound["repeats"] = [*bound["repeats"], 1]
    n = len(args)
    names = [a.name for a in schema]
    new_args = tuple(bound[names[i]] for i in range(n))
    new_kwargs = {k: bound[k] for k in kwargs}
    if kind == "reduce" and "dim" not in names[:n] and "dim" not in kwargs:
        new_kwargs["dim"] = bound["dim"]
    return new_args, new_kwargs


def _layout_converter(op, kind: str):
    """The complex variant of layout operator ``op``: its plain converter (found when
    the node is converted, in the interpreter's registry) on the real pairs."""

    def convert(g: GraphBuilder, *args, ctx: NodeContext, **kwargs):
        interpreter = getattr(ctx, "interpreter", None)
        registry = getattr(interpreter, "registry", DEFAULT_REGISTRY)
        fn = registry.find(op, g.main_opset)
        if fn is None:
            raise UnsupportedOpError(
                f"no converter of {op} for complex tensors: the operator has no converter at all",
                op=op,
            )
        if kind != "same":
            args, kwargs = _adapt(kind, ctx.node, args, kwargs)
        return call_converter(fn, g, args, kwargs, _PairView(ctx))

    convert.__name__ = f"complex_{op.__name__.replace('.', '_')}"
    convert.__qualname__ = convert.__name__
    return convert


for _op, _kind in _LAYOUT.items():
    converter(_op, variant=COMPLEX)(_layout_converter(_op, _kind))


# arithmetic


def _pair_type(g: GraphBuilder, *, ctx: NodeContext) -> int:
    """Element type of the pairs of the current node (its complex output or input)."""
    for i in range(8):
        try:
            dtype = ctx.torch_dtype(i)
        except (IndexError, TypeError, AttributeError):
            break
        if dtype in PAIR_TYPE:
            return PAIR_TYPE[dtype]
        if not isinstance(ctx.val, (list, tuple)):
            break
    for n in ctx.node.all_input_nodes:
        val = n.meta.get("val")
        if _is_complex_val(val):
            return PAIR_TYPE[val.dtype]
    return TensorProto.FLOAT


def _arg_is_complex(g: GraphBuilder, i: int, *, ctx: NodeContext) -> bool:
    arg = ctx.node.args[i] if i < len(ctx.node.args) else None
    if isinstance(arg, torch.fx.Node):
        return _is_complex_val(arg.meta.get("val"))
    return isinstance(arg, complex)


def _const(g: GraphBuilder, value, elem_type: int) -> str:
    return g.make_constant(np.asarray(value, dtype=_NP[elem_type]))


def as_pair(g: GraphBuilder, x, is_complex: bool, elem_type: int) -> str:
    """``x`` as real pairs: a complex value as it is, a real one with imag 0."""
    if not isinstance(x, str):
        x = complex(x)
        return _const(g, [x.real, x.imag], elem_type)
    x = cast_to(g, x, elem_type)
    if is_complex:
        return x
    real = g.op.Unsqueeze(x, np.array([-1], _I64))
    return g.op.Concat(real, g.op.Mul(real, _const(g, 0, elem_type)), axis=-1)


def parts(g: GraphBuilder, z: str) -> tuple[str, str]:
    """(real, imag) of pairs, each keeping a trailing axis of size 1."""
    return tuple(g.op.Split(z, np.array([1, 1], _I64), axis=-1, outputs=2))


def _join(g: GraphBuilder, re: str, im: str) -> str:
    return g.op.Concat(re, im, axis=-1)


def _operands(g: GraphBuilder, x, y, *, ctx: NodeContext):
    t = _pair_type(g, ctx=ctx)
    return (
        as_pair(g, x, _arg_is_complex(g, 0, ctx=ctx), t),
        as_pair(g, y, _arg_is_complex(g, 1, ctx=ctx), t),
        t,
    )


def _real_times_pair(g: GraphBuilder, real, pair: str, t: int) -> str:
    if isinstance(real, str):
        return g.op.Mul(g.op.Unsqueeze(cast_to(g, real, t), np.array([-1], _I64)), pair)
    return g.op.Mul(pair, _const(g, real, t))


def aten_complex_mul(g: GraphBuilder, x, y, *, ctx: NodeContext):
    """mul.Tensor(Tensor self, Tensor other) on complex values:
    (a + ib)(c + id) = (ac - bd) + i(ad + bc)"""
    cx, cy = _arg_is_complex(g, 0, ctx=ctx), _arg_is_complex(g, 1, ctx=ctx)
    t = _pair_type(g, ctx=ctx)
    if not cy:
        return _real_times_pair(g, y, as_pair(g, x, True, t), t)
    if not cx:
        return _real_times_pair(g, x, as_pair(g, y, True, t), t)
    a, b = parts(g, as_pair(g, x, True, t))
    c, d = parts(g, as_pair(g, y, True, t))
    return _join(
        g, g.op.Sub(g.op.Mul(a, c), g.op.Mul(b, d)), g.op.Add(g.op.Mul(a, d), g.op.Mul(b, c))
    )


def aten_complex_div(g: GraphBuilder, x, y, *, ctx: NodeContext):
    """div.Tensor(Tensor self, Tensor other) on complex values: x * conj(y) / |y|^2"""
    t = _pair_type(g, ctx=ctx)
    if not _arg_is_complex(g, 1, ctx=ctx):
        y = cast_to(g, y, t) if isinstance(y, str) else y
        inv = g.op.Reciprocal(y) if isinstance(y, str) else 1.0 / y
        return _real_times_pair(g, inv, as_pair(g, x, _arg_is_complex(g, 0, ctx=ctx), t), t)
    px, py, t = _operands(g, x, y, ctx=ctx)
    a, b = parts(g, px)
    c, d = parts(g, py)
    den = g.op.Add(g.op.Mul(c, c), g.op.Mul(d, d))
    re = g.op.Div(g.op.Add(g.op.Mul(a, c), g.op.Mul(b, d)), den)
    im = g.op.Div(g.op.Sub(g.op.Mul(b, c), g.op.Mul(a, d)), den)
    return _join(g, re, im)


def aten_complex_add(g: GraphBuilder, x, y, *, alpha=1, ctx: NodeContext):
    """add.Tensor(Tensor self, Tensor other, *, Scalar alpha=1) on complex values"""
    px, py, t = _operands(g, x, y, ctx=ctx)
    if alpha != 1:
        py = g.op.Mul(py, _const(g, alpha, t))
    return g.op.Add(px, py)


def aten_complex_sub(g: GraphBuilder, x, y, *, alpha=1, ctx: NodeContext):
    """sub.Tensor(Tensor self, Tensor other, *, Scalar alpha=1) on complex values"""
    px, py, t = _operands(g, x, y, ctx=ctx)
    if alpha != 1:
        py = g.op.Mul(py, _const(g, alpha, t))
    return g.op.Sub(px, py)


def aten_complex_neg(g: GraphBuilder, x):
    """neg(Tensor self) -> Tensor"""
    return g.op.Neg(x)


def aten_polar(g: GraphBuilder, abs_, angle, *, ctx: NodeContext):
    """polar(Tensor abs, Tensor angle) -> Tensor: abs * (cos(angle) + i sin(angle))"""
    t = _pair_type(g, ctx=ctx)
    r = g.op.Unsqueeze(cast_to(g, abs_, t), np.array([-1], _I64))
    a = g.op.Unsqueeze(cast_to(g, angle, t), np.array([-1], _I64))
    return _join(g, g.op.Mul(r, g.op.Cos(a)), g.op.Mul(r, g.op.Sin(a)))


def aten_complex_abs(g: GraphBuilder, z):
    """abs(Tensor self) -> Tensor: |z| as a real tensor"""
    return g.op.Sqrt(g.op.ReduceSum(g.op.Mul(z, z), np.array([-1], _I64), keepdims=0))


def aten_complex_angle(g: GraphBuilder, z, *, ctx: NodeContext):
    """angle(Tensor self) -> Tensor: atan2(imag, real) as a real tensor"""
    from .elementwise_extra import aten_atan2

    re, im = parts(g, z)
    axis = np.array([-1], _I64)
    return aten_atan2(g, g.op.Squeeze(im, axis), g.op.Squeeze(re, axis), ctx=ctx)


def aten_complex_exp(g: GraphBuilder, z):
    """exp(Tensor self) -> Tensor: exp(a) (cos b + i sin b)"""
    a, b = parts(g, z)
    e = g.op.Exp(a)
    return _join(g, g.op.Mul(e, g.op.Cos(b)), g.op.Mul(e, g.op.Sin(b)))


def aten_complex_ones_like(g: GraphBuilder, x, *, ctx: NodeContext, **kwargs):
    """ones_like(Tensor self, ...) -> Tensor with a complex dtype: (1, 0) pairs"""
    t = _pair_type(g, ctx=ctx)
    shape = g.op.Shape(x)
    if _arg_is_complex(g, 0, ctx=ctx):
        shape = g.op.Slice(shape, np.array([0], _I64), np.array([-1], _I64))
    one = g.op.Expand(_const(g, [1, 0], t), g.op.Concat(shape, np.array([2], _I64), axis=0))
    return one


def aten_complex_matmul(g: GraphBuilder, x, y, *, ctx: NodeContext):
    """matmul(Tensor self, Tensor other) (mm, bmm) on complex values:
    (A + iB)(C + iD) = (AC - BD) + i(AD + BC), four real MatMul"""
    t = _pair_type(g, ctx=ctx)
    axis = np.array([-1], _I64)

    def real_imag(v, is_complex):
        if not is_complex:
            return cast_to(g, v, t), None
        re, im = parts(g, v)
        return g.op.Squeeze(re, axis), g.op.Squeeze(im, axis)

    a, b = real_imag(x, _arg_is_complex(g, 0, ctx=ctx))
    c, d = real_imag(y, _arg_is_complex(g, 1, ctx=ctx))
    re = (
        g.op.MatMul(a, c)
        if b is None or d is None
        else g.op.Sub(g.op.MatMul(a, c), g.op.MatMul(b, d))
    )
    terms = [g.op.MatMul(a, d)] if d is not None else []
    terms += [g.op.MatMul(b, c)] if b is not None else []
    im = terms[0] if len(terms) == 1 else g.op.Add(*terms)
    return _join(g, g.op.Unsqueeze(re, axis), g.op.Unsqueeze(im, axis))


def aten_complex_t(g: GraphBuilder, x, *, ctx: NodeContext):
    """numpy_T(Tensor(a) self) -> Tensor(a) (t for 2-D): the logical axes reversed"""
    r = _complex_rank(ctx.node)
    return g.op.Transpose(x, perm=[*reversed(range(r)), r])


_ARITHMETIC = MappingProxyType(
    {
        aten.numpy_T.default: aten_complex_t,
        aten.t.default: aten_complex_t,
        aten.matmul.default: aten_complex_matmul,
        aten.mm.default: aten_complex_matmul,
        aten.bmm.default: aten_complex_matmul,
        aten.mul.Tensor: aten_complex_mul,
        aten.mul.Scalar: aten_complex_mul,
        aten.div.Tensor: aten_complex_div,
        aten.div.Scalar: aten_complex_div,
        aten.add.Tensor: aten_complex_add,
        aten.sub.Tensor: aten_complex_sub,
        aten.add.Scalar: aten_complex_add,
        aten.sub.Scalar: aten_complex_sub,
        aten.neg.default: aten_complex_neg,
        aten.polar.default: aten_polar,
        aten.abs.default: aten_complex_abs,
        aten.angle.default: aten_complex_angle,
        aten.exp.default: aten_complex_exp,
        aten.ones_like.default: aten_complex_ones_like,
    }
)

for _op, _fn in _ARITHMETIC.items():
    converter(_op, variant=COMPLEX)(_fn)
