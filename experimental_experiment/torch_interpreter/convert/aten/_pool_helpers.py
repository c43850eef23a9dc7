"""Pooling compositions beyond what ONNX pooling operators express: torch's average
pooling with ``ceil_mode`` or ``divisor_override`` and adaptive max pooling with uneven
windows. Each axis is handled with ints when its size is static, with shape
computations otherwise (1-D int64 tensors of one element).
"""

from __future__ import annotations

import numpy as np

from ....xbuilder import GraphBuilder
from ._helpers import INT64, cast_to, shape_tensor
from ._nn_helpers import FLOAT

_I64 = np.int64


def _dim(g: GraphBuilder, x, axis: int):
    """Size of ``axis``: an int if static, else a 1-D int64 tensor of one element."""
    d = (g.get_shape(x) or (None,) * (axis + 1))[axis]
    return d if isinstance(d, int) else g.op.Shape(x, start=axis, end=axis + 1)


def _as_tensor(g: GraphBuilder, v):
    return g.make_constant(np.array([v], dtype=_I64)) if isinstance(v, int) else v


def _range(g: GraphBuilder, n):
    """0, 1, ..., n - 1 as a 1-D int64 tensor."""
    if isinstance(n, int):
        return g.make_constant(np.arange(n, dtype=_I64))
    zero, one = np.array(0, dtype=_I64), np.array(1, dtype=_I64)
    return g.op.Range(zero, g.op.Squeeze(n, np.array([0], dtype=_I64)), one)


# average pooling


def _torch_out(g: GraphBuilder, n, k: int, s: int, p: int, ceil_mode: bool):
    """torch's output size along one axis (pooling_output_shape, dilation 1)."""
    if isinstance(n, int):
        span = n + 2 * p - k
        out = (-(-span // s) if ceil_mode else span // s) + 1
        if ceil_mode and (out - 1) * s >= n + p:
            out -= 1  # the last window would start in the right padding
        return out
    span = g.op.Add(n, np.array([2 * p - k + (s - 1 if ceil_mode else 0)], dtype=_I64))
    out = g.op.Add(g.op.Div(span, np.array([s], dtype=_I64)), np.array([1], dtype=_I64))
    if ceil_mode:
        last = g.op.Mul(g.op.Sub(out, np.array([1], dtype=_I64)), np.array([s], dtype=_I64))
        drop = g.op.GreaterOrEqual(last, g.op.Add(n, np.array([p], dtype=_I64)))
        out = g.op.Sub(out, cast_to(g, drop, INT64))
    return out


def _window_counts(g: GraphBuilder, n, out, k: int, s: int, p: int, include_pad: bool):
    """Number of elements torch divides by for each window of one axis."""
    if isinstance(n, int) and isinstance(out, int):
        start = np.arange(out, dtype=_I64) * s - p
        end = np.minimum(start + k, n + p)
        if not include_pad:
            start, end = np.maximum(start, 0), np.minimum(end, n)
        return g.make_constant((end - start).astype(_I64))
    n = _as_tensor(g, n)
    start = g.op.Sub(g.op.Mul(_range(g, out), np.array([s], dtype=_I64)), np.array([p], dtype=_I64))
    end = g.op.Min(
        g.op.Add(start, np.array([k], dtype=_I64)), g.op.Add(n, np.array([p], dtype=_I64))
    )
    if not include_pad:
        start = g.op.Max(start, np.array([0], dtype=_I64))
        end = g.op.Min(end, n)
    return g.op.Sub(end, start)


def avg_pool_composed(
    g: GraphBuilder, x, attrs: dict, ceil_mode: bool, count_include_pad: bool, divisor_override
) -> str:
    """torch's average pooling on a batched input: the window sums come from an
    AveragePool over an input padded explicitly with zeros (every window inside, torch's
    output sizes), then are divided by torch's divisor for each window."""
    k, s = attrs["kernel_shape"], attrs["strides"]
    spatial = len(k)
    p = attrs["pads"][:spatial]
    dims = [_dim(g, x, 2 + i) for i in range(spatial)]
    outs = [_torch_out(g, n, k[i], s[i], p[i], ceil_mode) for i, n in enumerate(dims)]
    ends = []
    for i, (n, out) in enumerate(zip(dims, outs)):
        # zeros after the input so that exactly ``out`` windows fit (floor mode)
        if isinstance(n, int) and isinstance(out, int):
            ends.append(max(0, (out - 1) * s[i] + k[i] - n - p[i]))
        else:
            last = g.op.Mul(
                g.op.Sub(_as_tensor(g, out), np.array([1], dtype=_I64)),
                np.array([s[i]], dtype=_I64),
            )
            need = g.op.Sub(g.op.Add(last, np.array([k[i] - p[i]], dtype=_I64)), _as_tensor(g, n))
            ends.append(g.op.Max(need, np.array([0], dtype=_I64)))
    if any(p) or any(not (isinstance(e, int) and e == 0) for e in ends):
        x = g.op.Pad(x, shape_tensor(g, [0, 0, *p, 0, 0, *ends]), mode="constant")
    mean = g.op.AveragePool(x, kernel_shape=k, strides=s)
    ksize = float(np.prod(k))
    if divisor_override:
        return g.op.Mul(mean, ksize / float(divisor_override))
    factor = None
    for i, (n, out) in enumerate(zip(dims, outs)):
        counts = _window_counts(g, n, out, k[i], s[i], p[i], bool(count_include_pad))
        shape = np.array([-1] + [1] * (spatial - 1 - i), dtype=_I64)
        counts = g.op.Reshape(counts, shape)
        factor = counts if factor is None else g.op.Mul(factor, counts)
    factor = g.op.Div(np.array(ksize, dtype=np.float32), cast_to(g, factor, FLOAT))
    return g.op.Mul(mean, cast_to(g, factor, g.get_type(mean)))


# adaptive max pooling


def _adaptive_windows(g: GraphBuilder, n, o: int):
    """Indices ``[o, K]`` of torch's adaptive windows along one axis:
    window i is [floor(i * n / o), ceil((i + 1) * n / o)), shorter windows repeat their
    last index (which changes neither the max nor the first argmax)."""
    if isinstance(n, int):
        i = np.arange(o, dtype=_I64)
        start, end = (i * n) // o, -((-(i + 1) * n) // o)
        j = np.arange(int((end - start).max()), dtype=_I64)
        return g.make_constant(np.minimum(start[:, None] + j[None, :], end[:, None] - 1))
    i = np.arange(o, dtype=_I64)
    start = g.op.Div(g.op.Mul(i, n), np.array([o], dtype=_I64))
    end = g.op.Div(
        g.op.Add(g.op.Mul(i + 1, n), np.array([o - 1], dtype=_I64)), np.array([o], dtype=_I64)
    )
    size = g.op.ReduceMax(g.op.Sub(end, start), keepdims=1)
    j = g.op.Unsqueeze(_range(g, size), np.array([0], dtype=_I64))
    one = np.array([1], dtype=_I64)
    return g.op.Min(
        g.op.Add(g.op.Unsqueeze(start, one), j), g.op.Unsqueeze(g.op.Sub(end, one), one)
    )


def adaptive_max_pool_composed(g: GraphBuilder, x, out: list[int]):
    """Adaptive max pooling (values, flat indices per plane) of a batched input with any
    output size: the windows' elements are gathered from the flattened planes."""
    spatial = len(out)
    dims = [_dim(g, x, 2 + i) for i in range(spatial)]
    flat_idx, stride = None, 1
    for i in reversed(range(spatial)):
        w = _adaptive_windows(g, dims[i], out[i])
        if not (isinstance(stride, int) and stride == 1):
            w = g.op.Mul(w, _as_tensor(g, stride))
        axes = [a for a in range(2 * spatial) if a not in (i, spatial + i)]
        if axes:
            w = g.op.Unsqueeze(w, np.array(axes, dtype=_I64))
        flat_idx = w if flat_idx is None else g.op.Add(flat_idx, w)
        if isinstance(stride, int) and isinstance(dims[i], int):
            stride = stride * dims[i]
        else:
            stride = g.op.Mul(_as_tensor(g, stride), _as_tensor(g, dims[i]))
    # [o_1, ..., o_s, K]: flat input indices of every window
    idx = g.op.Reshape(flat_idx, np.array([*out, -1], dtype=_I64))
    planes = g.op.Concat(g.op.Shape(x, start=0, end=2), _as_tensor(g, stride), axis=0)
    gathered = g.op.Gather(g.op.Reshape(x, planes), idx, axis=2)
    last = np.array([-1], dtype=_I64)
    values = g.op.ReduceMax(gathered, last, keepdims=0)
    arg = g.op.ArgMax(gathered, axis=-1, keepdims=0)
    # position of each window's row in idx flattened
    n_win = int(np.prod(out))
    k_total = g.op.Shape(idx, start=spatial, end=spatial + 1)
    offsets = g.op.Reshape(
        g.op.Mul(np.arange(n_win, dtype=_I64), k_total), np.array(out, dtype=_I64)
    )
    return values, g.op.Gather(g.op.Reshape(idx, last), g.op.Add(arg, offsets), axis=0)
