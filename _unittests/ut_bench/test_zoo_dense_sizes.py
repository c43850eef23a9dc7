"""Dense heads (detection, segmentation) export images large enough for a stride-32
backbone to keep feature maps of more than one row: at 32 pixels the map has one,
torch.export specializes it to 1 and DETR's exported model fails (a Concat) on any
larger image. The test exports DETR's tiny detector and checks onnxruntime against the
unpatched eager model on a second, larger image."""

import warnings

import pytest
import torch

from experimental_experiment.bench.zoo import run_case_inline
from experimental_experiment.bench.zoo_cases import build_case
from experimental_experiment.bench.zoo_head_inputs import GROW, MIN_DENSE_SIDE, adapt_image_size
from experimental_experiment.bench.zoo_heads import ZooCase


class _Stride32(torch.nn.Module):
    """A backbone of stride 32 (one output row per 32 pixels)."""

    def __init__(self):
        super().__init__()
        self.conv = torch.nn.Conv2d(3, 4, 32, stride=32)

    def forward(self, pixel_values):
        return self.conv(pixel_values)


def test_export_images_are_grown_for_a_dense_head():
    small = dict(pixel_values=torch.randn(2, 3, 32, 32))
    check = dict(pixel_values=torch.randn(3, 3, 32, 32))
    ds = {"pixel_values": {0: "batch"}}
    inputs, bigger = adapt_image_size(
        ZooCase("detr", "object-detection"), _Stride32(), small, check, ds, lambda m, x: m(**x)
    )
    side = MIN_DENSE_SIDE
    assert inputs["pixel_values"].shape == (2, 3, side, side)
    assert bigger["pixel_values"].shape == (3, 3, side + GROW, side + GROW)
    assert ds["pixel_values"] == {0: "batch", 2: "height", 3: "width"}


def test_a_model_of_one_image_size_stays_static():
    def run(model, inputs):
        if inputs["pixel_values"].shape[-1] != 32:
            raise ValueError("one size only")

    small = dict(pixel_values=torch.randn(2, 3, 32, 32))
    check = dict(pixel_values=torch.randn(3, 3, 32, 32))
    ds = {"pixel_values": {0: "batch"}}
    inputs, same = adapt_image_size(
        ZooCase("vit", "image-segmentation"), None, small, check, ds, run
    )
    assert inputs is small and same is check and ds == {"pixel_values": {0: "batch"}}


@pytest.mark.parametrize("model_type", ["detr"])
def test_detr_detection_runs_on_a_larger_image(model_type):
    case = ZooCase(model_type, "object-detection")
    data = build_case(case)
    export, check = data["inputs"]["pixel_values"], data["check_inputs"]["pixel_values"]
    assert min(export.shape[2:]) >= MIN_DENSE_SIDE and check.shape[2] > export.shape[2]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        row = run_case_inline(case, "to_onnx", build=lambda _case: data)
    assert row["status"] == "pass", row
    assert float(row["max_diff"]) <= 1e-4
