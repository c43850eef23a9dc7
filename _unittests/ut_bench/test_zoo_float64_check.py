"""The zoo's check accepts a difference above its tolerance only when float32 rounding
explains it: onnxruntime at most twice as far as eager float32 from the model run in
float64."""

import pytest
import torch

from experimental_experiment.bench.zoo import _check, float64_outputs
from experimental_experiment.torch_interpreter import to_onnx


class _LargeSum(torch.nn.Module):
    """Sums thousands of products of large values: float32 rounding reaches 1e-2."""

    def __init__(self, shift: float = 0.0):
        super().__init__()
        gen = torch.Generator().manual_seed(0)
        self.weight = torch.nn.Parameter(torch.randn(4096, 8, generator=gen) * 100)
        self.shift = shift

    def forward(self, x):
        return x @ self.weight + self.shift


def _case(batch: int):
    gen = torch.Generator().manual_seed(batch)
    x = torch.randn(batch, 4096, generator=gen) * 100
    return dict(model=_LargeSum().eval(), check_inputs={"x": x})


def _onnx(model):
    return to_onnx(model, (torch.randn(2, 4096),), dynamic_shapes=({0: "batch"},))


@pytest.mark.parametrize("batch", [3, 5])
def test_float32_rounding_above_the_tolerance_passes(batch):
    case = _case(batch)
    result = _check(case, _onnx(case["model"]), atol=1e-6)
    assert result.max_diff > 1e-6  # above the tolerance: the float64 run decided
    assert result.onnx_to_float64 <= 2 * result.eager_to_float64


@pytest.mark.parametrize("batch", [3, 5])
def test_a_wrong_model_within_the_rounding_scale_fails(batch):
    """An exported model off by a constant larger than the rounding fails, and the
    message gives both distances to float64."""
    case = _case(batch)
    with torch.no_grad():
        rounding = max(
            float((e - o.double()).abs().max())
            for e, o in zip(
                float64_outputs(case["model"], case["check_inputs"]),
                [case["model"](**case["check_inputs"])],
            )
        )
    wrong = _LargeSum(shift=4 * rounding + 1e-3).eval()
    with pytest.raises(AssertionError, match="from float64: onnxruntime"):
        _check(case, _onnx(wrong), atol=1e-6)
