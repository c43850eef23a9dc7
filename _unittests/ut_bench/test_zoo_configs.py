"""Tiny configurations of the zoo: hybrid models keep a layer of every kind with their
per-layer lists and overrides, multi-head attention keeps as many key/value heads as
heads, state space dimensions stay consistent, real configurations build."""

import pytest

from experimental_experiment.bench.zoo_configs import (
    pick_layers,
    shrink_config_dict,
    tiny_config,
)


def test_pick_layers():
    assert pick_layers(["linear", "linear", "linear", "full"], 2) == [0, 3]
    assert pick_layers(["a"] * 5, 2) == [0, 1]
    assert pick_layers(["a", "b", "c"], 2) == [0, 1, 2]  # every kind, up to 4


def test_per_layer_lists_and_overrides():
    kinds = ["sliding"] * 5 + ["full"]
    d = shrink_config_dict(
        dict(
            num_hidden_layers=6,
            num_attention_heads=8,
            num_key_value_heads=2,
            hidden_size=512,
            layer_types=kinds,
            intermediate_size=[1024] * 6,
            per_layer_config={"05": {"head_dim": 256}, "03": {"head_dim": 64}},
        )
    )
    assert d["num_hidden_layers"] == 2 and d["layer_types"] == ["sliding", "full"]
    assert d["intermediate_size"] == [1024, 1024]  # a per-layer list is cut, not shrunk
    assert d["per_layer_config"] == {"1": {"head_dim": 16}}


def test_heads():
    mha = shrink_config_dict(dict(num_attention_heads=32, num_key_value_heads=32))
    gqa = shrink_config_dict(dict(num_attention_heads=32, num_key_value_heads=8))
    mla = shrink_config_dict(dict(num_attention_heads=32, num_key_value_heads=8, kv_lora_rank=512))
    assert (mha["num_key_value_heads"], gqa["num_key_value_heads"]) == (4, 2)
    assert mla["num_key_value_heads"] == 4
    none = shrink_config_dict(dict(num_attention_heads=32, hidden_size=4096, head_dim=None))
    assert none["head_dim"] == 16


def test_state_space_consistency():
    d = shrink_config_dict(dict(hidden_size=4096, expand=2, num_heads=128, head_dim=64))
    assert d["num_heads"] * d["head_dim"] == d["hidden_size"] * d["expand"]
    d = shrink_config_dict(
        dict(hidden_size=4096, mamba_expand=2, mamba_n_heads=128, mamba_d_head=64, mamba_d_ssm=8192)
    )
    assert d["mamba_n_heads"] * d["mamba_d_head"] == d["hidden_size"] * 2 == d["mamba_d_ssm"]


@pytest.mark.parametrize(
    "model_type", ["gemma4_text", "jamba", "deepseek_v3", "mamba2", "detr", "swin", "gemma3n_text"]
)
def test_tiny_config_builds(model_type):
    config = tiny_config(model_type)
    assert config.get_text_config().hidden_size <= 64 or model_type in ("detr", "swin")


def test_adapter_dims_follow_the_hidden_size():
    # validators check an adapter's input against the hidden size of another sub-config
    d = shrink_config_dict(
        dict(
            text_config=dict(model_type="t", hidden_size=5120),
            vision_config=dict(
                model_type="v",
                hidden_size=1536,
                adapter_in_dim=1536,
                adapter_out_dim=5120,
                upsample_groups=1536,
            ),
            head_config=dict(
                model_type="h", hidden_size=192, audio_hidden_size=1536, fusion_dim=1536
            ),
        )
    )
    v, h = d["vision_config"], d["head_config"]
    assert v["adapter_in_dim"] == v["hidden_size"] == 64
    assert v["adapter_out_dim"] == d["text_config"]["hidden_size"] == 64
    assert v["upsample_groups"] == 64 and h["audio_hidden_size"] == 64
    assert h["fusion_dim"] == 1536  # not named like a follower: unchanged
    # an embedding size is no hidden size (MobileBERT's true_hidden_size stays)
    mb = shrink_config_dict(dict(hidden_size=512, embedding_size=128, true_hidden_size=128))
    assert mb["true_hidden_size"] == 128


def test_multimodal_token_ids_in_the_text_vocabulary():
    d = shrink_config_dict(
        dict(
            image_token_id=255036,
            boi_token_index=255999,
            yes_token_index=3,
            text_config=dict(
                model_type="t", vocab_size=256000, eos_token_id=255999, pad_token_id=0
            ),
        )
    )
    text = d["text_config"]
    assert text["vocab_size"] == 1024 and text["eos_token_id"] == 1023
    ids = (d["image_token_id"], d["boi_token_index"])
    assert all(i < 1024 for i in ids) and len(set(ids)) == 2
    assert text["eos_token_id"] not in ids  # no clash with the text model's ids
    assert d["yes_token_index"] == 3


def test_pooled_image_tokens_and_hook_ids():
    d = shrink_config_dict(
        dict(
            mm_tokens_per_image=256,
            intermediate_hook_ids=[11, 5],
            vision_config=dict(model_type="v", image_size=896, patch_size=14),
        )
    )
    side = d["vision_config"]["image_size"] // d["vision_config"]["patch_size"]
    assert side % int(d["mm_tokens_per_image"] ** 0.5) == 0
    assert d["intermediate_hook_ids"] == [1, 0]


@pytest.mark.parametrize(
    "model_type",
    ["dots3_note", "nemo_speechlm", "fun_asr_nano", "lilt", "layoutlmv3", "levit", "hgnet_v2"],
)
def test_tiny_config_passes_validators(model_type):
    config = tiny_config(model_type)  # the validators run when the config is built
    if model_type == "lilt":
        assert config.hidden_size % 6 == 0
    if model_type == "layoutlmv3":
        assert 4 * config.coordinate_size + 2 * config.shape_size == config.hidden_size
    if model_type == "hgnet_v2":
        assert config.hidden_sizes[-1] == config.stage_out_channels[-1]


def test_tiny_configs_keep_derived_sizes_consistent():
    xlnet = tiny_config("xlnet")
    assert xlnet.d_head == xlnet.d_model // xlnet.n_head
    mistral4 = tiny_config("mistral4")
    assert mistral4.head_dim == mistral4.qk_nope_head_dim + mistral4.qk_rope_head_dim
    xlstm = tiny_config("xlstm")
    assert (xlstm.embedding_dim, xlstm.num_blocks) == (xlstm.hidden_size, xlstm.num_hidden_layers)
    textnet = tiny_config("textnet")
    assert textnet.stem_out_channels == textnet.hidden_sizes[0]
    zamba = tiny_config("zamba")  # the shared transformer is tied to another hybrid layer
    assert zamba.layers_block_type.count("hybrid") >= 2
    assert zamba.attention_head_dim == 2 * zamba.hidden_size // zamba.num_attention_heads
    zamba2 = tiny_config("zamba2")
    assert zamba2.mamba_headdim * zamba2.n_mamba_heads == zamba2.mamba_expand * zamba2.hidden_size
    assert zamba2.hybrid_layer_ids == [
        i for i, t in enumerate(zamba2.layers_block_type) if t == "hybrid"
    ]


@pytest.mark.parametrize("model_type", ["qwen4_exp_text", "qwen4_exp"])
def test_qwen4_exp_has_an_indexer(model_type):
    text = tiny_config(model_type).get_text_config()
    assert text.indexer_kv_heads == 1 and text.indexer_budget % text.indexer_compress_ratio == 0


@pytest.mark.parametrize("model_type", ["depth_anything", "zoedepth", "prompt_depth_anything"])
def test_backbone_read_at_several_layers_keeps_them(model_type):
    # the neck wants one feature map per stage: the default reads 4 of 12 layers
    from experimental_experiment.bench.zoo_cases import build_case
    from experimental_experiment.bench.zoo_heads import ZooCase

    backbone = tiny_config(model_type).backbone_config
    n = backbone.num_hidden_layers
    assert backbone.out_indices == list(range(n - 3, n + 1)) and n == 4
    data = build_case(ZooCase(model_type, "depth-estimation"))  # eager runs on both sizes
    assert data["dynamic_shapes"]["pixel_values"] == {0: "batch", 2: "height", 3: "width"}


def test_causal_lm_configs_run_with_a_cache():
    """hrm_text's cache has one slot per (stack layer, cycle): as many as its layers;
    bert-generation's causal LM is a decoder (a causal mask and a cache)."""
    import torch
    import transformers

    c = tiny_config("hrm_text")
    assert c.num_layers_per_stack * c.H_cycles * (c.L_cycles + 1) == c.num_hidden_layers
    assert tiny_config("bert-generation").is_decoder is True
    torch.manual_seed(0)
    model = transformers.AutoModelForCausalLM.from_config(c).eval()
    ids = torch.ones((1, 3), dtype=torch.int64)
    with torch.no_grad():
        out = model(input_ids=ids, use_cache=True)
    assert len(out.past_key_values.layers) == c.num_hidden_layers


def test_shrink_keeps_as_many_out_indices():
    d = shrink_config_dict(dict(num_hidden_layers=12, out_indices=[3, 6, 9, 12], hidden_size=64))
    assert d["num_hidden_layers"] == 4 and d["out_indices"] == [1, 2, 3, 4]
    d = shrink_config_dict(dict(num_hidden_layers=12, out_indices=[12], hidden_size=64))
    assert d["num_hidden_layers"] == 2 and "out_indices" not in d


def test_head_configs_keep_derived_sizes_consistent():
    """Sizes one module derives from another the generic shrinking changes alone."""
    for t in ("owlvit", "owlv2"):  # queries projected, compared with text-wide classes
        c = tiny_config(t)
        assert c.projection_dim == c.text_config.hidden_size
    for t in ("swin", "swinv2"):  # masked image modeling decoder on the last stage
        c = tiny_config(t)
        assert c.num_layers == len(c.depths)
        assert c.hidden_size == c.embed_dim * 2 ** (len(c.depths) - 1)
    detr = tiny_config("detr")  # segmentation head: d_model + heads in groups of 8
    assert (detr.d_model + detr.encoder_attention_heads) % 8 == 0
    for t in ("sam2", "sam2_video", "edgetam_video"):
        vc = tiny_config(t).vision_config
        hiera = vc.backbone_config
        assert hiera.hidden_size == hiera.embed_dim_per_stage[0]
        assert vc.backbone_channel_list == hiera.embed_dim_per_stage[::-1]
        side = vc.image_size // hiera.patch_stride[0]
        assert vc.backbone_feature_sizes == [[side >> i] * 2 for i in range(3)]
    for t in ("d_fine", "deimv2"):  # the encoder reads the backbone's last stages
        c = tiny_config(t)
        assert c.encoder_in_channels == c.backbone_config.stage_out_channels[1:]
        assert len(c.backbone_config.out_features) == c.num_feature_levels
    slanet = tiny_config("slanet")
    assert len(slanet.backbone_config.out_features) == 4
    sapiens2 = tiny_config("sapiens2")
    assert len(sapiens2.num_key_value_heads_per_layer) == sapiens2.num_hidden_layers
    assert all(
        sapiens2.num_attention_heads % k == 0 for k in sapiens2.num_key_value_heads_per_layer
    )
    assert sapiens2.head_config.upsample_out_channels
    vjepa2 = tiny_config("vjepa2")
    assert vjepa2.crop_size % vjepa2.patch_size == 0
    assert vjepa2.frames_per_clip % vjepa2.tubelet_size == 0
    phonon = tiny_config("gradium_phonon_tts")  # the validator runs when it is built
    assert phonon.flow_head_config.condition_dim == phonon.hidden_size
    colpali = tiny_config("colpali").vlm_config
    assert colpali.vision_config.projection_dim == colpali.text_config.hidden_size
