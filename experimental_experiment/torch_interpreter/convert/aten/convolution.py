"""Convolutions (direct and transposed) and pooling (max, average, adaptive average and max).

Unbatched inputs (no batch dimension) get one added then removed. Kernel sizes,
strides, paddings and dilations become ONNX attributes: they must be static.
"""

from __future__ import annotations

from typing import Sequence

import numpy as np

from ....xbuilder import GraphBuilder
from ....xbuilder.dtypes import i64
from ..registry import converter
from ._helpers import INT64, aten, cast_to, rank_of
from ._nn_helpers import expand_param, squeeze_batch, static_ints, unsqueeze_batch
from ._pool_helpers import adaptive_max_pool_composed, avg_pool_composed

# convolution


def _conv_pads(g: GraphBuilder, weight, padding, dilations, spatial: int) -> dict:
    """ONNX padding attributes for an int list or 'valid' / 'same'."""
    if not isinstance(padding, str):
        p = static_ints(expand_param(padding, spatial, "padding"), "padding")
        return dict(pads=p + p)
    if padding == "valid":
        return dict(pads=[0] * (2 * spatial))
    if padding != "same":
        raise ValueError(f"unknown padding={padding!r}")
    kernel = (g.get_shape(weight) or (None,) * (spatial + 2))[2:]
    if not all(isinstance(k, int) for k in kernel):
        return dict(auto_pad="SAME_UPPER")
    # torch puts the extra padding at the end, as SAME_UPPER does
    total = [d * (k - 1) for d, k in zip(dilations, kernel)]
    return dict(pads=[t // 2 for t in total] + [t - t // 2 for t in total])


def _convolution(
    g: GraphBuilder, x, weight, bias, stride, padding, dilation, transposed, output_padding, groups
):
    spatial = rank_of(g, weight) - 2
    x, added = unsqueeze_batch(g, x, spatial)
    strides = static_ints(expand_param(stride, spatial, "stride"), "stride")
    dilations = static_ints(expand_param(dilation, spatial, "dilation"), "dilation")
    attrs = dict(
        strides=strides,
        dilations=dilations,
        group=static_ints([groups], "groups")[0],
        **_conv_pads(g, weight, padding, dilations, spatial),
    )
    kernel = (g.get_shape(weight) or ())[2:]
    if kernel and all(isinstance(k, int) for k in kernel):
        attrs["kernel_shape"] = list(kernel)
    inputs = [x, weight] + ([cast_to(g, bias, g.get_type(x))] if bias else [])
    if transposed:
        op = expand_param(output_padding or 0, spatial, "output_padding")
        op = static_ints(op, "output_padding")
        y = g.op.ConvTranspose(*inputs, output_padding=op if any(op) else None, **attrs)
    else:
        y = g.op.Conv(*inputs, **attrs)
    return squeeze_batch(g, y, added)


@converter(
    aten.conv1d.default,
    aten.conv2d.default,
    aten.conv3d.default,
    aten.conv1d.padding,
    aten.conv2d.padding,
    aten.conv3d.padding,
)
def aten_conv(g: GraphBuilder, x, weight, bias=None, stride=1, padding=0, dilation=1, groups=1):
    """conv2d(Tensor input, Tensor weight, Tensor? bias=None, SymInt[2] stride=1,
    SymInt[2] padding=0 | str padding="valid", SymInt[2] dilation=1, SymInt groups=1)"""
    return _convolution(g, x, weight, bias, stride, padding, dilation, False, None, groups)


@converter(aten.conv_transpose1d.default, aten.conv_transpose2d.input, aten.conv_transpose3d.input)
def aten_conv_transpose(
    g: GraphBuilder,
    x,
    weight,
    bias=None,
    stride=1,
    padding=0,
    output_padding=0,
    groups=1,
    dilation=1,
):
    """conv_transpose2d.input(Tensor input, Tensor weight, Tensor? bias=None,
    SymInt[2] stride=1, SymInt[2] padding=0, SymInt[2] output_padding=0, SymInt groups=1,
    SymInt[2] dilation=1) -> Tensor"""
    return _convolution(g, x, weight, bias, stride, padding, dilation, True, output_padding, groups)


@converter(aten.convolution.default)
def aten_convolution(
    g: GraphBuilder,
    x: str,
    weight: str,
    bias: str | None,
    stride: Sequence[int | str],
    padding: Sequence[int | str],
    dilation: Sequence[int | str],
    transposed: bool,
    output_padding: Sequence[int | str],
    groups: int | str,
) -> str:
    """convolution(Tensor input, Tensor weight, Tensor? bias, SymInt[] stride,
    SymInt[] padding, SymInt[] dilation, bool transposed, SymInt[] output_padding,
    SymInt groups) -> Tensor"""
    return _convolution(
        g, x, weight, bias, stride, padding, dilation, transposed, output_padding, groups
    )


@converter(aten._convolution.default, aten._convolution.deprecated)
def aten__convolution(
    g: GraphBuilder,
    x,
    weight,
    bias,
    stride,
    padding,
    dilation,
    transposed,
    output_padding,
    groups,
    *unused,
):
    """_convolution(Tensor input, Tensor weight, Tensor? bias, SymInt[] stride,
    SymInt[] padding, SymInt[] dilation, bool transposed, SymInt[] output_padding,
    SymInt groups, bool benchmark, bool deterministic, bool cudnn_enabled,
    bool allow_tf32) -> Tensor"""
    return _convolution(
        g, x, weight, bias, stride, padding, dilation, transposed, output_padding, groups
    )


# pooling


def _pool_attrs(kernel_size, stride, padding, spatial: int) -> dict:
    k = static_ints(expand_param(kernel_size, spatial, "kernel_size"), "kernel_size")
    s = static_ints(expand_param(stride, spatial, "stride"), "stride") if stride else k
    p = static_ints(expand_param(padding, spatial, "padding"), "padding")
    return dict(kernel_shape=k, strides=s, pads=p + p)


def _torch_pool_size(n: int, k: int, s: int, p: int, d: int, ceil_mode: bool) -> int:
    """Output size torch computes along one axis."""
    span = n + 2 * p - d * (k - 1) - 1
    out = (-(-span // s) if ceil_mode else span // s) + 1
    if ceil_mode and (out - 1) * s >= n + p:
        out -= 1  # the last window would start in the right padding
    return out


def _ceil_mode(g: GraphBuilder, x, attrs: dict, ceil_mode: bool) -> None:
    """Sets ``ceil_mode``; with static dims, pads at the end instead (floor mode), since
    onnx shape inference ignores the rule dropping windows starting in the padding."""
    attrs["ceil_mode"] = int(bool(ceil_mode))
    dims = (g.get_shape(x) or (None, None))[2:]
    if not ceil_mode or not dims or not all(isinstance(d, int) for d in dims):
        return
    spatial = len(dims)
    pads = list(attrs["pads"])
    dilations = attrs.get("dilations", [1] * spatial)
    for i, n in enumerate(dims):
        k, s, d, p = attrs["kernel_shape"][i], attrs["strides"][i], dilations[i], pads[i]
        out = _torch_pool_size(n, k, s, p, d, True)
        pads[spatial + i] = max(pads[spatial + i], (out - 1) * s + d * (k - 1) + 1 - n - p)
    attrs["pads"], attrs["ceil_mode"] = pads, 0


def _max_pool(
    g: GraphBuilder,
    x,
    kernel_size,
    stride,
    padding,
    dilation,
    ceil_mode,
    spatial: int,
    with_indices: bool,
):
    x, added = unsqueeze_batch(g, x, spatial)
    attrs = _pool_attrs(kernel_size, stride, padding, spatial)
    attrs["dilations"] = static_ints(expand_param(dilation, spatial, "dilation"), "dilation")
    _ceil_mode(g, x, attrs, ceil_mode)
    if not with_indices:
        return squeeze_batch(g, g.op.MaxPool(x, **attrs), added)
    y, indices = g.op.MaxPool(x, outputs=2, **attrs)
    # ONNX flattens indices over the whole tensor, torch over each (n, c) plane
    plane = g.op.ReduceProd(g.op.Shape(x, start=2), keepdims=0)
    indices = g.op.Mod(cast_to(g, indices, INT64), plane)
    return squeeze_batch(g, y, added), squeeze_batch(g, indices, added)


def _max_pool_converter(spatial: int, with_indices: bool):
    def fn(g: GraphBuilder, x, kernel_size, stride=(), padding=0, dilation=1, ceil_mode=False):
        return _max_pool(
            g, x, kernel_size, stride, padding, dilation, ceil_mode, spatial, with_indices
        )

    suffix = "_with_indices" if with_indices else ""
    fn.__name__ = f"aten_max_pool{spatial}d{suffix}"
    fn.__doc__ = (
        f"max_pool{spatial}d{suffix}(Tensor self, int[{spatial}] kernel_size, "
        f"int[{spatial}] stride=[], int[{spatial}] padding=0, "
        f"int[{spatial}] dilation=1, bool ceil_mode=False)"
    )
    return fn


converter(aten.max_pool1d.default)(_max_pool_converter(1, False))
converter(aten.max_pool2d.default)(_max_pool_converter(2, False))
converter(aten.max_pool3d.default)(_max_pool_converter(3, False))
converter(aten.max_pool2d_with_indices.default)(_max_pool_converter(2, True))
converter(aten.max_pool3d_with_indices.default)(_max_pool_converter(3, True))


def _avg_pool(
    g: GraphBuilder,
    x,
    kernel_size,
    stride,
    padding,
    ceil_mode,
    count_include_pad,
    divisor_override,
    spatial: int,
):
    x, added = unsqueeze_batch(g, x, spatial)
    attrs = _pool_attrs(kernel_size, stride, padding, spatial)
    if divisor_override or ceil_mode:
        # torch drops the windows starting in the right padding and its divisors
        # differ from onnx's for the windows crossing the end
        y = avg_pool_composed(g, x, attrs, ceil_mode, count_include_pad, divisor_override)
        return squeeze_batch(g, y, added)
    padded = bool(count_include_pad) and any(attrs["pads"])
    if padded and g.is_static_shape(x):
        # torch counts the padding but not what ceil_mode adds past it: pad explicitly
        # with zeros, then average what lies inside the padded tensor
        pads = attrs["pads"]
        dims = g.get_shape(x)[2:]
        x = g.op.Pad(x, i64([0, 0] + pads[:spatial] + [0, 0] + pads[spatial:]), mode="constant")
        attrs = _explicit_pad_attrs(dims, attrs, ceil_mode)
        padded = False
    else:
        _ceil_mode(g, x, attrs, ceil_mode)
    y = g.op.AveragePool(x, count_include_pad=int(padded), **attrs)
    return squeeze_batch(g, y, added)


def _explicit_pad_attrs(dims, attrs: dict, ceil_mode: bool) -> dict:
    """Attributes of a pooling over an input of static ``dims`` already padded by
    ``attrs['pads']``: torch's output sizes, reached with end padding (not counted)."""
    spatial = len(dims)
    new = [0] * (2 * spatial)
    for i, n in enumerate(dims):
        k, s, p = attrs["kernel_shape"][i], attrs["strides"][i], attrs["pads"][i]
        out = _torch_pool_size(n, k, s, p, 1, ceil_mode)
        new[spatial + i] = max(0, (out - 1) * s + k - (n + 2 * p))
    return dict(attrs, pads=new, ceil_mode=0)


@converter(aten.avg_pool1d.default)
def aten_avg_pool1d(
    g: GraphBuilder,
    x: str,
    kernel_size: int | Sequence[int],
    stride: int | Sequence[int] = (),
    padding: int | Sequence[int] = 0,
    ceil_mode: bool = False,
    count_include_pad: bool = True,
) -> str:
    """avg_pool1d(Tensor self, int[1] kernel_size, int[1] stride=[], int[1] padding=0,
    bool ceil_mode=False, bool count_include_pad=True) -> Tensor"""
    return _avg_pool(g, x, kernel_size, stride, padding, ceil_mode, count_include_pad, None, 1)


def _avg_pool_converter(spatial: int):
    def fn(
        g: GraphBuilder,
        x,
        kernel_size,
        stride=(),
        padding=0,
        ceil_mode=False,
        count_include_pad=True,
        divisor_override=None,
    ):
        return _avg_pool(
            g,
            x,
            kernel_size,
            stride,
            padding,
            ceil_mode,
            count_include_pad,
            divisor_override,
            spatial,
        )

    fn.__name__ = f"aten_avg_pool{spatial}d"
    fn.__doc__ = (
        f"avg_pool{spatial}d(Tensor self, int[{spatial}] kernel_size, "
        f"int[{spatial}] stride=[], int[{spatial}] padding=0, bool ceil_mode=False, "
        "bool count_include_pad=True, int? divisor_override=None) -> Tensor"
    )
    return fn


converter(aten.avg_pool2d.default)(_avg_pool_converter(2))
converter(aten.avg_pool3d.default)(_avg_pool_converter(3))


# adaptive average pooling


def _averaging_matrix(n_in: int, n_out: int, np_dtype) -> np.ndarray:
    """A[i, j] = 1 / len(window i) for j in window i (torch's adaptive windows)."""
    a = np.zeros((n_out, n_in), dtype=np.float64)
    for i in range(n_out):
        start = (i * n_in) // n_out
        end = -((-(i + 1) * n_in) // n_out)
        a[i, start:end] = 1.0 / (end - start)
    return a.astype(np_dtype)


def _dynamic_averaging_matrix(g: GraphBuilder, x, axis: int, n_out: int):
    """The transposed averaging matrix ``(n, n_out)`` of a dynamic dimension ``n`` of
    ``x``, computed in the graph with torch's windows: ``[i * n // n_out,
    ceil((i + 1) * n / n_out))`` for output ``i``; also returns ``n`` (1-D)."""
    n = g.op.Shape(x, start=axis, end=axis + 1)
    i = np.arange(n_out, dtype=np.int64).reshape((-1, 1))
    start = g.op.Div(g.op.Mul(i, n), i64([n_out]))
    end = g.op.Div(g.op.Add(g.op.Mul(i + 1, n), i64([n_out - 1])), i64([n_out]))
    j = g.op.Range(np.array(0, dtype=np.int64), g.op.Squeeze(n), np.array(1, dtype=np.int64))
    inside = g.op.And(g.op.GreaterOrEqual(j, start), g.op.Less(j, end))
    itype = g.get_type(x)
    weights = g.op.Div(g.op.Cast(inside, to=itype), g.op.Cast(g.op.Sub(end, start), to=itype))
    return g.op.Transpose(weights, perm=[1, 0]), n


def _adaptive_axis(g: GraphBuilder, x, axis: int, n_in, n_out: int, rank: int):
    """Adaptive average pooling along one axis with a matrix product (the matrix is
    computed in the graph when the dimension is dynamic)."""
    if n_out == 1:
        return g.op.ReduceMean(x, i64([axis]), keepdims=1)
    if isinstance(n_in, int):
        from ....xbuilder.dtypes import onnx_to_np_dtype

        np_dtype = onnx_to_np_dtype(g.get_type(x))
        a_t, n = g.make_constant(_averaging_matrix(n_in, n_out, np_dtype).T), i64([n_in])
    else:
        a_t, n = _dynamic_averaging_matrix(g, x, axis, n_out)
    perm = list(range(rank))
    perm[axis], perm[-1] = perm[-1], perm[axis]
    xt = x if axis == rank - 1 else g.op.Transpose(x, perm=perm)
    # a 2-D product: onnxruntime's MatMul fails to broadcast an empty batch
    lead = g.op.Slice(g.op.Shape(xt), i64([0]), i64([-1]))
    rows = g.op.ReduceProd(lead, keepdims=1)
    flat = g.op.Reshape(xt, g.op.Concat(rows, n, axis=0))
    y = g.op.Reshape(g.op.MatMul(flat, a_t), g.op.Concat(lead, i64([n_out]), axis=0))
    return y if axis == rank - 1 else g.op.Transpose(y, perm=perm)


def _adaptive_avg_pool(g: GraphBuilder, x, output_size, spatial: int):
    x, added = unsqueeze_batch(g, x, spatial)
    out = static_ints(expand_param(output_size, spatial, "output_size"), "output_size")
    rank = spatial + 2
    in_dims = list((g.get_shape(x) or (None,) * rank)[2:])
    if all(o == 1 for o in out):
        return squeeze_batch(g, g.op.GlobalAveragePool(x), added)
    if all(isinstance(d, int) and d % o == 0 for d, o in zip(in_dims, out)):
        k = [d // o for d, o in zip(in_dims, out)]
        if all(v == 1 for v in k):
            return squeeze_batch(g, g.op.Identity(x), added)
        y = g.op.AveragePool(x, kernel_shape=k, strides=k)
        return squeeze_batch(g, y, added)
    y = x
    for i, (d, o) in enumerate(zip(in_dims, out)):
        if d != o:
            y = _adaptive_axis(g, y, i + 2, d, o, rank)
    return squeeze_batch(g, y, added)


@converter(aten.adaptive_avg_pool1d.default)
def aten_adaptive_avg_pool1d(g: GraphBuilder, x: str, output_size: int | Sequence[int]) -> str:
    """adaptive_avg_pool1d(Tensor self, int[1] output_size) -> Tensor"""
    return _adaptive_avg_pool(g, x, output_size, 1)


@converter(aten.adaptive_avg_pool2d.default, aten._adaptive_avg_pool2d.default)
def aten_adaptive_avg_pool2d(
    g: GraphBuilder, x: str, output_size: int | str | Sequence[int | str]
) -> str:
    """adaptive_avg_pool2d(Tensor self, SymInt[2] output_size) -> Tensor"""
    return _adaptive_avg_pool(g, x, output_size, 2)


@converter(aten.adaptive_avg_pool3d.default, aten._adaptive_avg_pool3d.default)
def aten_adaptive_avg_pool3d(
    g: GraphBuilder, x: str, output_size: int | str | Sequence[int | str]
) -> str:
    """adaptive_avg_pool3d(Tensor self, SymInt[3] output_size) -> Tensor"""
    return _adaptive_avg_pool(g, x, output_size, 3)


# adaptive max pooling


def _adaptive_max_pool(g: GraphBuilder, x, output_size, spatial: int):
    x, added = unsqueeze_batch(g, x, spatial)
    out = static_ints(expand_param(output_size, spatial, "output_size"), "output_size")
    in_dims = list((g.get_shape(x) or (None,) * (spatial + 2))[2:])
    if all(o == 1 for o in out):
        # one window: max and argmax over the flattened plane
        flat = g.op.Reshape(x, i64([0, 0, -1]))
        keep = i64([0, 0] + [1] * spatial)
        y = g.op.Reshape(g.op.ReduceMax(flat, i64([2]), keepdims=1), keep)
        indices = g.op.Reshape(g.op.ArgMax(flat, axis=2, keepdims=1), keep)
    elif all(isinstance(d, int) and d % o == 0 for d, o in zip(in_dims, out)):
        k = [d // o for d, o in zip(in_dims, out)]
        y, indices = _max_pool(g, x, k, k, 0, 1, False, spatial, True)
    else:
        y, indices = adaptive_max_pool_composed(g, x, out)
    return squeeze_batch(g, y, added), squeeze_batch(g, indices, added)


@converter(aten.adaptive_max_pool1d.default)
def aten_adaptive_max_pool1d(
    g: GraphBuilder, x: str, output_size: int | Sequence[int]
) -> tuple[str, str]:
    """adaptive_max_pool1d(Tensor self, int[1] output_size) -> (Tensor, Tensor)"""
    return _adaptive_max_pool(g, x, output_size, 1)


@converter(aten.adaptive_max_pool2d.default)
def aten_adaptive_max_pool2d(
    g: GraphBuilder, x: str, output_size: int | Sequence[int]
) -> tuple[str, str]:
    """adaptive_max_pool2d(Tensor self, int[2] output_size) -> (Tensor, Tensor)"""
    return _adaptive_max_pool(g, x, output_size, 2)


@converter(aten.adaptive_max_pool3d.default)
def aten_adaptive_max_pool3d(
    g: GraphBuilder, x: str, output_size: int | Sequence[int]
) -> tuple[str, str]:
    """adaptive_max_pool3d(Tensor self, int[3] output_size) -> (Tensor, Tensor)"""
    return _adaptive_max_pool(g, x, output_size, 3)
