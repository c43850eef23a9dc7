"""FFTs with ONNX DFT (``axis`` is an attribute up to opset 19, an input from opset 20).

Complex tensors are real tensors with a trailing dimension 2 (real, imaginary), as
the interpreter stamps them and as DFT reads and writes them. The converted ops are
the ones torch's frontends decompose to: ``_fft_r2c``, ``_fft_c2c``, ``_fft_c2r``,
plus ``view_as_real``/``view_as_complex`` (identities in this representation) and
``_conj``. A leading axis of size 1 is added so that every transformed axis is >= 1.
onnxruntime's inverse DFT divides by the length: that factor is undone, then torch's
normalization (0: none, 1: 1/sqrt(n), 2: 1/n over the transformed sizes) applies.
"""

from __future__ import annotations

from typing import Sequence

import numpy as np

from ....xbuilder import GraphBuilder
from ...errors import UnsupportedOpError
from ..node_context import NodeContext
from ..registry import COMPLEX, converter
from ._helpers import aten, cast_to, rank_of

_I64 = np.int64


def _is_complex(node_arg) -> bool:
    val = getattr(node_arg, "meta", {}).get("val")
    return val is not None and val.is_complex()


def _size(g: GraphBuilder, y: str, axis: int) -> str:
    """Length of ``axis`` as a float tensor [1] of y's type."""
    return g.op.CastLike(g.op.Shape(y, start=axis, end=axis + 1), y)


def _dft(g: GraphBuilder, y: str, axis: int, *, inverse: int = 0, onesided: int = 0) -> str:
    """One DFT along ``axis`` (>= 1), in the form of the model's opset."""
    if g.main_opset >= 20:
        return g.op.DFT(y, "", np.array(axis, _I64), inverse=inverse, onesided=onesided)
    return g.op.DFT(y, axis=axis, inverse=inverse, onesided=onesided)


def _idft(g: GraphBuilder, y: str, axis: int) -> str:
    """Inverse DFT without onnxruntime's 1/n."""
    return g.op.Mul(_dft(g, y, axis, inverse=1), _size(g, y, axis))


def _normalize(g: GraphBuilder, y: str, sizes: list[str], normalization: int) -> str:
    if normalization == 0 or not sizes:
        return y
    n = sizes[0]
    for s in sizes[1:]:
        n = g.op.Mul(n, s)
    if normalization == 1:
        n = g.op.Sqrt(n)
    return g.op.Div(y, n)


def _dims(g: GraphBuilder, x: str, dim, real_input: bool) -> list[int]:
    r = rank_of(g, x) - (0 if real_input else 1)  # the logical (complex) rank
    return [d % r for d in dim]


@converter(aten._fft_r2c.default, variant=COMPLEX)
@converter(aten._fft_r2c.default)
def aten__fft_r2c(
    g: GraphBuilder, x: str, dim: Sequence[int], normalization: int, onesided: bool
) -> str:
    """_fft_r2c(Tensor self, int[] dim, int normalization, bool onesided) -> Tensor"""
    dims = _dims(g, x, dim, True)
    y = g.op.Unsqueeze(x, np.array([0, -1], _I64))  # [1, ..., 1]
    sizes = [_size(g, y, d + 1) for d in dims]
    y = _dft(g, y, dims[-1] + 1, onesided=int(onesided))
    for d in dims[:-1]:
        y = _dft(g, y, d + 1)
    y = _normalize(g, y, sizes, normalization)
    return g.op.Squeeze(y, np.array([0], _I64))


@converter(aten._fft_c2c.default, variant=COMPLEX)
@converter(aten._fft_c2c.default)
def aten__fft_c2c(
    g: GraphBuilder, x: str, dim: Sequence[int | str], normalization: int, forward: bool
) -> str:
    """_fft_c2c(Tensor self, SymInt[] dim, int normalization, bool forward) -> Tensor"""
    dims = _dims(g, x, dim, False)
    y = g.op.Unsqueeze(x, np.array([0], _I64))
    sizes = [_size(g, y, d + 1) for d in dims]
    for d in dims:
        y = _dft(g, y, d + 1) if forward else _idft(g, y, d + 1)
    y = _normalize(g, y, sizes, normalization)
    return g.op.Squeeze(y, np.array([0], _I64))


def _conj(g: GraphBuilder, y: str) -> str:
    return g.op.Mul(y, g.op.CastLike(np.array([1, -1], dtype=np.float32), y))


@converter(aten._fft_c2r.default, variant=COMPLEX)
@converter(aten._fft_c2r.default)
def aten__fft_c2r(
    g: GraphBuilder, x: str, dim: Sequence[int], normalization: int, last_dim_size: int
) -> str:
    """_fft_c2r(Tensor self, int[] dim, int normalization, SymInt last_dim_size) -> Tensor"""
    if not isinstance(last_dim_size, int):
        raise UnsupportedOpError("_fft_c2r needs a static last_dim_size", argument="last_dim_size")
    dims = _dims(g, x, dim, False)
    y = g.op.Unsqueeze(x, np.array([0], _I64))
    sizes = [_size(g, y, d + 1) for d in dims[:-1]]
    for d in dims[:-1]:
        y = _idft(g, y, d + 1)
    # rebuild the full hermitian spectrum of the last axis: X[N - k] = conj(X[k])
    n, axis = last_dim_size, dims[-1] + 1
    ax = np.array([axis], _I64)
    head = g.op.Slice(y, np.array([0], _I64), np.array([n // 2 + 1], _I64), ax)
    parts = [head]
    if n - n // 2 - 1 > 0:
        tail = g.op.Slice(
            y, np.array([n - n // 2 - 1], _I64), np.array([0], _I64), ax, np.array([-1], _I64)
        )
        parts.append(_conj(g, tail))
    full = g.op.Concat(*parts, axis=axis) if len(parts) > 1 else head
    y = g.op.Mul(_dft(g, full, axis, inverse=1), g.op.CastLike(np.array(n, dtype=np.float32), full))
    sizes.append(g.op.CastLike(np.array([n], dtype=np.float32), y))
    y = _normalize(g, y, sizes, normalization)
    real = g.op.Slice(y, np.array([0], _I64), np.array([1], _I64), np.array([-1], _I64))
    return g.op.Squeeze(real, np.array([0, -1], _I64))


@converter(aten.view_as_real.default, aten.view_as_complex.default, variant=COMPLEX)
@converter(aten.view_as_real.default, aten.view_as_complex.default)
def aten_view_as_real(g: GraphBuilder, x: str) -> str:
    """view_as_real(Tensor(a) self) -> Tensor(a) (same layout in this representation)"""
    return g.op.Identity(x)


_CONJ = (aten._conj.default, aten.conj_physical.default, aten._conj_physical.default)


@converter(*_CONJ, variant=COMPLEX)
@converter(*_CONJ)
def aten__conj(g: GraphBuilder, x, *, ctx: NodeContext):
    """_conj(Tensor(a) self) -> Tensor(a)"""
    if _is_complex(ctx.node.args[0]):
        return _conj(g, x)
    return g.op.Identity(x)


def to_complex(g: GraphBuilder, x: str, *, ctx: NodeContext) -> str:
    """Conversion to the complex output type of the current node: a real input gets a
    zero imaginary part."""
    real_type = {"torch.complex64": 1, "torch.complex128": 11}[str(ctx.torch_dtype())]
    if not _is_complex(ctx.node.args[0]):
        x = g.op.Unsqueeze(cast_to(g, x, real_type), np.array([-1], _I64))
        x = g.op.Concat(x, g.op.Mul(x, g.op.CastLike(np.array(0, np.float32), x)), axis=-1)
        return x
    y = cast_to(g, x, real_type)
    return g.op.Identity(y) if y == x else y


_NORM = {  # (forward, inverse) normalization codes of torch's norm argument
    None: (0, 2),
    "backward": (0, 2),
    "ortho": (1, 1),
    "forward": (2, 0),
}


def _resize(g: GraphBuilder, y: str, axes: list[int], sizes: list[int]) -> str:
    """Crops or zero-pads ``y`` along ``axes`` to ``sizes`` (static ints)."""
    shape = g.get_shape(y)
    for axis, size in zip(axes, sizes):
        current = shape[axis] if shape else None
        if not isinstance(size, int) or not isinstance(current, int):
            raise UnsupportedOpError("fft with s= needs static sizes", argument="s")
        ax = np.array([axis], _I64)
        if size < current:
            y = g.op.Slice(y, np.array([0], _I64), np.array([size], _I64), ax)
        elif size > current:
            y = g.op.Pad(
                y,
                np.array([0, size - current], _I64),
                g.op.CastLike(np.array(0, np.float32), y),
                ax,
            )
    return y


def _fftn(g: GraphBuilder, x, s, dim, norm, inverse: bool, *, ctx: NodeContext):
    if _is_complex(ctx.node.args[0]):
        raise UnsupportedOpError("fftn with s= on a complex input", argument="s")
    r = rank_of(g, x)
    if dim is None:
        dims = list(range(r)) if s is None else list(range(r - len(s), r))
    else:
        dims = [d % r for d in ([dim] if isinstance(dim, int) else dim)]
    y = g.op.Unsqueeze(x, np.array([0, -1], _I64))  # [1, ..., 1]
    if s is not None:
        y = _resize(g, y, [d + 1 for d in dims], list(s))
    sizes = [_size(g, y, d + 1) for d in dims]
    for d in dims:
        y = _idft(g, y, d + 1) if inverse else _dft(g, y, d + 1)
    y = _normalize(g, y, sizes, _NORM[norm][1 if inverse else 0])
    return g.op.Squeeze(y, np.array([0], _I64))


@converter(aten.fft_fftn.default, aten.fft_fft2.default, variant=COMPLEX)
@converter(aten.fft_fftn.default, aten.fft_fft2.default)
def aten_fft_fftn(
    g: GraphBuilder,
    x: str,
    s: int | str | Sequence[int | str] | None = None,
    dim: int | Sequence[int] | None = None,
    norm: str | None = None,
    *,
    ctx: NodeContext,
) -> str:
    """fft_fftn(Tensor self, SymInt[1]? s=None, int[1]? dim=None, str? norm=None) -> Tensor
    (real input; complex inputs go through the decomposition and _fft_c2c)"""
    if ctx.node.target == aten.fft_fft2.default and dim is None:
        dim = [-2, -1]
    return _fftn(g, x, s, dim, norm, False, ctx=ctx)


@converter(aten.fft_ifftn.default, aten.fft_ifft2.default, variant=COMPLEX)
@converter(aten.fft_ifftn.default, aten.fft_ifft2.default)
def aten_fft_ifftn(
    g: GraphBuilder,
    x: str,
    s: int | str | Sequence[int | str] | None = None,
    dim: int | Sequence[int] | None = None,
    norm: str | None = None,
    *,
    ctx: NodeContext,
) -> str:
    """fft_ifftn(Tensor self, SymInt[1]? s=None, int[1]? dim=None, str? norm=None) -> Tensor"""
    if ctx.node.target == aten.fft_ifft2.default and dim is None:
        dim = [-2, -1]
    return _fftn(g, x, s, dim, norm, True, ctx=ctx)


@converter(aten.complex.default, variant=COMPLEX)
@converter(aten.complex.default)
def aten_complex(g: GraphBuilder, real: str, imag: str) -> str:
    """complex(Tensor real, Tensor imag) -> Tensor"""
    b = g.op.Add(real, g.op.Mul(imag, g.op.CastLike(np.array(0, np.float32), imag)))
    r = g.op.Unsqueeze(g.op.Expand(real, g.op.Shape(b)), np.array([-1], _I64))
    i = g.op.Unsqueeze(g.op.Expand(imag, g.op.Shape(b)), np.array([-1], _I64))
    return g.op.Concat(r, i, axis=-1)


@converter(aten.polar.default)
def aten_polar(g: GraphBuilder, mag: str, angle: str) -> str:
    """polar(Tensor abs, Tensor angle) -> Tensor"""
    return aten_complex(g, g.op.Mul(mag, g.op.Cos(angle)), g.op.Mul(mag, g.op.Sin(angle)))
