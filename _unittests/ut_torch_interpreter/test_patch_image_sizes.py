"""Patches of vision models computing a size from the image size with Python numbers:
the exported model keeps a dynamic batch, height and width, and onnxruntime matches
the eager (unpatched) model on two image sizes; in eager mode the patched model
computes exactly what the original computes."""

import math
from typing import Any

import numpy as np
import onnxruntime
import pytest
import torch

from experimental_experiment.errors import ConstrainedDimensionWarning
from experimental_experiment.torch_interpreter import to_onnx
from experimental_experiment.torch_interpreter.patches import (
    patch_image_sizes,
)
from experimental_experiment.torch_interpreter.patches.patch_image_sizes import (
    MATH_KEEPING_SIZES,
    TORCH_KEEPING_SIZES,
    get_image_size_patches,
)

pytestmark = pytest.mark.usefixtures("quiet_transformers")


def _dinov2():
    return dict(
        model_type="dinov2",
        hidden_size=32,
        num_hidden_layers=4,
        num_attention_heads=4,
        image_size=32,
        patch_size=8,
        out_indices=[1, 2, 3, 4],
        reshape_hidden_states=False,
    )


def _depth_config(cls):
    return cls(
        backbone_config=_dinov2(),
        patch_size=8,
        reassemble_hidden_size=32,
        neck_hidden_sizes=[16, 32, 48, 64],
        fusion_hidden_size=32,
        head_hidden_size=16,
    )


def test_depth_anything_depth_follows_the_image_size(check_image_sizes):
    from transformers import DepthAnythingConfig, DepthAnythingForDepthEstimation

    torch.manual_seed(0)
    model = DepthAnythingForDepthEstimation(_depth_config(DepthAnythingConfig)).eval()
    check_image_sizes(
        model,
        ["DepthAnythingDepthEstimationHead.forward"],
        [(2, 3, 32, 48), (3, 3, 48, 40)],
        lambda out: (out.predicted_depth,),
        get_image_size_patches(),
        seed=1,
    )


def test_prompt_depth_anything_depth_follows_the_image_size(check_image_sizes):
    from transformers import PromptDepthAnythingConfig, PromptDepthAnythingForDepthEstimation

    torch.manual_seed(0)
    config = _depth_config(PromptDepthAnythingConfig)
    model = PromptDepthAnythingForDepthEstimation(config).eval()
    check_image_sizes(
        model,
        ["modeling_prompt_depth_anything.torch_int"],
        [(2, 3, 32, 48), (3, 3, 48, 40)],
        lambda out: (out.predicted_depth,),
        get_image_size_patches(),
        seed=1,
    )


def test_dpt_square_grid_follows_the_image_size(check_image_sizes):
    """DPT on its own ViT: the neck reshapes the tokens into a square grid of side
    ``torch_int(sequence_length ** 0.5)`` (square images only, in eager mode too)."""
    from transformers import DPTConfig, DPTForDepthEstimation

    torch.manual_seed(0)
    config = DPTConfig(
        hidden_size=32,
        num_hidden_layers=4,
        num_attention_heads=4,
        intermediate_size=64,
        image_size=32,
        patch_size=8,
        backbone_out_indices=[0, 1, 2, 3],
        neck_hidden_sizes=[16, 32, 48, 64],
        fusion_hidden_size=32,
        head_hidden_size=16,
    )
    model = DPTForDepthEstimation(config).eval()
    check_image_sizes(
        model,
        ["modeling_dpt.torch_int"],
        [(2, 3, 32, 32), (3, 3, 48, 48), (1, 3, 64, 64)],
        lambda out: (out.predicted_depth,),
        get_image_size_patches(),
        seed=1,
    )


def test_mobilenet_tf_padding_follows_the_image_size(check_image_sizes):
    """MobileNetV2 with TensorFlow's "SAME" padding: ``apply_tf_padding`` reads the
    feature map's size with ``int()``; patched, the padding follows the image size,
    valid for sizes of the example's residue modulo 32 (the guards of its branches)."""
    from transformers import MobileNetV2Config, MobileNetV2ForSemanticSegmentation

    torch.manual_seed(0)
    config = MobileNetV2Config(depth_multiplier=0.25, image_size=64, tf_padding=True)
    model = MobileNetV2ForSemanticSegmentation(config).eval()
    for module in model.modules():  # the default init gives logits near 1e-26
        if isinstance(module, torch.nn.Conv2d):
            torch.nn.init.kaiming_normal_(module.weight)
        elif isinstance(module, torch.nn.BatchNorm2d):
            torch.nn.init.ones_(module.weight)
            torch.nn.init.zeros_(module.bias)
    with torch.no_grad():
        assert model(torch.randn(1, 3, 64, 96)).logits.abs().max() > 0.1
    with pytest.warns(ConstrainedDimensionWarning, match="size % 32 == 0"):
        check_image_sizes(
            model,
            ["modeling_mobilenet_v2.apply_tf_padding"],
            [(2, 3, 64, 96), (3, 3, 128, 32), (1, 3, 96, 160)],
            lambda out: (out.logits,),
            get_image_size_patches(),
            seed=1,
        )


def test_zoedepth_relative_position_bias_follows_the_image_size(check_image_sizes):
    """ZoeDepth on a BEiT backbone: the relative position table is resized to the
    number of patches of the image (``torch_int`` in BEiT)."""
    from transformers import ZoeDepthConfig, ZoeDepthForDepthEstimation

    torch.manual_seed(0)
    beit = dict(
        model_type="beit",
        hidden_size=32,
        num_hidden_layers=4,
        num_attention_heads=4,
        intermediate_size=64,
        image_size=32,
        patch_size=8,
        use_relative_position_bias=True,
        use_absolute_position_embeddings=False,
        use_mask_token=False,
        out_indices=[1, 2, 3, 4],
        reshape_hidden_states=False,
    )
    sizes: dict[str, Any] = dict(
        backbone_config=beit,
        backbone_hidden_size=32,
        neck_hidden_sizes=[16, 32, 48, 64],
        fusion_hidden_size=32,
        bottleneck_features=32,
        num_relative_features=16,
        num_attractors=[4, 2, 2, 1],
        bin_embedding_dim=16,
        bin_configurations=[dict(n_bins=8, min_depth=0.001, max_depth=10.0)],
    )
    model = ZoeDepthForDepthEstimation(ZoeDepthConfig(**sizes)).eval()
    check_image_sizes(
        model,
        ["modeling_beit.torch_int"],
        # the fusion stages upsample by 2 from 1/32 of the image: multiples of 32
        [(2, 3, 32, 64), (3, 3, 64, 96)],
        lambda out: (out.predicted_depth,),
        get_image_size_patches(),
        seed=1,
    )


@pytest.mark.parametrize("two_stage", [False, True])
def test_deformable_detr_feature_levels_follow_the_image_size(two_stage, check_image_sizes):
    """The sizes of the feature levels (``spatial_shapes``), the split of the flattened
    levels and the reference points (``linspace``) follow the image size."""
    from transformers import DeformableDetrConfig, DeformableDetrForObjectDetection

    torch.manual_seed(0)
    resnet = dict(
        model_type="resnet",
        embedding_size=16,
        hidden_sizes=[16, 32, 64, 128],
        depths=[1, 1, 1, 1],
        out_features=["stage2", "stage3", "stage4"],
    )
    sizes: dict[str, Any] = dict(
        use_timm_backbone=False,
        use_pretrained_backbone=False,
        backbone_config=resnet,
        d_model=32,
        encoder_layers=1,
        decoder_layers=2,
        encoder_ffn_dim=64,
        decoder_ffn_dim=64,
        encoder_attention_heads=4,
        decoder_attention_heads=4,
        num_queries=16,
        two_stage=two_stage,
        two_stage_num_proposals=16,
        with_box_refine=two_stage,
    )
    model = DeformableDetrForObjectDetection(DeformableDetrConfig(**sizes)).eval()
    # the deepest level keeps two rows at the export size (one would be specialized)
    check_image_sizes(
        model,
        ["modeling_deformable_detr.torch"],
        [(2, 3, 96, 128), (3, 3, 128, 104)],
        lambda out: (out.logits, out.pred_boxes),
        get_image_size_patches(),
        seed=1,
    )


@pytest.mark.parametrize(("start", "end"), [(0.5, -0.5), (0.0, -1.0), (-1.0, None)])
def test_linspace_with_symbolic_steps_matches_torch(start, end):
    """``linspace(start, n + end, n)`` (``end`` None: 1) with ``n`` a dynamic
    dimension, exported, against ``torch.linspace`` on several sizes (one included)."""

    class Linspace(torch.nn.Module):
        def forward(self, x):
            n = x.shape[0]
            stop = 1.0 if end is None else n + end
            return TORCH_KEEPING_SIZES.linspace(start, stop, n, dtype=torch.float32) + x

    onx = to_onnx(Linspace(), (torch.zeros(5),), dynamic_shapes=({0: "n"},))
    sess = onnxruntime.InferenceSession(onx.SerializeToString(), providers=["CPUExecutionProvider"])
    for n in (1, 2, 5, 8, 33):
        stop = 1.0 if end is None else n + end
        expected = torch.linspace(start, stop, n, dtype=torch.float32).numpy()
        got = np.asarray(sess.run(None, {"x": np.zeros(n, dtype=np.float32)})[0])
        np.testing.assert_allclose(got, expected, atol=1e-6, err_msg=str(n))


def test_plain_numbers_go_to_torch():
    """Outside a capture the patched functions are torch's and ``int``."""
    sizes = [(4, 5), (2, 3)]
    torch.testing.assert_close(TORCH_KEEPING_SIZES.as_tensor(sizes), torch.as_tensor(sizes))
    assert TORCH_KEEPING_SIZES.cat is torch.cat
    torch.testing.assert_close(
        TORCH_KEEPING_SIZES.linspace(0.5, 6.5, 7), torch.linspace(0.5, 6.5, 7), rtol=0, atol=0
    )
    assert patch_image_sizes.sym_int(7.9) == 7


def test_log2_of_a_symbolic_size_matches_math():
    """``int(log2(n / 3))`` with ``n`` a dynamic dimension (DepthPro's exponent of the
    lowest resolution), exported, against ``math.log2`` on sizes around powers of two
    (below 3 the logarithm is negative)."""

    class Exponent(torch.nn.Module):
        def forward(self, x):
            e = patch_image_sizes.sym_int(MATH_KEEPING_SIZES.log2(x.shape[0] / 3))
            return torch.arange(e + 40)

    onx = to_onnx(Exponent(), (torch.zeros(50),), dynamic_shapes=({0: "n"},))
    sess = onnxruntime.InferenceSession(onx.SerializeToString(), providers=["CPUExecutionProvider"])
    sizes = [1, 2, 3, 4, 5] + [3 * 2**k + d for k in range(1, 12) for d in (-1, 0, 1)]
    for n in sizes:
        got = sess.run(None, {"x": np.zeros(n, dtype=np.float32)})[0]
        assert got.shape == (int(math.log2(n / 3)) + 40,), n


def test_rf_detr_feature_map_follows_the_image_size(check_image_sizes):
    """RF-DETR's feature map size (``torch.as_tensor(spatial_shapes_list)``) and its
    proposals follow the image size (the zoo's tiny configuration)."""
    from transformers import RfDetrForInstanceSegmentation

    from experimental_experiment.bench.zoo_configs import tiny_config

    torch.manual_seed(0)
    model = RfDetrForInstanceSegmentation._from_config(tiny_config("rf_detr")).eval()
    check_image_sizes(
        model,
        ["modeling_rf_detr.torch"],
        [(2, 3, 128, 128), (3, 3, 160, 192)],
        lambda out: (out.logits, out.pred_boxes),
        get_image_size_patches(),
        seed=1,
    )
