"""Patches of vision models branching on the image size (``if size != native:
resize``): the exported model keeps a dynamic batch, height and width, and onnxruntime
matches the eager (unpatched) model on image sizes taking either branch; in eager mode
the patched model computes exactly what the original computes."""

import pytest
import torch

from experimental_experiment.torch_interpreter.patches.patch_image_branches import (
    get_image_branch_patches,
)

pytestmark = pytest.mark.usefixtures("quiet_transformers")


def _kaiming(model):
    """Weights giving outputs far from 0 (the default init of a tiny model gives
    outputs where any resize would go unnoticed)."""
    for module in model.modules():
        if isinstance(module, torch.nn.Conv2d):
            torch.nn.init.kaiming_normal_(module.weight)
        elif isinstance(module, torch.nn.BatchNorm2d):
            torch.nn.init.ones_(module.weight)
            torch.nn.init.zeros_(module.bias)
    return model


def test_mobilevit_patches_follow_the_image_size(check_image_sizes):
    """MobileViT resizes a feature map whose size is not a multiple of the patch size
    (2): 64x96 gives even feature maps down to 1/32 (no resize), 72x104 and 80x48 odd
    ones at 1/8, 1/16 or 1/32 (a resize there and back)."""
    from transformers import MobileViTConfig, MobileViTForSemanticSegmentation

    config = MobileViTConfig(
        image_size=64,
        hidden_sizes=[16, 24, 32],
        neck_hidden_sizes=[8, 8, 16, 16, 24, 32, 64],
        num_attention_heads=2,
        aspp_out_channels=16,
        num_labels=3,
    )
    model = _kaiming(MobileViTForSemanticSegmentation(config).eval())
    with torch.no_grad():
        assert model(torch.randn(1, 3, 72, 104)).logits.abs().max() > 0.1
    check_image_sizes(
        model,
        ["MobileViTLayer.unfolding"],
        [(2, 3, 64, 96), (3, 3, 72, 104), (1, 3, 80, 48)],
        lambda out: (out.logits,),
        get_image_branch_patches(),
        scaled_atol=True,
    )


def test_tipsv2_dpt_positions_and_residuals_follow_the_image_size(check_image_sizes):
    """TIPSv2's positions are resized to the grid of patches unless it is the native
    one (32x32 here: 4x4 patches of 8); the fusion of the DPT head resizes the residual
    when the grid has an odd size (40x56: 5x7)."""
    from transformers import Tipsv2DptConfig, Tipsv2DptForNormalEstimation

    backbone = dict(
        model_type="tipsv2_vision_model",
        hidden_size=32,
        num_hidden_layers=4,
        num_attention_heads=4,
        image_size=32,
        patch_size=8,
        num_register_tokens=1,
        out_indices=[1, 2, 3, 4],
        reshape_hidden_states=False,
    )
    config = Tipsv2DptConfig(
        backbone_config=backbone, neck_hidden_sizes=[16, 24, 32, 48], fusion_hidden_size=32
    )
    model = Tipsv2DptForNormalEstimation(config).eval()
    check_image_sizes(
        model,
        [
            "Tipsv2VisionEmbeddings.interpolate_pos_encoding",
            "Tipsv2DptFeatureFusionLayer.forward",
        ],
        [(2, 3, 48, 64), (3, 3, 40, 56), (1, 3, 32, 32)],
        lambda out: (out.normals,),
        get_image_branch_patches(),
        scaled_atol=True,
    )


def test_depth_pro_pyramid_follows_the_image_size(check_image_sizes):
    """DepthPro splits three scaled images into patches of 16 pixels (an image of the
    patch size is not split: exported on a square image, that test made the width the
    height), merges the patches' grids of 4x4 tokens without their inner borders (one
    token each: a loop over the patches) and resizes the features to ``size // 2**e``
    with ``e = int(log2(width / 4))``: 128 gives e = 5, 64 e = 4; 160x128 checks an
    image taller than wide (``math`` and ``torch_int`` of the image-size patches,
    ``len`` of the model patches)."""
    from transformers import DepthProConfig, DepthProForDepthEstimation

    dinov2 = dict(
        model_type="dinov2",
        hidden_size=32,
        num_hidden_layers=2,
        num_attention_heads=2,
        image_size=16,
        patch_size=4,
    )
    config = DepthProConfig(
        patch_size=16,
        patch_model_config=dinov2,
        image_model_config=dinov2,
        fov_model_config=dinov2,
        use_fov_model=False,
        intermediate_hook_ids=[1, 0],
        intermediate_feature_dims=[16, 16],
        scaled_images_feature_dims=[32, 32, 16],
        fusion_hidden_size=32,
    )
    model = DepthProForDepthEstimation(config).eval()
    check_image_sizes(
        model,
        ["modeling_depth_pro.split_to_patches", "modeling_depth_pro.merge_patches"],
        [(2, 3, 128, 128), (3, 3, 160, 128), (1, 3, 64, 64)],
        lambda out: (out.predicted_depth,),
        get_image_branch_patches(),
        scaled_atol=True,
    )


@pytest.mark.parametrize("batch", [1, 2])
def test_depth_pro_merge_by_index_matches_the_loop(batch, monkeypatch):
    """The merge of the patches by one gather per axis, forced on plain numbers, gives
    the original's numbers bit for bit: grids of 1 to 7 patches a side, a number of
    patches that is not a square, paddings of 0 to more than a quarter of a patch."""
    import transformers.models.depth_pro.modeling_depth_pro as depth_pro

    from experimental_experiment.torch_interpreter.patches import patch_image_branches

    merge = patch_image_branches._merged_by_index(depth_pro.merge_patches)
    monkeypatch.setattr(patch_image_branches, "_any_symbolic", lambda *sizes: True)
    for n in (1, 2, 3, 4, 5, 9, 12, 49):
        for out, padding in [(4, 1), (8, 2), (8, 6), (12, 3), (4, 0)]:
            x = torch.randn(n * batch, 3, out, out)
            expected = depth_pro.merge_patches(x, batch, padding)
            torch.testing.assert_close(merge(x, batch, padding), expected, rtol=0, atol=0)
