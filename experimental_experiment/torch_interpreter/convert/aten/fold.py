"""Sliding blocks: im2col (``nn.functional.unfold``) and col2im (``nn.functional.fold``),
which MobileViT uses to cut feature maps into patches and put them back.

im2col gathers the rows then the columns of every block with two Gather nodes (indices
computed from the dynamic image size); col2im is ONNX ``Col2Im`` (opset 18).
"""

from __future__ import annotations

from typing import Sequence

from ....xbuilder import GraphBuilder
from ....xbuilder.dtypes import i64
from ..registry import converter
from ._helpers import aten, shape_tensor
from ._nn_helpers import expand_param, squeeze_batch, static_ints, unsqueeze_batch


def _block_indices(g: GraphBuilder, size: str, kernel: int, dilation: int, stride: int):
    """[kernel, out] int64 indices ``o * stride + i * dilation`` along one padded axis of
    length ``size`` (a 1-D name), out = (size - dilation * (kernel - 1) - 1) // stride + 1;
    returns the indices and ``out`` (1-D)."""
    span = dilation * (kernel - 1) + 1
    out = g.op.Add(g.op.Div(g.op.Sub(size, i64([span])), i64([stride])), i64([1]))
    starts = g.op.Range(i64(0), g.op.Squeeze(out, i64([0])), i64(1))
    if stride != 1:
        starts = g.op.Mul(starts, i64([stride]))
    offsets = i64([[i * dilation] for i in range(kernel)])
    return g.op.Add(g.make_constant(offsets), g.op.Unsqueeze(starts, i64([0]))), out


@converter(aten.im2col.default)
def aten_im2col(
    g: GraphBuilder,
    x: str,
    kernel_size: int | Sequence[int],
    dilation: int | Sequence[int],
    padding: int | Sequence[int],
    stride: int | Sequence[int],
):
    """im2col(Tensor self, int[2] kernel_size, int[2] dilation, int[2] padding,
    int[2] stride) -> Tensor: [N, C * kh * kw, L], channels first then block rows
    then block columns, blocks in row-major order"""
    kh, kw = static_ints(expand_param(kernel_size, 2, "kernel_size"), "kernel_size")
    dh, dw = static_ints(expand_param(dilation, 2, "dilation"), "dilation")
    ph, pw = static_ints(expand_param(padding, 2, "padding"), "padding")
    sh, sw = static_ints(expand_param(stride, 2, "stride"), "stride")
    x, added = unsqueeze_batch(g, x, 2)
    if ph or pw:
        x = g.op.Pad(x, i64([0, 0, ph, pw, 0, 0, ph, pw]))
    rows, out_h = _block_indices(g, g.op.Shape(x, start=2, end=3), kh, dh, sh)
    cols, out_w = _block_indices(g, g.op.Shape(x, start=3, end=4), kw, dw, sw)
    y = g.op.Gather(x, rows, axis=2)  # N, C, kh, out_h, W
    y = g.op.Gather(y, cols, axis=4)  # N, C, kh, out_h, kw, out_w
    y = g.op.Transpose(y, perm=[0, 1, 2, 4, 3, 5])  # N, C, kh, kw, out_h, out_w
    channels = g.op.Mul(g.op.Shape(x, start=1, end=2), i64([kh * kw]))
    # no -1 (0 copies the batch): an empty batch stays valid
    shape = g.op.Concat(i64([0]), channels, g.op.Mul(out_h, out_w), axis=0)
    y = g.op.Reshape(y, shape)
    return squeeze_batch(g, y, added)


@converter(aten.col2im.default)
def aten_col2im(
    g: GraphBuilder,
    x: str,
    output_size: int | str | Sequence[int | str],
    kernel_size: int | Sequence[int],
    dilation: int | Sequence[int],
    padding: int | Sequence[int],
    stride: int | Sequence[int],
):
    """col2im(Tensor self, SymInt[2] output_size, int[2] kernel_size, int[2] dilation,
    int[2] padding, int[2] stride) -> Tensor: the sum of the overlapping blocks"""
    kernel = static_ints(expand_param(kernel_size, 2, "kernel_size"), "kernel_size")
    dilation = static_ints(expand_param(dilation, 2, "dilation"), "dilation")
    ph, pw = static_ints(expand_param(padding, 2, "padding"), "padding")
    stride = static_ints(expand_param(stride, 2, "stride"), "stride")
    x, added = unsqueeze_batch(g, x, 1)
    y = g.op.Col2Im(
        x,
        shape_tensor(g, list(output_size)),
        i64(kernel),
        dilations=dilation,
        pads=[ph, pw, ph, pw],
        strides=stride,
    )
    return squeeze_batch(g, y, added)
