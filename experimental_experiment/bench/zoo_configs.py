"""Tiny configurations for the model zoo: the default configuration of a model type
shrunk generically (few layers, small hidden size, small vocabulary) while keeping what
the architecture needs: one layer of every kind for hybrid models, the per-layer lists
and overrides of the kept layers, as many key/value heads as heads when the default
has no grouped-query attention (or uses multi-head latent attention), the consistency
rules of state space models.

.. code-block:: python

    from experimental_experiment.bench.zoo_configs import tiny_config

    config = tiny_config("gemma4_text")   # 2 layers: one sliding, one full attention
"""

from __future__ import annotations

from typing import Any

_LAYERS = (
    "num_hidden_layers",
    "num_layers",
    "n_layer",
    "n_layers",
    "num_decoder_layers",
    "encoder_layers",
    "decoder_layers",
    "num_encoder_layers",
)
_HEADS = (
    "num_attention_heads",
    "n_head",
    "n_heads",
    "num_heads",
    "encoder_attention_heads",
    "decoder_attention_heads",
)
_KV_HEADS = ("num_key_value_heads", "num_kv_heads")
_HIDDEN = ("hidden_size", "d_model", "n_embd", "dim", "embed_dim", "embedding_size")
_HEAD_DIM = ("head_dim", "d_kv", "attention_head_size", "linear_head_dim", "index_head_dim")
_INTERMEDIATE = (
    "intermediate_size",
    "d_ff",
    "n_inner",
    "ffn_dim",
    "encoder_ffn_dim",
    "decoder_ffn_dim",
    "ffn_hidden_size",
)
_EXPERTS = {
    "num_experts": 4,
    "num_local_experts": 4,
    "n_routed_experts": 4,
    "moe_num_experts": 4,
    "num_experts_per_tok": 2,
    "moe_topk": 2,
    "top_k": 2,
    "moe_k": 2,
    "num_experts_per_token": 2,
    "num_expert_group": 2,
    "moe_top_k": 2,
    "moe_num_shared_experts": 1,
    "num_shared_experts": 1,
    "n_shared_experts": 1,
    "moe_intermediate_size": 128,
    "shared_expert_intermediate_size": 128,
    "n_group": 2,
    "topk_group": 1,
    # partial rotary, multi-head latent attention, group norms
    "rotary_dim": 8,
    "kv_lora_rank": 32,
    "q_lora_rank": 32,
    "qk_rope_head_dim": 16,
    "qk_nope_head_dim": 16,
    "qk_head_dim": 32,
    "v_head_dim": 16,
    "num_groups": 4,
}
#: lists describing the kind of every layer, the first one found picks the kept layers
_LAYER_KINDS = (
    "layer_types",
    "layers_block_type",
    "attention_layers",
    "mlp_layer_types",
    "block_types",
)
VOCAB = 1024
MAX_LAYERS = 4

#: the token indexer of Qwen4-Exp (one key head, budget a multiple of the block size)
_QSA = dict(
    indexer_n_heads=2,
    indexer_kv_heads=1,
    indexer_head_dim=16,
    indexer_budget=4,
    indexer_compress_ratio=2,
)

#: a small HGNet-V2 backbone read at its last three stages (RT-DETR like detectors):
#: the shrinking keeps only the last stage of a backbone and not its channels
_HGNET = dict(
    model_type="hgnet_v2",
    embedding_size=16,
    stem_channels=[3, 16, 16],
    stage_in_channels=[16, 32, 64, 128],
    stage_mid_channels=[16, 16, 32, 64],
    stage_out_channels=[32, 64, 128, 256],
    hidden_sizes=[32, 64, 128, 256],
    stage_num_blocks=[1, 1, 1, 1],
    stage_numb_of_layers=[2, 2, 2, 2],
    depths=[1, 1, 1, 1],
    out_features=["stage2", "stage3", "stage4"],
)

#: a small Swin backbone read at its last three stages (Grounding DINO)
_SWIN = dict(
    model_type="swin",
    image_size=32,
    embed_dim=32,
    depths=[1, 1, 1, 1],
    num_heads=[1, 2, 2, 4],
    window_size=4,
    out_features=["stage2", "stage3", "stage4"],
)

#: per type configuration overrides, applied after the generic shrinking
OVERRIDES: dict[str, dict[str, Any]] = {
    "whisper": dict(max_source_positions=16, max_target_positions=32),
    # num_layers is the number of stages (len(depths)), hidden_size the last stage's
    # width, embed_dim * 2 ** (stages - 1): the masked image modeling decoder reads both
    "swin": dict(embed_dim=32, window_size=4, image_size=128, num_layers=4, hidden_size=256),
    "donut-swin": dict(embed_dim=32, window_size=4, image_size=128),
    "swinv2": dict(num_layers=4, hidden_size=512),
    # upstream defaults a model cannot be built with (transformers 5.23)
    "dots1": dict(n_routed_experts=4, num_experts_per_tok=2, n_shared_experts=1),
    "esm": dict(vocab_size=33, pad_token_id=1, mask_token_id=32),
    "wav2vec2-bert": dict(vocab_size=32),
    "wav2vec2-conformer": dict(vocab_size=32),  # no vocabulary by default: no CTC head
    "gpt_neo": dict(attention_types=[[["global", "local"], 1]]),
    "reformer": dict(axial_pos_embds_dim=[32, 32], axial_pos_shape=[4, 8]),
    "deepseek_v2": dict(num_experts_per_tok=2),
    "bamba": dict(attn_layer_indices=[1]),
    "granitemoehybrid": dict(layer_types=["linear_attention", "full_attention"]),
    "lfm2_moe": dict(layer_types=["conv", "full_attention"], num_dense_layers=1),
    # the default's first layers are all convolutions: keep one of each kind
    "lfm2": dict(layer_types=["conv", "full_attention"]),
    # the gated delta-net's sizes are not shrunk with the hidden size (a 8192 wide
    # convolution otherwise)
    **{
        t: dict(
            linear_num_key_heads=2,
            linear_num_value_heads=4,
            linear_key_head_dim=8,
            linear_value_head_dim=8,
        )
        for t in ("qwen3_next", "qwen3_5_text", "qwen3_5_moe_text")
    },
    "dots3_note": dict(text_config=dict(head_dim=32)),
    "dots3_note_text": dict(head_dim=32),
    # a causal language model: the decoder attends causally and returns a cache
    "bert-generation": dict(is_decoder=True),
    # the cache has num_layers_per_stack x H_cycles x (L_cycles + 1) slots, which must be
    # num_hidden_layers (2): an eager run with a cache fails otherwise
    "hrm_text": dict(num_layers_per_stack=1, H_cycles=1, L_cycles=1, L_bp_cycles=[1]),
    # validator: adaptor_config.intermediate_size == text_config.hidden_size // 4
    "fun_asr_nano": dict(adaptor_config=dict(intermediate_size=16)),
    "cohere_compass_text": dict(
        rope_parameters=dict(full_attention=dict(rope_type="default", rope_theta=10000.0))
    ),
    "dbrx": dict(attn_config=dict(rope_theta=10000.0, clip_qkv=8.0)),
    "moonshine_streaming": dict(num_key_value_heads=4),
    "mobilevitv2": dict(image_size=64),
    # weights of std 0.02 give every pixel a score of about 1/65: the non-maximum
    # suppression compares neighbours equal but for rounding, and onnxruntime keeps
    # other keypoints than eager (508 against 506); larger weights spread the scores
    "superpoint": dict(initializer_range=0.2),
    # the model reads the logits of these tokens, by default beyond the shrunk vocabulary
    "shieldgemma2": dict(yes_token_index=10, no_token_index=11),
    # the 6 box embeddings of hidden_size // 6 are concatenated back to hidden_size
    "lilt": dict(hidden_size=96),
    # 4 coordinate and 2 shape embeddings are concatenated to hidden_size (64)
    "layoutlmv3": dict(coordinate_size=8, shape_size=16),
    # the patch embedding is 4 convolutions of stride 2 (16 pixels), 3 stages
    "levit": dict(patch_size=16, image_size=64),
    "blt": dict(
        encoder_hash_byte_group_vocab=1024,
        encoder_config=dict(hidden_size_global=64),
        decoder_config=dict(hidden_size_global=64),
    ),
    # validator: d_head == d_model // n_head (64 // 4)
    "xlnet": dict(d_head=16),
    # the forward needs a language (an adapter per language) when given no lang_ids
    "xmod": dict(default_language="en_XX"),
    # the shared transformer of the first hybrid layer is tied to the other ones: two
    # hybrid layers; sizes derived from the hidden size recomputed (None, "auto")
    "zamba": dict(
        num_hidden_layers=3,
        layers_block_type=["linear_attention", "hybrid", "hybrid"],
        attention_hidden_size=None,
        attention_head_dim=None,
        mamba_dt_rank="auto",
    ),
    # derived sizes saved by to_dict override the recomputed ones: given consistent
    "zamba2": dict(
        attention_hidden_size=128, attention_head_dim=32, mamba_headdim=16, hybrid_layer_ids=[1]
    ),
    # head_dim is qk_nope_head_dim + qk_rope_head_dim (16 + 16): the rotary part is
    # head_dim * partial_rotary_factor
    "mistral4": dict(head_dim=32),
    # embedding_dim and num_blocks are saved copies of hidden_size and num_hidden_layers
    "xlstm": dict(embedding_dim=64, num_blocks=2),
    # the stem's output channels are the first stage's input (hidden_sizes[0])
    "textnet": dict(stem_out_channels=16),
    # every indexed_attention layer has a token indexer, the default sets none of its sizes
    "qwen4_exp_text": _QSA,
    "qwen4_exp": dict(text_config=_QSA),
    # 4 x 4 tubelets of 8 pixels on 2 frames, fewer layers
    "videoprism_vision_model": dict(
        tubelet_size=[1, 8, 8], num_frames=2, num_spatial_layers=2, num_temporal_layers=1
    ),
    # the vision output channels and the 2 * num_pos_feats point embeddings are the
    # prompt encoder's hidden size, its image embeddings are 32 / 8 patches wide
    **{
        t: dict(
            vision_config=dict(output_channels=64, num_pos_feats=32),
            prompt_encoder_config=dict(image_embedding_size=4),
        )
        for t in ("sam", "sam_hq")
    },
    # Hiera backbone (SAM 2): the patch embedding's width is the first stage's, four
    # stages on 64 pixel images (16, 8, 4, 2 patches a side), a global attention block
    # that does not pool (not the first of a stage), the feature sizes and the prompt
    # encoder's embeddings (64 / 16) those of the first three stages
    **{
        t: dict(
            vision_config=dict(
                backbone_config=dict(
                    model_type="sam2_hiera_det_model",
                    hidden_size=32,
                    image_size=[64, 64],
                    blocks_per_stage=[1, 1, 2, 1],
                    embed_dim_per_stage=[32, 64, 128, 256],
                    num_attention_heads_per_stage=[1, 1, 2, 2],
                    global_attention_blocks=[3],
                ),
                backbone_channel_list=[256, 128, 64, 32],
                backbone_feature_sizes=[[16, 16], [8, 8], [4, 4]],
                image_size=64,  # the size of the zoo's images
            ),
            prompt_encoder_config=dict(image_size=64, patch_size=16),
            **({} if t == "sam2" else dict(image_size=64)),
        )
        for t in ("sam2", "sam2_video", "edgetam_video")
    },
    # SAM 3's ViT gives 32 / 8 patches a side, scaled by 4, 2 and 1
    "sam3_tracker": dict(vision_config=dict(backbone_feature_sizes=[[16, 16], [8, 8], [4, 4]])),
    # the neck reads the last three stages of the backbone (the shrinking keeps the last);
    # the decoder runs max_text_length steps (a loop the capture unrolls)
    "slanet": dict(
        max_text_length=4,
        backbone_config=dict(
            model_type="pp_lcnet",
            scale=1,
            divisor=16,
            depths=[1, 1, 1, 1, 1],
            out_features=["stage2", "stage3", "stage4", "stage5"],
        ),
    ),
    # the detail stream (strides 2, 4, 8) is fused with the ViT's features upsampled
    # by 2: the ViT's patches are 16 pixels wide
    "vitmatte": dict(
        backbone_config=dict(
            model_type="vitdet",
            hidden_size=64,
            num_hidden_layers=2,
            num_attention_heads=4,
            image_size=32,
            patch_size=16,
            out_features=["stage2"],
        )
    ),
    # the encoder reads the backbone's last three stages; the decoder selects its
    # queries among the positions of the three levels (21 on 32 pixel images); weights
    # drawn with a standard deviation of 0.1 (0.01 by default): with so few channels
    # the features vanish (1e-15 after the encoder), every query scores the same and
    # torch and onnxruntime break the ties of ``topk`` differently
    **{
        t: dict(
            backbone_config=dict(_HGNET, initializer_range=0.1),
            initializer_range=0.1,
            encoder_in_channels=[64, 128, 256],
            encoder_hidden_dim=64,
            decoder_in_channels=[64, 64, 64],
            num_queries=8,
        )
        for t in ("d_fine", "deimv2")
    },
    # four feature levels (three stages and one more), queries selected among their
    # positions (22 on 32 pixel images)
    **{
        t: dict(backbone_config=_SWIN, num_queries=8)
        for t in ("grounding-dino", "mm-grounding-dino")
    },
    # queries selected among the 16 patches of a 32 pixel image
    "rf_detr": dict(num_queries=8),
    # the dense heads upsample the ViT's features (the default head has no block); the
    # key/value heads of the kept layers (the default lists them for 24 layers of 16 heads)
    "sapiens2": dict(
        num_key_value_heads_per_layer=[4, 2],
        head_config=dict(upsample_out_channels=[32, 16], conv_out_channels=[16]),
    ),
    # 4 frames of 32 pixels (tubelets of 2 frames, 8 pixels), a small predictor
    "vjepa2": dict(
        crop_size=32,
        frames_per_clip=4,
        num_pooler_layers=1,
        pred_hidden_size=64,
        pred_num_attention_heads=4,
        pred_num_hidden_layers=1,
    ),
    # a context of two patches (16384 time steps by default)
    "timesfm2_5": dict(context_length=64),
    # validator: the flow head is conditioned on the backbone's hidden states
    "gradium_phonon_tts": dict(flow_head_config=dict(condition_dim=64)),
    # PaliGemma's projector gives features of the text hidden size (projection_dim)
    "colpali": dict(vlm_config=dict(projection_dim=64)),
    # the projector maps a number of patches to a number of queries: 32 / 8 squared
    "aria": dict(projector_patch_to_query_dict={16: 4}),
    # the segmentation head reads 4 layers; its feature pyramid wants 4 kept layers
    **{
        t: dict(num_hidden_layers=4, out_indices=[1, 2, 3, 4], out_features=None)
        for t in ("beit", "data2vec-vision")
    },
    # one neck stage per kept layer: the default reads layers 2, 5, 8, 11
    "dpt": dict(num_hidden_layers=4, backbone_out_indices=[0, 1, 2, 3]),
    "perceiver": dict(
        num_latents=16,
        d_latents=64,
        num_self_attends_per_block=2,
        num_self_attention_heads=4,
        num_cross_attention_heads=4,
        max_position_embeddings=64,
    ),
    # the query embeddings are projected (projection_dim) and compared with the image
    # class embeddings of the text hidden size
    **{t: dict(projection_dim=64) for t in ("owlvit", "owlv2")},
    # text recognition: the backbone reduces the images to 3 rows pooled into one
    # (by 16 in height for the server and v6 backbones, by 32 for the mobile one)
    **{
        t: dict(image_size=[48, 64], head_out_channels=64)
        for t in ("pp_ocrv5_server_rec", "pp_ocrv6_small_rec", "pp_ocrv6_tiny_rec")
    },
    "pp_ocrv5_mobile_rec": dict(image_size=[96, 64], head_out_channels=64),
    # timm is not installed: DETR-like models get transformers' ResNet backbone
    **{
        t: dict(
            use_timm_backbone=False,
            backbone_config=dict(
                model_type="resnet",
                embedding_size=16,
                hidden_sizes=[16, 32, 64, 128],
                depths=[1, 1, 1, 1],
                out_features=["stage2", "stage3", "stage4"],
            ),
        )
        for t in ("conditional_detr", "dab-detr", "deformable_detr", "detr", "table-transformer")
    },
}
# the segmentation head of DETR takes d_model + encoder_attention_heads channels, split
# in 8 groups: 64 + 8
OVERRIDES["detr"].update(encoder_attention_heads=8, decoder_attention_heads=8)


def _is_int(v) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def _token_ids(d: dict) -> set:
    return {
        v for k, v in d.items() if str(k).endswith(("_token_id", "_token_index")) and _is_int(v)
    }


def _shrink_ids(d: dict, vocab: int, taken: set = frozenset()) -> None:
    """Token ids beyond the shrunk vocabulary become distinct ids at its end
    (not in ``taken``, the ids of the text configuration for a multimodal one)."""
    mapping: dict[int, int] = {}

    def new_id(v):
        if _is_int(v) and v >= vocab:
            if v not in mapping:
                free = vocab - 1 - len(mapping)
                while free in taken or free in mapping.values():
                    free -= 1
                mapping[v] = free
            return mapping[v]
        return v

    for k in list(d):
        if k.endswith(("_token_id", "_token_index")):
            v = d[k]
            d[k] = [new_id(x) for x in v] if isinstance(v, list) else new_id(v)


def pick_layers(kinds: list, n: int) -> list[int]:
    """Indices of ``n`` layers among ``kinds`` (the kind of every layer): the first
    layer of every kind (at most :data:`MAX_LAYERS` kinds), then the first layers.

    .. code-block:: python

        pick_layers(["linear", "linear", "linear", "full"], 2)  # [0, 3]
    """
    first: dict[Any, int] = {}
    for i, k in enumerate(kinds):
        first.setdefault(str(k), i)
    chosen = sorted(first.values())[:MAX_LAYERS]
    for i in range(len(kinds)):
        if len(chosen) >= n:
            break
        if i not in chosen:
            chosen.append(i)
    return sorted(chosen)


def _shrink_value(k: str, v: Any, d: dict) -> Any:
    """The shrunk value of one key (nested configurations excluded)."""
    rules = (
        (_LAYERS, lambda x: min(x, 2)),
        (_HEADS, lambda x: min(x, 4)),
        (_KV_HEADS, lambda x: min(x, 2)),
        (_HIDDEN, lambda x: min(x, 64)),
        (_HEAD_DIM, lambda x: min(x, 16)),
        (_INTERMEDIATE, lambda x: min(x, 128)),
    )
    if _is_int(v):
        for keys, fct in rules:
            if k in keys:
                return fct(v)
        if k in _EXPERTS:
            return min(v, _EXPERTS[k])
        if k == "image_size" and v > 32:
            return 32
        if k == "num_kv_shared_layers":  # the kept layers may not share their kind
            return 0
        if k == "vocab_size_per_layer_input":
            return min(v, VOCAB)
        if k == "hidden_size_per_layer_input":
            return min(v, 16)
        if k == "patch_size" and v > 8:
            return 8
    elif isinstance(v, list):
        if k in _HEADS:
            return [min(x, 2) for x in v]
        if k == "depths":
            return [1 for _ in v]
        if k == "hidden_sizes" and "stage_out_channels" not in d:  # hgnet: the stages'
            return [16 * 2**i for i in range(len(v))]
        if k == "image_size":
            return [min(x, 32) for x in v]
        if k.endswith("hook_ids") and all(_is_int(x) for x in v):  # layers read (depth_pro)
            return [sorted(set(v)).index(x) for x in v]
    return v


def _fix_heads(d: dict, before: dict) -> None:
    """Key/value heads equal to the heads when they were (no grouped-query attention)
    or with multi-head latent attention; a missing head dimension computed."""
    heads = next((k for k in _HEADS if _is_int(d.get(k))), None)
    for kv in _KV_HEADS:
        if (
            kv in d
            and heads
            and (before.get(kv) in (None, before.get(heads)) or "kv_lora_rank" in d)
        ):
            d[kv] = d[heads]
    hidden = next((k for k in _HIDDEN if _is_int(d.get(k))), None)
    if "head_dim" in d and d["head_dim"] is None and heads and hidden:
        d["head_dim"] = d[hidden] // d[heads]


def _fix_periods(d: dict, n_layers: int) -> None:
    """``*_period`` / ``*_offset`` pairs (jamba) keep one layer of each kind."""
    for k in list(d):
        if k.endswith("_layer_period") and _is_int(d[k]) and d[k] > n_layers:
            d[k] = n_layers
            off = k.replace("_period", "_offset")
            if _is_int(d.get(off)):
                d[off] = min(d[off], n_layers - 1)


def _fix_state_space(d: dict) -> None:
    """Mamba heads consistent with the expanded hidden size."""
    hidden = d.get("hidden_size")
    if not _is_int(hidden):
        return
    if _is_int(d.get("expand")) and _is_int(d.get("num_heads")) and _is_int(d.get("head_dim")):
        d["num_heads"] = hidden * d["expand"] // d["head_dim"]
    if (
        _is_int(d.get("mamba_expand"))
        and _is_int(d.get("mamba_n_heads"))
        and _is_int(d.get("mamba_d_head"))
    ):
        d["mamba_n_heads"] = min(d["mamba_n_heads"], 4)
        d["mamba_d_head"] = hidden * d["mamba_expand"] // d["mamba_n_heads"]
        if _is_int(d.get("mamba_d_ssm")):
            d["mamba_d_ssm"] = hidden * d["mamba_expand"]
    for k in ("mamba_d_state", "ssm_state_size", "state_size"):
        if _is_int(d.get(k)):
            d[k] = min(d[k], 16)


def _fix_image_tokens(d: dict) -> None:
    """The image tokens of a vision tower pooling its patches (gemma3): a square whose
    side divides the number of patches per side of the shrunk image."""
    vision = d.get("vision_config")
    if not (
        _is_int(d.get("mm_tokens_per_image"))
        and isinstance(vision, dict)
        and _is_int(vision.get("image_size"))
        and _is_int(vision.get("patch_size"))
    ):
        return
    side = max(vision["image_size"] // vision["patch_size"] // 2, 1)
    d["mm_tokens_per_image"] = min(d["mm_tokens_per_image"], side * side)


def _cut_layers(d: dict, n_before: int, n_after: int) -> int:
    """Per-layer lists and ``per_layer_config`` restricted to the kept layers, returns
    the new number of layers (more than ``n_after`` for hybrids with many kinds)."""
    kinds = next(
        (d[k] for k in _LAYER_KINDS if isinstance(d.get(k), list) and len(d[k]) == n_before), None
    )
    keep = pick_layers(kinds, n_after) if kinds else list(range(n_after))
    for k, v in list(d.items()):
        if isinstance(v, list) and len(v) == n_before and k not in ("hidden_sizes", "depths"):
            d[k] = [v[i] for i in keep]
    plc = d.get("per_layer_config")
    if isinstance(plc, dict):
        new = {}
        for key, val in plc.items():
            if str(key).isdigit() and int(key) in keep:
                new[str(keep.index(int(key)))] = (
                    shrink_config_dict(dict(val)) if isinstance(val, dict) else val
                )
        d["per_layer_config"] = new
    return len(keep)


#: name endings of the dimensions that follow a hidden size they equal (adapters,
#: projections between sub-models a validator checks against the hidden size,
#: depthwise convolutions)
_FOLLOWERS = ("hidden_size", "_in_dim", "_out_dim", "_input_size", "_groups")


def _hidden_values(d: dict, found: set[int]) -> set[int]:
    """The hidden sizes (above the shrunk one) of ``d`` and its nested configurations."""
    for k, v in d.items():
        if isinstance(v, dict):
            _hidden_values(v, found)
        elif k in _HIDDEN and k != "embedding_size" and _is_int(v) and v > 64:
            found.add(v)
    return found


def _follow_hidden(d: dict, hidden: set[int]) -> None:
    """A dimension named like an adapter's input (``adapter_in_dim``, ``audio_hidden_size``)
    equal to an original hidden size of the tree is shrunk like it."""
    for k, v in d.items():
        if isinstance(v, dict):
            _follow_hidden(v, hidden)
        elif _is_int(v) and v in hidden and k not in _HIDDEN and str(k).endswith(_FOLLOWERS):
            d[k] = min(v, 64)


def shrink_config_dict(d: dict) -> dict:
    """The configuration dictionary ``d`` made tiny (in place, nested configs too):
    2 layers (up to 4 to keep one of every kind), 4 heads (2 key/value heads unless the
    default has as many as heads), hidden size 64, head dimension 16, intermediate size
    128, 4 experts (2 per token), a vocabulary of 1024, images of 32 pixels; per-layer
    lists (``layer_types``, ``intermediate_size``...) and ``per_layer_config`` keep the
    chosen layers; adapter dimensions equal to a hidden size follow it, a multimodal
    model's token ids fit its text vocabulary.

    .. code-block:: python

        d = shrink_config_dict(dict(num_hidden_layers=12, hidden_size=768))
    """
    before = dict(d)
    hidden = _hidden_values(d, set())
    n_before = next((d[k] for k in _LAYERS if _is_int(d.get(k))), None)
    for k, v in list(d.items()):
        if isinstance(v, dict) and "model_type" in v:
            shrink_config_dict(v)
        else:
            d[k] = _shrink_value(k, v, d)
    for k in ("out_features", "out_indices", "stage_names"):  # backbones: recomputed
        d.pop(k, None)
    _fix_heads(d, before)
    n_after = next((d[k] for k in _LAYERS if _is_int(d.get(k))), None)
    # a backbone read at several layers (a depth or segmentation neck expects as many
    # feature maps as it has stages): as many kept layers, the last ones read
    n_out = len(before.get("out_indices") or [])
    flat = not isinstance(d.get("depths"), list)
    if n_out > 1 and n_before and n_after and flat:
        n_after = min(n_before, max(n_after, n_out))
    # hierarchical vision models: num_layers is a number of stages, lists are per stage
    if n_before and n_after and n_before > n_after and flat:
        n_new = _cut_layers(d, n_before, n_after)
        for k in _LAYERS:
            if _is_int(d.get(k)) and before.get(k) == n_before:
                d[k] = n_new
        _fix_periods(d, n_new)
        if n_out > 1:
            d["out_indices"] = list(range(n_new - n_out + 1, n_new + 1))
    _fix_state_space(d)
    _fix_image_tokens(d)
    if _is_int(d.get("vocab_size")) and d["vocab_size"] > VOCAB:
        d["vocab_size"] = VOCAB
        _shrink_ids(d, VOCAB)
    text = d.get("text_config")
    if "vocab_size" not in d and isinstance(text, dict) and _is_int(text.get("vocab_size")):
        # a multimodal model's own token ids (image_token_id) are ids of its text model
        _shrink_ids(d, text["vocab_size"], _token_ids(text))
    _follow_hidden(d, hidden)
    return d


_REPLACED = ("rope_parameters", "backbone_config")


def _deep_update(d: dict, new: dict) -> None:
    """``d.update(new)`` merging nested dictionaries."""
    for k, v in new.items():
        if isinstance(v, dict) and isinstance(d.get(k), dict) and k not in _REPLACED:
            _deep_update(d[k], v)
        else:
            d[k] = v


def tiny_config(model_type: str):
    """A tiny configuration of ``model_type``: its default shrunk by
    :func:`shrink_config_dict`, then :data:`OVERRIDES`.

    .. code-block:: python

        config = tiny_config("llama")
    """
    from transformers import AutoConfig

    default = AutoConfig.for_model(model_type)
    d = shrink_config_dict(default.to_dict())
    _deep_update(d, OVERRIDES.get(model_type, {}))
    return type(default).from_dict(d)
