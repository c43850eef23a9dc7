"""Dtype and shape rules for the ONNX operators the converters emit.

A rule receives the builder and the node just added and stamps what it can infer on
the node's outputs: element type always when possible, shape (ints, strings for
symbolic dims, None for an unknown dim) or only the rank otherwise.
"""

from __future__ import annotations

from types import MappingProxyType
from typing import Callable, Mapping

import numpy as np
from onnx import NodeProto, TensorProto

from .graph_utils import attribute_value, constant_ints

Shape = tuple  # of int | str | None

_SAME_TYPE_UNARY = frozenset(
    """Abs Neg Relu Sigmoid Tanh Exp Log Sqrt Reciprocal Erf Sin Cos Tan Asin Acos Atan
    Sinh Cosh Asinh Acosh Atanh Floor Ceil Round Sign Softplus Softsign Elu LeakyRelu
    HardSigmoid HardSwish Selu Celu Mish Gelu FastGelu Identity Softmax LogSoftmax Not
    Dropout ThresholdedRelu Shrink PRelu Trilu CumSum LRN BitwiseNot
    InstanceNormalization MeanVarianceNormalization QuickGelu""".split()
)
_BROADCAST_SAME_TYPE = frozenset(
    "Add Sub Mul Div Pow Max Min Mod And Or Xor BitShift Sum Mean BitwiseAnd BitwiseOr "
    "BitwiseXor".split()
)
_COMPARE = frozenset("Equal Less Greater LessOrEqual GreaterOrEqual".split())
_REDUCE = frozenset(
    "ReduceSum ReduceMean ReduceMax ReduceMin ReduceProd ReduceL1 ReduceL2 "
    "ReduceLogSum ReduceLogSumExp ReduceSumSquare".split()
)


_attr = attribute_value


def broadcast_shapes(*shapes: Shape) -> Shape | None:
    """Numpy broadcasting on shapes holding ints, strings or None."""
    if any(s is None for s in shapes):
        return None
    rank = max(len(s) for s in shapes)
    padded = [(1,) * (rank - len(s)) + tuple(s) for s in shapes]
    out = []
    for dims in zip(*padded):
        not_one = [d for d in dims if d != 1]
        if not not_one:
            out.append(1)
        elif all(d == not_one[0] for d in not_one):
            out.append(not_one[0])
        else:
            ints = [d for d in not_one if isinstance(d, int)]
            out.append(ints[0] if ints else None)
    return tuple(out)


def _set(g, name: str, elem_type: int, shape=None, rank=None):
    if not name:
        return
    if elem_type:
        g.set_type(name, elem_type)
    if shape is not None:
        g.set_shape(name, tuple(shape))
    elif rank is not None:
        g.set_rank(name, rank)


def _rule_unary(g, node):
    x = node.input[0]
    _set(g, node.output[0], g.get_type(x), g.get_shape(x), g.get_rank(x))


def _rule_broadcast(g, node, elem_type=None):
    ins = [i for i in node.input if i]
    t = elem_type if elem_type is not None else g.get_type(ins[0])
    shapes = [g.get_shape(i) for i in ins]
    shape = broadcast_shapes(*shapes)
    ranks = [g.get_rank(i) for i in ins]
    rank = None if None in ranks else max(ranks)
    _set(g, node.output[0], t, shape, rank)


def _rule_where(g, node):
    shape = broadcast_shapes(*[g.get_shape(i) for i in node.input])
    ranks = [g.get_rank(i) for i in node.input]
    rank = None if None in ranks else max(ranks)
    _set(g, node.output[0], g.get_type(node.input[1]) or g.get_type(node.input[2]), shape, rank)


def _rule_cast(g, node):
    x = node.input[0]
    _set(g, node.output[0], _attr(node, "to"), g.get_shape(x), g.get_rank(x))


def _rule_castlike(g, node):
    x = node.input[0]
    _set(g, node.output[0], g.get_type(node.input[1]), g.get_shape(x), g.get_rank(x))


def _rule_shape(g, node):
    rank = g.get_rank(node.input[0])
    if rank is None:
        _set(g, node.output[0], TensorProto.INT64, rank=1)
        return
    start = _attr(node, "start", 0)
    end = _attr(node, "end", rank)
    n = len(range(rank)[slice(start, end)])
    _set(g, node.output[0], TensorProto.INT64, (n,))


def _const_list(g, name: str):
    return constant_ints(g, name, None)


def _rule_reshape(g, node):
    x, out = node.input[0], node.output[0]
    target = _const_list(g, node.input[1])
    t = g.get_type(x)
    if target is None:
        shape = g.get_shape(node.input[1])
        _set(g, out, t, rank=shape[0] if shape and isinstance(shape[0], int) else None)
        return
    in_shape = g.get_shape(x)
    new = []
    for i, d in enumerate(target):
        if d == 0 and not _attr(node, "allowzero", 0):
            new.append(in_shape[i] if in_shape is not None else None)
        else:
            new.append(d)
    if -1 in new:
        known = [d for d in new if d != -1]
        if in_shape is not None and all(isinstance(d, int) for d in in_shape + tuple(known)):
            total = int(np.prod(in_shape)) if in_shape else 1
            div = int(np.prod(known)) if known else 1
            new[new.index(-1)] = total // div if div else 0
        else:
            new[new.index(-1)] = None
    _set(g, out, t, tuple(new))


def _rule_transpose(g, node):
    x = node.input[0]
    shape = g.get_shape(x)
    perm = _attr(node, "perm")
    if shape is not None:
        perm = perm or list(reversed(range(len(shape))))
        _set(g, node.output[0], g.get_type(x), tuple(shape[p] for p in perm))
    else:
        _set(g, node.output[0], g.get_type(x), rank=g.get_rank(x))


def _rule_unsqueeze(g, node):
    x = node.input[0]
    axes = _const_list(g, node.input[1]) if len(node.input) > 1 else _attr(node, "axes")
    rank = g.get_rank(x)
    if axes is None or rank is None:
        _set(g, node.output[0], g.get_type(x))
        return
    new_rank = rank + len(axes)
    axes = sorted(a % new_rank for a in axes)
    shape = g.get_shape(x)
    if shape is None:
        _set(g, node.output[0], g.get_type(x), rank=new_rank)
        return
    it = iter(shape)
    _set(g, node.output[0], g.get_type(x), [1 if i in axes else next(it) for i in range(new_rank)])


def _rule_squeeze(g, node):
    x = node.input[0]
    shape = g.get_shape(x)
    axes = _const_list(g, node.input[1]) if len(node.input) > 1 else None
    if shape is None:
        rank = g.get_rank(x)
        if rank is not None and axes is not None:
            _set(g, node.output[0], g.get_type(x), rank=rank - len(axes))
        else:
            _set(g, node.output[0], g.get_type(x))
        return
    if axes is None:
        if all(isinstance(d, int) for d in shape):
            _set(g, node.output[0], g.get_type(x), [d for d in shape if d != 1])
        else:
            _set(g, node.output[0], g.get_type(x))
        return
    axes = {a % len(shape) for a in axes}
    _set(g, node.output[0], g.get_type(x), [d for i, d in enumerate(shape) if i not in axes])


def _rule_concat(g, node):
    ins = [i for i in node.input if i]
    t = g.get_type(ins[0])
    shapes = [g.get_shape(i) for i in ins]
    if any(s is None for s in shapes):
        _set(g, node.output[0], t, rank=g.get_rank(ins[0]))
        return
    axis = _attr(node, "axis") % len(shapes[0])
    dims = [s[axis] for s in shapes]
    total = sum(dims) if all(isinstance(d, int) for d in dims) else None
    shape = list(shapes[0])
    shape[axis] = total
    for i in range(len(shape)):
        if i != axis and shape[i] is None:
            known = [s[i] for s in shapes if s[i] is not None]
            shape[i] = known[0] if known else None
    _set(g, node.output[0], t, shape)


def _rule_gather(g, node):
    data, idx = node.input[:2]
    t = g.get_type(data)
    ds, is_ = g.get_shape(data), g.get_shape(idx)
    axis = _attr(node, "axis", 0)
    if ds is not None and is_ is not None:
        axis %= len(ds)
        _set(g, node.output[0], t, tuple(ds[:axis]) + tuple(is_) + tuple(ds[axis + 1 :]))
    else:
        rd, ri = g.get_rank(data), g.get_rank(idx)
        _set(g, node.output[0], t, rank=None if rd is None or ri is None else rd + ri - 1)


def _rule_matmul(g, node):
    a, b = node.input[:2]
    t = g.get_type(a)
    sa, sb = g.get_shape(a), g.get_shape(b)
    if sa is None or sb is None or len(sa) == 0 or len(sb) == 0:
        ra, rb = g.get_rank(a), g.get_rank(b)
        rank = None if ra is None or rb is None else max(ra, rb) - (ra == 1) - (rb == 1)
        if ra == 1 or rb == 1:
            rank = None if ra is None or rb is None else max(ra, rb) - 1
        _set(g, node.output[0], t, rank=rank)
        return
    if len(sa) == 1 and len(sb) == 1:
        _set(g, node.output[0], t, ())
        return
    if len(sa) == 1:
        batch = broadcast_shapes(tuple(sb[:-2]))
        _set(g, node.output[0], t, tuple(batch) + (sb[-1],))
        return
    if len(sb) == 1:
        _set(g, node.output[0], t, tuple(sa[:-1]))
        return
    batch = broadcast_shapes(tuple(sa[:-2]), tuple(sb[:-2]))
    _set(g, node.output[0], t, tuple(batch) + (sa[-2], sb[-1]))


def _rule_gemm(g, node):
    a, b = node.input[:2]
    sa, sb = g.get_shape(a), g.get_shape(b)
    t = g.get_type(a)
    if sa is None or sb is None:
        _set(g, node.output[0], t, rank=2)
        return
    m = sa[1] if _attr(node, "transA", 0) else sa[0]
    n = sb[0] if _attr(node, "transB", 0) else sb[1]
    _set(g, node.output[0], t, (m, n))


def _rule_expand(g, node):
    x = node.input[0]
    target = _const_list(g, node.input[1])
    if target is not None and g.get_shape(x) is not None:
        _set(g, node.output[0], g.get_type(x), broadcast_shapes(g.get_shape(x), tuple(target)))
        return
    s = g.get_shape(node.input[1])
    n, r = (s[0] if s and isinstance(s[0], int) else None), g.get_rank(x)
    # the output rank is the largest of the input rank and the shape's length
    _set(g, node.output[0], g.get_type(x), rank=None if n is None or r is None else max(n, r))


def _rule_same_rank(g, node):
    x = node.input[0]
    _set(g, node.output[0], g.get_type(x), rank=g.get_rank(x))


def _rule_reduce(g, node):
    x = node.input[0]
    keep = _attr(node, "keepdims", 1)
    axes = _const_list(g, node.input[1]) if len(node.input) > 1 else _attr(node, "axes")
    shape = g.get_shape(x)
    t = g.get_type(x)
    if shape is None:
        rank = g.get_rank(x)
        if keep:
            _set(g, node.output[0], t, rank=rank)
        elif axes is not None and rank is not None:
            _set(g, node.output[0], t, rank=rank - len(axes))
        else:
            _set(g, node.output[0], t)
        return
    if not axes:
        if _attr(node, "noop_with_empty_axes", 0):
            _set(g, node.output[0], t, shape)
            return
        axes = list(range(len(shape)))
    axes = {a % max(len(shape), 1) for a in axes}
    new = [(1 if i in axes else d) for i, d in enumerate(shape) if keep or i not in axes]
    _set(g, node.output[0], t, new)


def _rule_argreduce(g, node):
    x = node.input[0]
    shape = g.get_shape(x)
    axis = _attr(node, "axis", 0)
    keep = _attr(node, "keepdims", 1)
    if shape is None:
        rank = g.get_rank(x)
        rank = rank if keep or rank is None else rank - 1
        _set(g, node.output[0], TensorProto.INT64, rank=rank)
        return
    axis %= len(shape)
    new = [(1 if i == axis else d) for i, d in enumerate(shape) if keep or i != axis]
    _set(g, node.output[0], TensorProto.INT64, new)


def _rule_constant_of_shape(g, node):
    value = _attr(node, "value")
    t = value.data_type if value is not None else TensorProto.FLOAT
    target = _const_list(g, node.input[0])
    if target is not None:
        _set(g, node.output[0], t, target)
        return
    s = g.get_shape(node.input[0])
    _set(g, node.output[0], t, rank=s[0] if s and isinstance(s[0], int) else None)


def _rule_constant(g, node):
    value = _attr(node, "value")
    if value is not None:
        _set(g, node.output[0], value.data_type, tuple(value.dims))
    elif _attr(node, "value_int") is not None:
        _set(g, node.output[0], TensorProto.INT64, ())
    elif _attr(node, "value_float") is not None:
        _set(g, node.output[0], TensorProto.FLOAT, ())
    elif _attr(node, "value_ints") is not None:
        _set(g, node.output[0], TensorProto.INT64, (len(_attr(node, "value_ints")),))


def _rule_split(g, node):
    x = node.input[0]
    t = g.get_type(x)
    shape = g.get_shape(x)
    sizes = _const_list(g, node.input[1]) if len(node.input) > 1 else None
    axis = _attr(node, "axis", 0)
    for i, o in enumerate(node.output):
        if shape is not None and sizes is not None:
            new = list(shape)
            new[axis % len(shape)] = sizes[i]
            _set(g, o, t, new)
        else:
            _set(g, o, t, rank=g.get_rank(x))


def _rule_slice(g, node):
    x = node.input[0]
    shape = g.get_shape(x)
    consts = [_const_list(g, i) if i else None for i in node.input[1:]]
    if shape is None or consts[0] is None or consts[1] is None:
        _set(g, node.output[0], g.get_type(x), rank=g.get_rank(x))
        return
    starts, ends = consts[0], consts[1]
    axes = consts[2] if len(consts) > 2 and consts[2] is not None else list(range(len(starts)))
    steps = consts[3] if len(consts) > 3 and consts[3] is not None else [1] * len(starts)
    if len(consts) > 2 and node.input[3] and consts[2] is None:
        _set(g, node.output[0], g.get_type(x), rank=len(shape))
        return
    new = list(shape)
    for s, e, a, st in zip(starts, ends, axes, steps):
        a %= len(shape)
        d = shape[a]
        new[a] = len(range(d)[slice(s, e, st)]) if isinstance(d, int) else None
    _set(g, node.output[0], g.get_type(x), new)


def _rule_range(g, node):
    _set(g, node.output[0], g.get_type(node.input[0]), rank=1)


def _rule_nonzero(g, node):
    _set(g, node.output[0], TensorProto.INT64, rank=2)


def _rule_topk(g, node):
    x = node.input[0]
    _set(g, node.output[0], g.get_type(x), rank=g.get_rank(x))
    if len(node.output) > 1:
        _set(g, node.output[1], TensorProto.INT64, rank=g.get_rank(x))


def _rule_layer_norm(g, node):
    _rule_unary(g, node)
    for o in node.output[1:]:
        _set(g, o, _attr(node, "stash_type", TensorProto.FLOAT))


def _rule_batch_norm(g, node):
    _rule_unary(g, node)


def _rule_data_type(g, node):
    """Same type as the first input, rank unknown."""
    _set(g, node.output[0], g.get_type(node.input[0]))


def _rule_same_as_data(g, node):
    """Scatter-like ops: same type and shape as the first input."""
    _rule_unary(g, node)


def _rule_bool_unary(g, node):
    x = node.input[0]
    _set(g, node.output[0], TensorProto.BOOL, g.get_shape(x), g.get_rank(x))


def _rule_size(g, node):
    _set(g, node.output[0], TensorProto.INT64, ())


def _rule_gather_elements(g, node):
    idx = node.input[1]
    _set(g, node.output[0], g.get_type(node.input[0]), g.get_shape(idx), g.get_rank(idx))


def _rule_einsum(g, node):
    eq = _attr(node, "equation")
    eq = eq.decode() if isinstance(eq, bytes) else eq
    rank = len(eq.split("->")[1].strip()) if "->" in eq and "..." not in eq else None
    _set(g, node.output[0], g.get_type(node.input[0]), rank=rank)


def _rule_range_like(g, node):
    _set(g, node.output[0], g.get_type(node.input[0]), rank=1)


def _rule_tile(g, node):
    _rule_same_rank(g, node)


def _rule_attention(g, node):
    """Attention (opset 23), 4-D form: (batch, q heads, q length, v head size)."""
    q, v = g.get_shape(node.input[0]), g.get_shape(node.input[2])
    shape = (*q[:3], v[3]) if q is not None and v is not None and len(q) == len(v) == 4 else None
    _set(g, node.output[0], g.get_type(node.input[0]), shape=shape, rank=g.get_rank(node.input[0]))


def _rule_quantize(g, node):
    """QuantizeLinear: the zero point's type, else ``output_dtype``, else uint8."""
    x = node.input[0]
    zp = node.input[2] if len(node.input) > 2 else ""
    elem_type = g.get_type(zp) if zp else _attr(node, "output_dtype", 0) or TensorProto.UINT8
    _set(g, node.output[0], elem_type, g.get_shape(x), g.get_rank(x))


def _rule_dequantize(g, node):
    """DequantizeLinear: the scale's type, the input's shape."""
    x = node.input[0]
    _set(g, node.output[0], g.get_type(node.input[1]), g.get_shape(x), g.get_rank(x))


_RULES: dict[str, Callable] = {
    **{k: _rule_unary for k in _SAME_TYPE_UNARY},
    **{k: _rule_broadcast for k in _BROADCAST_SAME_TYPE},
    **{k: (lambda g, n: _rule_broadcast(g, n, TensorProto.BOOL)) for k in _COMPARE},
    **{k: _rule_reduce for k in _REDUCE},
    "IsNaN": _rule_bool_unary,
    "IsInf": _rule_bool_unary,
    "Where": _rule_where,
    "Cast": _rule_cast,
    "CastLike": _rule_castlike,
    "Shape": _rule_shape,
    "Size": _rule_size,
    "Reshape": _rule_reshape,
    "Transpose": _rule_transpose,
    "Unsqueeze": _rule_unsqueeze,
    "Squeeze": _rule_squeeze,
    "Concat": _rule_concat,
    "Gather": _rule_gather,
    "MatMul": _rule_matmul,
    "Gemm": _rule_gemm,
    "Expand": _rule_expand,
    "ArgMax": _rule_argreduce,
    "ArgMin": _rule_argreduce,
    "ConstantOfShape": _rule_constant_of_shape,
    "Constant": _rule_constant,
    "Split": _rule_split,
    "Slice": _rule_slice,
    "Range": _rule_range,
    "NonZero": _rule_nonzero,
    "TopK": _rule_topk,
    "LayerNormalization": _rule_layer_norm,
    "RMSNormalization": _rule_unary,
    "BatchNormalization": _rule_batch_norm,
    "Conv": _rule_same_rank,
    "ConvTranspose": _rule_same_rank,
    "MaxPool": _rule_same_rank,
    "AveragePool": _rule_same_rank,
    "GlobalAveragePool": _rule_same_rank,
    "GlobalMaxPool": _rule_same_rank,
    "Pad": _rule_same_rank,
    "Tile": _rule_tile,
    "Resize": _rule_same_rank,
    "ScatterND": _rule_same_as_data,
    "ScatterElements": _rule_same_as_data,
    "GatherElements": _rule_gather_elements,
    "GatherND": _rule_data_type,
    "Einsum": _rule_einsum,
    "Clip": _rule_unary,
    "ReverseSequence": _rule_unary,
    "DepthToSpace": _rule_same_rank,
    "Attention": _rule_attention,
    "SpaceToDepth": _rule_same_rank,
    "QuantizeLinear": _rule_quantize,
    "DequantizeLinear": _rule_dequantize,
}


def infer_node(g, node: NodeProto) -> None:
    """Applies the rule of ``node.op_type`` if there is one (default domain only)."""
    if node.domain not in ("", "ai.onnx"):
        return
    rule = RULES.get(node.op_type)
    if rule is not None:
        rule(g, node)


# --- neural-network ops (activation, normalization, convolution, attention) ---


def _rule_max_pool(g, node):
    _rule_same_rank(g, node)
    if len(node.output) > 1:
        _set(g, node.output[1], TensorProto.INT64, rank=g.get_rank(node.input[0]))


def _rule_dropout(g, node):
    _rule_unary(g, node)
    if len(node.output) > 1:
        x = node.input[0]
        _set(g, node.output[1], TensorProto.BOOL, g.get_shape(x), g.get_rank(x))


_RULES.update(
    {
        "MaxPool": _rule_max_pool,
        "Dropout": _rule_dropout,
    }
)
# --- end of neural-network ops ---

#: op type -> shape rule, read-only once every section above added its rules
RULES: Mapping[str, Callable] = MappingProxyType(_RULES)
