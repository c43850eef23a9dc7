"""Loss converters (mse_loss, nll_loss, cross_entropy) against eager, on two shapes."""

import pytest
import torch

from experimental_experiment.ext_test_case import OpModule, check_export

aten = torch.ops.aten
F = torch.nn.functional


@pytest.mark.parametrize("reduction", ["none", "mean", "sum"])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float16])
def test_mse_loss(reduction, dtype):
    inputs = [
        (torch.randn(2, 3).to(dtype), torch.randn(2, 3).to(dtype)),
        (torch.randn(4, 5).to(dtype), torch.randn(4, 5).to(dtype)),
    ]
    r = {"none": 0, "mean": 1, "sum": 2}[reduction]
    check_export(
        OpModule(lambda x, y: aten.mse_loss(x, y, r)),
        inputs,
        dynamic_shapes=({0: "a", 1: "b"},) * 2,
        # float16: torch squares in float32 then rounds, onnx squares in float16
        atol=1e-2 if dtype == torch.float16 else 1e-5,
        rtol=1e-2 if dtype == torch.float16 else 1e-3,
    )


def _targets(n, c, shape=()):
    t = torch.randint(0, c, (n, *shape))
    t.view(-1)[0] = -100  # an ignored position
    return t


class NllForward(torch.nn.Module):
    def __init__(self, reduction, weighted):
        super().__init__()
        self.reduction, self.weighted = reduction, weighted

    def forward(self, x, t, w):
        fn = aten.nll_loss_forward if x.dim() <= 2 else aten.nll_loss2d_forward
        return fn(
            x.log_softmax(1 if x.dim() > 1 else 0),
            t,
            w if self.weighted else None,
            self.reduction,
            -100,
        )


@pytest.mark.parametrize("reduction", [0, 1, 2])
@pytest.mark.parametrize("weighted", [False, True])
def test_nll_loss_forward(reduction, weighted):
    inputs = [
        (torch.randn(4, 5), _targets(4, 5), torch.rand(5)),
        (torch.randn(7, 5), _targets(7, 5), torch.rand(5)),
    ]
    check_export(NllForward(reduction, weighted), inputs, dynamic_shapes=({0: "n"}, {0: "n"}, None))


@pytest.mark.parametrize("reduction", [0, 1])
def test_nll_loss_forward_unbatched(reduction):
    inputs = [(torch.randn(5), torch.tensor(3), torch.rand(5))]
    check_export(NllForward(reduction, True), inputs)


@pytest.mark.parametrize("reduction", [0, 1, 2])
def test_nll_loss2d_forward(reduction):
    inputs = [
        (torch.randn(2, 4, 3, 5), _targets(2, 4, (3, 5)), torch.rand(4)),
        (torch.randn(3, 4, 6, 2), _targets(3, 4, (6, 2)), torch.rand(4)),
    ]
    ds = ({0: "n", 2: "h", 3: "w"}, {0: "n", 1: "h", 2: "w"}, None)
    check_export(NllForward(reduction, True), inputs, dynamic_shapes=ds)


@pytest.mark.parametrize("label_smoothing", [0.0, 0.1])
@pytest.mark.parametrize("reduction", ["none", "mean", "sum"])
@pytest.mark.parametrize("weighted", [False, True])
def test_cross_entropy(label_smoothing, reduction, weighted):
    def fn(x, t, w):
        return F.cross_entropy(
            x, t, w if weighted else None, reduction=reduction, label_smoothing=label_smoothing
        )

    inputs = [
        (torch.randn(4, 5), _targets(4, 5), torch.rand(5)),
        (torch.randn(6, 5), _targets(6, 5), torch.rand(5)),
    ]
    check_export(OpModule(fn), inputs, dynamic_shapes=({0: "n"}, {0: "n"}, None))
    inputs = [(torch.randn(2, 5, 3), _targets(2, 5, (3,)), torch.rand(5))]
    check_export(OpModule(fn), inputs)
    inputs = [(torch.randn(5), torch.tensor(2), torch.rand(5))]
    check_export(OpModule(fn), inputs)


@pytest.mark.parametrize("label_smoothing", [0.0, 0.2])
@pytest.mark.parametrize("reduction", ["none", "mean", "sum"])
def test_cross_entropy_probabilities(label_smoothing, reduction):
    def fn(x, t, w):
        return F.cross_entropy(
            x, t.softmax(1), w, reduction=reduction, label_smoothing=label_smoothing
        )

    inputs = [
        (torch.randn(4, 5), torch.randn(4, 5), torch.rand(5)),
        (torch.randn(6, 5), torch.randn(6, 5), torch.rand(5)),
    ]
    check_export(OpModule(fn), inputs, dynamic_shapes=({0: "n"}, {0: "n"}, None))
