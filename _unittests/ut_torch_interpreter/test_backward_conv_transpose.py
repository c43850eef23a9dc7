"""Backward of transposed convolutions (convolution_backward with transposed=True)
against eager PyTorch, static and dynamic spatial sizes."""

import pytest
import torch

from experimental_experiment.ext_test_case import check_export

aten = torch.ops.aten


class ConvTransposeGrad(torch.nn.Module):
    def __init__(self, stride, padding, dilation, output_padding, groups, mask):
        super().__init__()
        self.args = stride, padding, dilation, output_padding, groups, mask

    def forward(self, x, w):
        stride, padding, dilation, output_padding, groups, mask = self.args
        y = aten.convolution(x, w, None, stride, padding, dilation, True, output_padding, groups)
        res = aten.convolution_backward(
            torch.sin(y),
            x,
            w,
            [w.shape[1] * groups],
            stride,
            padding,
            dilation,
            True,
            output_padding,
            groups,
            mask,
        )
        return tuple(r for r in res if r is not None)


# stride, padding, dilation, output_padding, groups
CASES = {
    "plain": ([1, 1], [0, 0], [1, 1], [0, 0], 1),
    "stride2_pad1_outpad1": ([2, 2], [1, 1], [1, 1], [1, 1], 1),
    "stride3_dil2": ([3, 2], [1, 2], [2, 1], [2, 0], 1),
    "groups2": ([2, 1], [1, 0], [1, 1], [0, 0], 2),
}


@pytest.mark.parametrize("case", sorted(CASES))
@pytest.mark.parametrize("dynamic", [False, True])
def test_conv_transpose_backward(case, dynamic):
    stride, padding, dilation, output_padding, groups = CASES[case]
    w = torch.randn(4, 6 // groups, 3, 3)
    inputs = [(torch.randn(2, 4, 5, 6), w), (torch.randn(3, 4, 7, 4), w)]
    ds = ({0: "n", 2: "h", 3: "w"}, None) if dynamic else None
    model = ConvTransposeGrad(stride, padding, dilation, output_padding, groups, [True, True, True])
    check_export(model, inputs if dynamic else inputs[:1], dynamic_shapes=ds)


def test_conv_transpose1d_backward_mask():
    w = torch.randn(2, 3, 4)
    inputs = [(torch.randn(2, 2, 9), w), (torch.randn(3, 2, 14), w)]
    # (eager's 1-D kernel returns a 4-D weight gradient with the mask [True, False, True])
    for mask in ([False, True, False], [True, False, False]):
        check_export(
            ConvTransposeGrad([2], [1], [1], [1], 1, mask),
            inputs,
            dynamic_shapes=({0: "n", 2: "l"}, None),
        )


def test_matches_autograd():
    x, w = torch.randn(2, 4, 5, 6), torch.randn(4, 3, 3, 3)
    gx, gw, _ = ConvTransposeGrad([2, 2], [1, 1], [1, 1], [1, 1], 1, [True, True, True])(x, w)
    # the module feeds sin(y) as the gradient of y: d/dy of sum(-cos(y)) is sin(y)
    x2, w2 = x.clone().requires_grad_(), w.clone().requires_grad_()
    y2 = torch.nn.functional.conv_transpose2d(x2, w2, stride=2, padding=1, output_padding=1)
    (-torch.cos(y2)).sum().backward()
    torch.testing.assert_close(gx, x2.grad, atol=1e-4, rtol=1e-4)
    torch.testing.assert_close(gw, w2.grad, atol=1e-4, rtol=1e-4)
