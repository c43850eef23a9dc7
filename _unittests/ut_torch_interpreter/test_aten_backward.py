"""Backward converters (the ops aot_autograd puts in backward graphs) against eager."""

import pytest
import torch

from experimental_experiment.ext_test_case import OpModule, check_export

aten = torch.ops.aten
DS2 = ({0: "batch", 1: "n"},) * 2
SHAPES = [(2, 3), (5, 4)]


def _pairs(dtype=torch.float32, shapes=SHAPES):
    return [(torch.randn(s).to(dtype), torch.randn(s).to(dtype)) for s in shapes]


def _tol(dtype):
    return dict(atol=1e-2, rtol=1e-2) if dtype != torch.float32 else dict(atol=1e-5)


UNARY_GRAD = {
    "threshold": lambda g, x: aten.threshold_backward(g, x, 0.0),
    "threshold_half": lambda g, x: aten.threshold_backward(g, x, 0.5),
    "sigmoid": lambda g, x: aten.sigmoid_backward(g, torch.sigmoid(x)),
    "tanh": lambda g, x: aten.tanh_backward(g, torch.tanh(x)),
    "silu": lambda g, x: aten.silu_backward(g, x),
    "gelu": lambda g, x: aten.gelu_backward(g, x),
    "gelu_tanh": lambda g, x: aten.gelu_backward(g, x, approximate="tanh"),
    "hardtanh": lambda g, x: aten.hardtanh_backward(g, x, -0.5, 0.5),
    "leaky_relu": lambda g, x: aten.leaky_relu_backward(g, x, 0.2, False),
    "elu": lambda g, x: aten.elu_backward(g, 1.5, 1.2, 0.7, False, x),
    "elu_result": lambda g, x: aten.elu_backward(
        g, 1.5, 1.2, 0.7, True, torch.nn.functional.elu(x, 1.5) * 1.2
    ),
    "softplus": lambda g, x: aten.softplus_backward(g, x, 2.0, 1.0),
    "hardsigmoid": lambda g, x: aten.hardsigmoid_backward(g, x * 4),
    "hardswish": lambda g, x: aten.hardswish_backward(g, x * 4),
    "softmax": lambda g, x: aten._softmax_backward_data(g, torch.softmax(x, 1), 1, x.dtype),
    "softmax_dim0": lambda g, x: aten._softmax_backward_data(g, torch.softmax(x, 0), 0, x.dtype),
    "log_softmax": lambda g, x: aten._log_softmax_backward_data(
        g, torch.log_softmax(x, -1), -1, x.dtype
    ),
    "dropout": lambda g, x: aten.native_dropout_backward(g, x > 0, 2.0),
    "mse_none": lambda g, x: aten.mse_loss_backward(g, x, x * 0.5, 0),
    "mse_mean": lambda g, x: aten.mse_loss_backward(g.sum(), x, x * 0.5, 1),
    "mse_sum": lambda g, x: aten.mse_loss_backward(g.sum(), x, x * 0.5, 2),
}


@pytest.mark.parametrize("name", sorted(UNARY_GRAD))
@pytest.mark.parametrize("dtype", [torch.float32, torch.float16])
def test_unary_grad(name, dtype):
    check_export(OpModule(UNARY_GRAD[name]), _pairs(dtype), dynamic_shapes=DS2, **_tol(dtype))


def test_autograd_matches_ops():
    # the converters compute what autograd computes, not only what the op does
    x = torch.randn(4, 5, requires_grad=True)
    for fn, op in [
        (torch.nn.functional.silu, lambda g: aten.silu_backward(g, x)),
        (torch.nn.functional.gelu, lambda g: aten.gelu_backward(g, x)),
    ]:
        g = torch.randn(4, 5)
        (expected,) = torch.autograd.grad(fn(x), x, g)
        torch.testing.assert_close(op(g), expected)


class EmbeddingGrad(torch.nn.Module):
    def __init__(self, padding_idx=-1, scale=False):
        super().__init__()
        self.padding_idx, self.scale = padding_idx, scale

    def forward(self, g, ids):
        return aten.embedding_dense_backward(g, ids, 10, self.padding_idx, self.scale)


@pytest.mark.parametrize("padding_idx,scale", [(-1, False), (3, False), (-1, True)])
def test_embedding_dense_backward(padding_idx, scale):
    inputs = []
    for b, s in [(2, 7), (3, 5)]:
        ids = torch.randint(0, 10, (b, s))
        ids[0, :3] = 3  # repeated indices, one of them the padding index
        inputs.append((torch.randn(b, s, 4), ids))
    ds = ({0: "batch", 1: "seq"}, {0: "batch", 1: "seq"})
    check_export(EmbeddingGrad(padding_idx, scale), inputs, dynamic_shapes=ds)


class SliceGrad(torch.nn.Module):
    def __init__(self, dim, start, end, step):
        super().__init__()
        self.args = dim, start, end, step

    def forward(self, x):
        dim, start, end, step = self.args
        y = torch.ops.aten.slice.Tensor(x, dim, start, end, step)
        return aten.slice_backward(y * 2, x.shape, dim, start, end, step)


@pytest.mark.parametrize(
    "args",
    [
        (1, 1, 3, 1),
        (1, 0, 9223372036854775807, 2),
        (0, -3, 9223372036854775807, 1),
        (1, 1, -1, 1),
        (0, 1, 5, 2),
    ],
)
def test_slice_backward(args):
    inputs = [(torch.randn(6, 7),), (torch.randn(8, 9),)]
    check_export(SliceGrad(*args), inputs, dynamic_shapes=({0: "a", 1: "b"},))


def test_select_backward():
    def fn(x):
        return aten.select_backward(x[:, 2] * 3, x.shape, 1, 2)

    inputs = [(torch.randn(6, 7),), (torch.randn(8, 9),)]
    check_export(OpModule(fn), inputs, dynamic_shapes=({0: "a", 1: "b"},))
    check_export(
        OpModule(lambda x: aten.select_backward(x[-1] * 3, x.shape, 0, -1)),
        inputs,
        dynamic_shapes=({0: "a", 1: "b"},),
    )


class LayerNormGrad(torch.nn.Module):
    def __init__(self, normalized_shape, mask, affine=True):
        super().__init__()
        self.normalized_shape, self.mask, self.affine = normalized_shape, mask, affine

    def forward(self, g, x, w, b):
        w, b = (w, b) if self.affine else (None, None)
        _, mean, rstd = aten.native_layer_norm(x, self.normalized_shape, w, b, 1e-5)
        res = aten.native_layer_norm_backward(
            g, x, self.normalized_shape, mean, rstd, w, b, self.mask
        )
        return tuple(r for r in res if r is not None)


@pytest.mark.parametrize("mask", [[True, True, True], [True, False, False], [False, True, True]])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float16])
def test_native_layer_norm_backward(mask, dtype):
    inputs = []
    for shape in [(2, 3, 8), (4, 5, 8)]:
        inputs.append(tuple(torch.randn(s).to(dtype) for s in [shape, shape, (8,), (8,)]))
    ds = ({0: "a", 1: "b"}, {0: "a", 1: "b"}, None, None)
    check_export(LayerNormGrad([8], mask), inputs, dynamic_shapes=ds, **_tol(dtype))


def test_native_layer_norm_backward_2d_no_affine():
    inputs = [
        tuple(torch.randn(s) for s in [(3, 4, 5)] * 2 + [(4, 5)] * 2),
        tuple(torch.randn(s) for s in [(6, 4, 5)] * 2 + [(4, 5)] * 2),
    ]
    ds = ({0: "a"}, {0: "a"}, None, None)
    check_export(
        LayerNormGrad([4, 5], [True, False, False], affine=False), inputs, dynamic_shapes=ds
    )


class BatchNormGrad(torch.nn.Module):
    def __init__(self, train):
        super().__init__()
        self.train_mode = train

    def forward(self, g, x, w, rm, rv):
        _, mean, invstd = aten.native_batch_norm(
            x, w, None, rm.clone(), rv.clone(), self.train_mode, 0.1, 1e-5
        )
        return aten.native_batch_norm_backward(
            g, x, w, rm, rv, mean, invstd, self.train_mode, 1e-5, [True, True, True]
        )


@pytest.mark.parametrize("train", [True, False])
def test_native_batch_norm_backward(train):
    inputs = [
        tuple(torch.randn(s) for s in [(n, 3, 4, 5)] * 2)
        + (torch.randn(3), torch.randn(3), torch.rand(3) + 0.5)
        for n in (2, 4)
    ]
    ds = ({0: "n"}, {0: "n"}, None, None, None)
    check_export(BatchNormGrad(train), inputs, dynamic_shapes=ds)


class ConvGrad(torch.nn.Module):
    def __init__(self, stride, padding, dilation, groups, mask):
        super().__init__()
        self.args = stride, padding, dilation, groups, mask

    def forward(self, x, w):
        stride, padding, dilation, groups, mask = self.args
        y = aten.convolution(x, w, None, stride, padding, dilation, False, [0], groups)
        res = aten.convolution_backward(
            y * 0.5 + 1, x, w, [w.shape[0]], stride, padding, dilation, False, [0], groups, mask
        )
        return tuple(r for r in res if r is not None)


CONV_CASES = {
    "plain": ([1, 1], [0, 0], [1, 1], 1),
    "stride2_pad1": ([2, 2], [1, 1], [1, 1], 1),
    "stride3_dil2": ([3, 2], [1, 2], [2, 1], 1),
    "groups2": ([2, 1], [1, 0], [1, 1], 2),
}


@pytest.mark.parametrize("case", sorted(CONV_CASES))
@pytest.mark.parametrize("dynamic", [False, True])
def test_convolution_backward(case, dynamic):
    stride, padding, dilation, groups = CONV_CASES[case]
    w = torch.randn(4, 4 // groups, 3, 3)
    inputs = [(torch.randn(2, 4, 9, 10), w), (torch.randn(3, 4, 12, 11), w)]
    ds = ({0: "n", 2: "h", 3: "w"}, None) if dynamic else None
    check_export(
        ConvGrad(stride, padding, dilation, groups, [True, True, True]),
        inputs if dynamic else inputs[:1],
        dynamic_shapes=ds,
    )


def test_convolution_backward_1d_mask():
    w = torch.randn(6, 2, 3)
    inputs = [(torch.randn(2, 2, 9), w), (torch.randn(3, 2, 14), w)]
    check_export(
        ConvGrad([2], [1], [1], 1, [False, True, False]),
        inputs,
        dynamic_shapes=({0: "n", 2: "l"}, None),
    )


@pytest.mark.parametrize(
    "k,s,p,ceil", [(2, 2, 0, False), (3, 2, 1, False), (2, 2, 0, True), (3, 1, 1, False)]
)
def test_max_pool2d_with_indices_backward(k, s, p, ceil):
    def fn(g, x):
        args = [k, k], [s, s], [p, p], [1, 1], ceil
        y, idx = aten.max_pool2d_with_indices(x, *args)
        grad = g[..., : y.shape[2], : y.shape[3]] + y
        return aten.max_pool2d_with_indices_backward(grad, x, *args, idx)

    inputs = [
        (torch.randn(2, 3, 9, 9), torch.randn(2, 3, 9, 9)),
        (torch.randn(1, 3, 7, 8), torch.randn(1, 3, 7, 8)),
    ]
    ds = ({0: "n", 2: "h", 3: "w"},) * 2
    check_export(OpModule(fn), inputs, dynamic_shapes=ds)


@pytest.mark.parametrize("dtype", [torch.float64, torch.float16, torch.int64, torch.bool])
def test_prims_convert_element_type(dtype):
    def fn(x):
        return torch.ops.prims.convert_element_type(x * 3, dtype)

    check_export(
        OpModule(fn),
        [(torch.randn(2, 3),), (torch.randn(4, 5),)],
        dynamic_shapes=({0: "a", 1: "b"},),
        atol=1e-2,
    )


@pytest.mark.parametrize(
    "k,s,p,ceil,include,div",
    [
        (2, 2, 0, False, True, None),
        (3, 2, 1, False, True, None),
        (3, 2, 1, False, False, None),
        (3, 2, 1, True, True, None),
        (3, 2, 1, True, False, None),
        (3, 1, 1, False, True, 4),
    ],
)
def test_avg_pool2d_backward(k, s, p, ceil, include, div):
    def fn(g, x):
        args = [k, k], [s, s], [p, p], ceil, include, div
        y = aten.avg_pool2d(x, *args)
        grad = g[..., : y.shape[2], : y.shape[3]] + y
        return aten.avg_pool2d_backward(grad, x, *args)

    inputs = [
        (torch.randn(2, 3, 9, 9), torch.randn(2, 3, 9, 9)),
        (torch.randn(1, 3, 7, 8), torch.randn(1, 3, 7, 8)),
    ]
    ds = ({0: "n", 2: "h", 3: "w"},) * 2
    check_export(OpModule(fn), inputs, dynamic_shapes=ds)


@pytest.mark.parametrize("include", [True, False])
def test_avg_pool2d_backward_ceil_window_in_padding(include):
    # static shapes: with ceil_mode, torch drops the last window (it would start in
    # the padding), the forward converter only reproduces that with static dims
    def fn(g, x):
        args = [2, 2], [3, 3], [1, 1], True, include, None
        y = aten.avg_pool2d(x, *args)
        return aten.avg_pool2d_backward(g[..., : y.shape[2], : y.shape[3]] + y, x, *args)

    check_export(OpModule(fn), [(torch.randn(1, 2, 7, 7), torch.randn(1, 2, 7, 7))])


def test_avg_pool3d_backward():
    def fn(g, x):
        args = [2, 2, 2], [2, 2, 2], [1, 0, 1], False, True, None
        y = aten.avg_pool3d(x, *args)
        return aten.avg_pool3d_backward(
            g[:, :, : y.shape[2], : y.shape[3], : y.shape[4]] + y, x, *args
        )

    inputs = [(torch.randn(2, 2, 5, 6, 4),) * 2, (torch.randn(1, 2, 4, 7, 5),) * 2]
    ds = ({0: "n", 2: "a", 3: "b", 4: "c"},) * 2
    check_export(OpModule(fn), inputs, dynamic_shapes=ds)


def test_mish_backward():
    check_export(OpModule(lambda g, x: aten.mish_backward(g, x * 3)), _pairs(), dynamic_shapes=DS2)


class NllGrad(torch.nn.Module):
    def __init__(self, reduction, weighted):
        super().__init__()
        self.reduction, self.weighted = reduction, weighted

    def forward(self, g, x, t, w):
        w = w if self.weighted else None
        two_d = x.dim() > 2
        fwd = aten.nll_loss2d_forward if two_d else aten.nll_loss_forward
        bwd = aten.nll_loss2d_backward if two_d else aten.nll_loss_backward
        out, total = fwd(x, t, w, self.reduction, -100)
        grad = g[: out.shape[0]] if self.reduction == 0 and x.dim() > 1 else g.sum()
        return bwd(grad * 2 + out, x, t, w, self.reduction, -100, total)


@pytest.mark.parametrize("reduction", [0, 1, 2])
@pytest.mark.parametrize("weighted", [False, True])
def test_nll_loss_backward(reduction, weighted):
    inputs = []
    for n in (4, 7):
        t = torch.randint(0, 5, (n,))
        t[1] = -100
        inputs.append((torch.randn(n), torch.randn(n, 5), t, torch.rand(5)))
    ds = ({0: "n"}, {0: "n"}, {0: "n"}, None)
    check_export(NllGrad(reduction, weighted), inputs, dynamic_shapes=ds)


@pytest.mark.parametrize("reduction", [0, 2])
def test_nll_loss_backward_unbatched(reduction):
    inputs = [(torch.randn(1), torch.randn(5), torch.tensor(2), torch.rand(5))]
    check_export(NllGrad(reduction, True), inputs)


@pytest.mark.parametrize("reduction", [0, 1])
def test_nll_loss2d_backward(reduction):
    inputs = []
    for n, h in ((2, 3), (3, 5)):
        t = torch.randint(0, 4, (n, h, 2))
        t[0, 0, 0] = -100
        inputs.append((torch.randn(n, h, 2), torch.randn(n, 4, h, 2), t, torch.rand(4)))
    ds = ({0: "n", 1: "h"}, {0: "n", 2: "h"}, {0: "n", 1: "h"}, None)
    check_export(NllGrad(reduction, True), inputs, dynamic_shapes=ds)
