"""im2col / col2im (nn.functional.unfold / fold) against eager on two image sizes."""

import pytest
import torch

from experimental_experiment.ext_test_case import OpModule, check_export

DS = ({0: "batch", 2: "h", 3: "w"},)
PARAMS = [
    dict(kernel_size=2, stride=2),  # MobileViT's patches
    dict(kernel_size=3),
    dict(kernel_size=(2, 3), dilation=(2, 1), padding=(1, 2), stride=(1, 2)),
]


@pytest.mark.parametrize("params", PARAMS)
def test_unfold(params):
    model = OpModule(lambda x: torch.nn.functional.unfold(x, **params))
    onx = check_export(
        model, [(torch.randn(2, 3, 8, 10),), (torch.randn(3, 3, 11, 7),)], dynamic_shapes=DS
    )
    assert "ScatterND" not in {n.op_type for n in onx.graph.node}


def test_unfold_unbatched():
    model = OpModule(lambda x: torch.nn.functional.unfold(x, kernel_size=2, stride=1))
    check_export(
        model,
        [(torch.randn(3, 6, 5),), (torch.randn(3, 9, 4),)],
        dynamic_shapes=({1: "h", 2: "w"},),
    )


@pytest.mark.parametrize("params", PARAMS)
def test_unfold_then_fold(params):
    # fold sums overlapping blocks: unfold then fold multiplies each pixel by the
    # number of blocks covering it, as eager does
    def fn(x):
        cols = torch.nn.functional.unfold(x, **params)
        return torch.nn.functional.fold(cols * 2, x.shape[2:], **params)

    onx = check_export(
        OpModule(fn), [(torch.randn(2, 3, 8, 10),), (torch.randn(3, 3, 12, 6),)], dynamic_shapes=DS
    )
    assert "Col2Im" in {n.op_type for n in onx.graph.node}


def test_fold_static_output_size():
    model = OpModule(lambda c: torch.nn.functional.fold(c, (4, 6), kernel_size=2, stride=2))
    check_export(
        model, [(torch.randn(2, 12, 6),), (torch.randn(5, 12, 6),)], dynamic_shapes=({0: "batch"},)
    )


def test_unfold_empty_batch():
    # no -1 in the final Reshape: an empty batch keeps its shape (OpInfo has one)
    model = OpModule(lambda x: torch.nn.functional.unfold(x, kernel_size=2))
    check_export(model, [(torch.randn(0, 3, 5, 6),)])
