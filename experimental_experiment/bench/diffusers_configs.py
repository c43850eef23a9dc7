"""Tiny constructor arguments for a diffusers model class: the defaults of its
``__init__`` shrunk generically (1-2 layers or blocks, 2 heads of dimension 16, widths
of 32, channels of 16-32, rope axes rescaled to the new head dimension), then the
per-class ``CONFIG_OVERRIDES``.

.. code-block:: python

    from diffusers import FluxTransformer2DModel
    from experimental_experiment.bench.diffusers_configs import tiny_kwargs

    model = FluxTransformer2DModel(**tiny_kwargs(FluxTransformer2DModel))
"""

from __future__ import annotations

import inspect
import re
from typing import Any

HEADS, HEAD_DIM, WIDTH = 2, 16, 32

_LAYERS = re.compile(
    r"^(num_(\w+_)?(layers|blocks)|n_(\w+_)?layers|depth|num_res_blocks|"
    r"(\w+_)?layers_per_block|num_hidden_layers)$"
)
_HEADS = re.compile(
    r"^(num_(\w+_)?(attention_)?heads|n_heads|\w+_num_attention_heads|"
    r"num_heads)$"
)
_HEAD_DIM = re.compile(r"^((\w+_)?attention_head_dim|(\w+_)?head_dim)$")
_ROPE = re.compile(r"^(axes_dims_rope|axes_dims?|rope_axes_dims?|rope_dim_list)$")
#: widths shrunk to WIDTH when larger (text, pooled, hidden, feed-forward dimensions)
_WIDTHS = re.compile(
    r"^(dim|model_dim|inner_dim|hidden_size|\w+_hidden_size|\w+_dim\d?|"
    r"caption_channels|\w+_hidden_states_channels|crossattn_proj_in_channels|"
    r"intermediate_size|ch|channels|base_dim)$"
)
#: channel widths of the blocks of UNets and VAEs
_BLOCKS = re.compile(r"^((\w+_)?block_out_channels|conditioning_embedding_out_channels)$")
#: never shrunk: sizes of the data, not of the network
_KEEP = re.compile(
    r"^(in_channels|out_channels|latent_channels|z_channels|z_dim|"
    r"conditioning_channels|\w+_in_channels|\w+_out_channels|input_channels|"
    r"num_channels|audio_channels|mel_bins|latent_dim|sample_\w+|"
    r"in_visual_dim|out_visual_dim)$"
)

#: per-class constructor arguments applied after the generic shrinking
CONFIG_OVERRIDES: dict[str, dict[str, Any]] = {
    "UNet2DConditionModel": dict(
        block_out_channels=(16, 32),
        down_block_types=("CrossAttnDownBlock2D", "DownBlock2D"),
        up_block_types=("UpBlock2D", "CrossAttnUpBlock2D"),
        attention_head_dim=8,
    ),
    "ControlNetModel": dict(
        block_out_channels=(16, 32),
        down_block_types=("CrossAttnDownBlock2D", "DownBlock2D"),
        attention_head_dim=8,
        conditioning_embedding_out_channels=(8, 8, 8, 8),
    ),
    # the output normalization has 32 groups whatever the configuration: widths of 32
    "UNetSpatioTemporalConditionModel": dict(
        block_out_channels=(32, 64),
        down_block_types=("CrossAttnDownBlockSpatioTemporal", "DownBlockSpatioTemporal"),
        up_block_types=("UpBlockSpatioTemporal", "CrossAttnUpBlockSpatioTemporal"),
        num_attention_heads=(2, 2),
        addition_time_embed_dim=8,
        projection_class_embeddings_input_dim=24,
    ),
    # the tiny autoencoder's blocks keep their width: one width for all
    "AutoencoderTiny": dict(
        encoder_block_out_channels=(32,) * 4, decoder_block_out_channels=(32,) * 4
    ),
    # sample_size 128 turns on resolution and aspect-ratio conditions (PixArt-alpha 1024)
    "PixArtTransformer2DModel": dict(use_additional_conditions=False),
    "AutoencoderKL": dict(
        block_out_channels=(16, 32),
        down_block_types=("DownEncoderBlock2D",) * 2,
        up_block_types=("UpDecoderBlock2D",) * 2,
    ),
    # one block: the encoder's mid-block attends over every pixel of the image; two
    # blocks halve the image first, as the tiny AutoencoderKL does
    "AsymmetricAutoencoderKL": dict(
        down_block_types=("DownEncoderBlock2D",) * 2, down_block_out_channels=(16, 32)
    ),
    # no defaults: the constructor needs every size; its blocks normalize with 32
    # groups (widths multiple of 32) and average groups of
    # ``block_out_channels[-1] // (2 * latent_channels)`` channels into the latents
    "AutoencoderKLHunyuanImage": dict(
        in_channels=3,
        out_channels=3,
        latent_channels=8,
        block_out_channels=(32, 32, 64, 64),
        layers_per_block=1,
        spatial_compression_ratio=8,
        sample_size=256,
    ),
    # the encoder averages groups of ``block_out_channels[-1] // (2 * latent_channels)``
    # channels: 32 latent channels need a last block of 64 channels at least
    "AutoencoderKLHunyuanImageRefiner": dict(latent_channels=8),
    "AutoencoderKLHunyuanVideo15": dict(latent_channels=8),
    # the blocks below normalize with 32 groups (hard-coded): widths of 32
    "AutoencoderKLTemporalDecoder": dict(block_out_channels=(32,)),
    "AutoencoderKLMochi": dict(
        encoder_block_out_channels=(32,) * 4, decoder_block_out_channels=(32,) * 4
    ),
    "ConsistencyDecoderVAE": dict(
        encoder_block_out_channels=(32, 32),
        encoder_down_block_types=("DownEncoderBlock2D",) * 2,
        decoder_block_out_channels=(32, 32),
        decoder_down_block_types=("ResnetDownsampleBlock2D",) * 2,
        decoder_up_block_types=("ResnetUpsampleBlock2D",) * 2,
    ),
    # 256 channels in the deepest blocks would be most of the weights (16M)
    "AutoencoderKLQwenImage21": dict(dim_mult=[1, 2, 2, 2, 2]),
    # each up block of the decoder halves the channels of the one before
    "AutoencoderKLLTX2Video": dict(decoder_block_out_channels=(16, 32, 64)),
    # Stable Audio's VAE: 5 blocks of 128 to 2048 channels (83M weights) compressing
    # 2048 times; 2 blocks compressing 8 times encode the 128 samples of the inputs
    "AutoencoderOobleck": dict(
        encoder_hidden_size=16,
        downsampling_ratios=[2, 4],
        channel_multiples=[1, 2],
        decoder_channels=16,
        decoder_input_channels=8,
    ),
    # KVAE audio: 5 blocks doubling 64 channels up to 2048 latent ones (100M weights)
    "AutoencoderKLKVAEAudio": dict(
        encoder_dim=16,
        encoder_rates=[2, 4],
        decoder_rates=[4, 2],
        latent_dim=64,
        codebook_dim=16,
        attn_num_heads=2,
    ),
    # MMAudio: 512 to 2048 channels (more than 3 GB in the export), an STFT of 2048
    "MMAudioVAE": dict(hidden_channels=32, n_fft=256, hop_length=64, mel_bins=32),
    # MiniMax H3 audio: 7 up blocks halving the decoder's width (1024: 32 would reach
    # 0 channels); 2 blocks each side compressing 8 times
    "AutoencoderKLMiniMaxH3Audio": dict(
        encoder_dim=16,
        encoder_rates=(2, 4),
        latent_dim=64,
        latent_channels=16,
        decoder_dim=64,
        decoder_rates=(4, 2),
        decoder_kernel_sizes=(8, 4),
    ),
    # RAE's encoder has heads of 64 (a width of 32 gives no head) and resizes every
    # image to encoder_input_size (224): 56 pixels make a grid of 4 x 4 patches of 14
    "AutoencoderRAE": dict(
        encoder_hidden_size=64,
        encoder_input_size=56,
        encoder_num_hidden_layers=1,
        decoder_num_hidden_layers=1,
        decoder_intermediate_size=64,
    ),
    # 32128 T5 token embeddings would be most of the model's weights
    "AnimaTextConditioner": dict(target_vocab_size=1000),
    # packed tokens of 64 channels: 2x2 patches of 16 latent channels (32 by default)
    "Flux2Transformer2DModel": dict(in_channels=64),
    # a text of 226 tokens by default, the length the model takes (static)
    "CogVideoXTransformer3DModel": dict(max_text_seq_length=8),
    "ConsisIDTransformer3DModel": dict(max_text_seq_length=8),
    # no default for the channels and the patch; 77 + 256 text tokens by default;
    # style and image size conditions off (Hunyuan-DiT v1.2)
    "HunyuanDiT2DModel": dict(
        in_channels=4,
        patch_size=2,
        cross_attention_dim_t5=32,
        text_len=4,
        text_len_t5=6,
        use_style_cond_and_image_meta_size=False,
    ),
    # its blocks normalize with `groups` groups of half the first width; with one block
    # a level (3 by default) the up-sampling attention gets the wrong channels
    "Kandinsky3UNet": dict(groups=8, block_out_channels=(32, 32, 32, 32), layers_per_block=2),
    "EasyAnimateTransformer3DModel": dict(in_channels=16, out_channels=16, patch_size=2),
    "HunyuanDiT2DControlNetModel": dict(
        in_channels=4,
        patch_size=2,
        cross_attention_dim_t5=32,
        text_len=4,
        text_len_t5=6,
        use_style_cond_and_image_meta_size=False,
    ),
    # a transformer block of a UNet: in_channels is the width of the block
    "DreamLiteTransformer2DModel": dict(in_channels=16, cross_attention_dim=32),
    # rope axes of the head dimension (128 by default)
    "HeliosTransformer3DModel": dict(rope_dim=(4, 6, 6)),
    # the head dimension is the sum of the rope axes
    "Kandinsky5Transformer3DModel": dict(axes_dims=(4, 6, 6)),
    "Kandinsky6Transformer3DModel": dict(axes_dims=(4, 6, 6)),
    "Kandinsky6SRTransformer3DModel": dict(axes_dims=(4, 6, 6), in_visual_dim=4, out_visual_dim=16),
    # the decoder takes the latents of the encoder's bottleneck: half its latent_dim
    "Cosmos3AVAEAudioTokenizer": dict(vocoder_input_dim=16),
    # one main block, an injection block reading the text; the Perceiver summarizes the
    # text in 4 to 8 gist tokens (256 to 512 by default) by steps of 2
    "BriaFibo2Transformer2DModel": dict(
        injection_layer_ids=(0,),
        perceiver_num_layers=1,
        min_num_gist_tokens=4,
        max_num_gist_tokens=8,
        gist_step=2,
        gist_min_text_len=4,
        gist_max_text_len=16,
    ),
    "GlmImageTransformer2DModel": dict(prior_vq_quantizer_codebook_size=1024),
    # the rope sections split a quarter of the head dimension (64 of 256)
    "Ideogram4Transformer2DModel": dict(mrope_section=(2, 1, 1)),
    # no defaults for the patch and the text widths (T5, Llama 3); one Llama layer
    # per block (2 double, 1 single); rope axes (t, h, w) of the head: (64, 32, 32) in
    # the checkpoints, the default (32, 32) has no time axis
    "HiDreamImageTransformer2DModel": dict(
        patch_size=2, caption_channels=[32, 32], llama_layers=[0, 1, 2], axes_dims_rope=(8, 4, 4)
    ),
    # the tiny ControlNet, with the width of the first block for the transformer that
    # fuses the conditions; no default for addition_time_embed_dim
    "ControlNetUnionModel": dict(
        block_out_channels=(16, 32),
        down_block_types=("CrossAttnDownBlock2D", "DownBlock2D"),
        attention_head_dim=8,
        conditioning_embedding_out_channels=(8, 8, 8, 8),
        addition_time_embed_dim=8,
        num_trans_channel=16,
        num_proj_channel=16,
        num_trans_head=2,
    ),
    # the FramePack checkpoints have both (off by default, the forward needs them)
    "HunyuanVideoFramepackTransformer3DModel": dict(has_image_proj=True, has_clean_x_embedder=True),
    # concat_padding_mask resizes the padding mask with torchvision, not installed here
    "CosmosTransformer3DModel": dict(concat_padding_mask=False),
    # continuous input (no default for in_channels, num_vector_embeds or patch_size):
    # the spatial transformer of Stable Diffusion's UNets, 4 latent channels
    "Transformer2DModel": dict(in_channels=4, norm_num_groups=2, cross_attention_dim=32),
    # the first block concatenates the time embedding (time_embedding_dim channels) to
    # the sample: extra_in_channels must match it (Dance Diffusion)
    "UNet1DModel": dict(extra_in_channels=16, time_embedding_dim=16),
    # Latte-1: patches of 2, captions projected to the width, adaLN-single
    "LatteTransformer3DModel": dict(
        in_channels=4,
        out_channels=4,
        patch_size=2,
        caption_channels=32,
        cross_attention_dim=32,
        norm_type="ada_norm_single",
        video_length=5,  # the frames of EXPORT_SIZES (STATIC_FRAMES)
    ),
    # rope axes (axes_dim_rope) splitting the head dimension of 16
    "Lumina2Transformer2DModel": dict(axes_dim_rope=(4, 4, 8)),
    # Stable Cascade's prior (stage C): text, pooled text and image CLIP embeddings
    "StableCascadeUNet": dict(
        clip_text_in_channels=32,
        clip_text_pooled_in_channels=32,
        clip_image_in_channels=32,
        switch_level=(False,),
    ),
    # 256 latent channels of the audio autoencoder: 16
    "StableAudio3DiTModel": dict(io_channels=16),
    # one VACE block, on the first of the two layers (layer 0 is required)
    "WanVACETransformer3DModel": dict(vace_layers=(0,)),
    # five micro-conditions of micro_cond_encode_dim each; a codebook of 64 tokens
    # embedded in 32 channels (in_channels: the width of the token embedding)
    "UVit2DModel": dict(
        micro_cond_embed_dim=5 * 32,
        vocab_size=80,
        codebook_size=64,
        in_channels=32,
        block_out_channels=32,
        block_num_heads=2,
    ),
    # num_kv_heads has no default (None breaks the attention's constructor)
    "LuminaNextDiT2DModel": dict(num_kv_heads=2),
    # two upsamplings (x16 in length) from 32 channels, one residual kernel
    "MMAudioVocoder": dict(
        upsample_initial_channel=32,
        upsample_rates=(4, 4),
        upsample_kernel_sizes=(8, 8),
        resblock_kernel_sizes=(3,),
        resblock_dilation_sizes=((1, 3),),
    ),
    # rope axes (height, width) splitting the head dimension of 16
    "PRXTransformer2DModel": dict(axes_dim=(8, 8)),
    # dit_heads escapes the generic rule: 24 heads of a width of 32 would be of size 1
    "LongCatAudioDiTTransformer": dict(dit_heads=2),
    # the text fusion's sizes escape the generic rules
    "Krea2Transformer2DModel": dict(text_num_key_value_heads=2, text_intermediate_size=64),
    # 4 experts of 32; by default the first three and the last blocks are dense (all
    # of two layers): the first dense, the second a mixture of experts
    "NucleusMoEImageTransformer2DModel": dict(
        num_experts=4,
        moe_intermediate_dim=32,
        dense_moe_strategy="leave_first_block_dense",
        capacity_factors=2.0,  # each expert takes half the tokens (8: twice the tokens)
    ),
    # partial rotary embedding: half of the head dimension of 16
    "MiniMaxMusic3Transformer1DModel": dict(rotary_dim=8),
    # Phi-3's long-context rope factors (one per frequency of a head of 16), a small
    # vocabulary
    "OmniGenTransformer2DModel": dict(
        rope_scaling=dict(short_factor=[1.0] * 8, long_factor=[1.0] * 8),
        vocab_size=100,
        pad_token_id=0,
    ),
    # faces of 16x16 pixels (512 by default) through 16-channel convolutions; a face
    # adapter after each of the two blocks (every 5th by default: none of two)
    "WanAnimateTransformer3DModel": dict(
        motion_encoder_size=16,
        motion_encoder_channel_sizes={"16": 16, "8": 16, "4": 16},
        face_encoder_num_heads=2,
        face_encoder_hidden_dim=32,
        inject_face_latents_blocks=1,
    ),
    # the temporal transformer of AnimateDiff's motion modules, on a UNet block's features
    "TransformerTemporalModel": dict(in_channels=32, norm_num_groups=8),
}


def init_defaults(cls) -> dict[str, Any]:
    """The defaults of the keyword arguments of ``cls.__init__``."""
    out = {}
    for name, p in inspect.signature(cls.__init__).parameters.items():
        if (
            name != "self"
            and p.default is not inspect.Parameter.empty
            and p.kind not in (p.VAR_KEYWORD, p.VAR_POSITIONAL)
        ):
            out[name] = p.default
    return out


def _is_int(v) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def rescale_axes(axes, total: int) -> tuple[int, ...]:
    """Rope axes (even sizes) proportional to ``axes`` summing to ``total``."""
    old = sum(axes)
    parts = [max(2, int(a * total / old) // 2 * 2) for a in axes]
    parts[-1] += total - sum(parts)
    return tuple(parts)


def _old_head_dim(defaults: dict) -> int | None:
    for key in ("attention_head_dim", "head_dim"):
        if _is_int(defaults.get(key)) and defaults[key] > 16:
            return defaults[key]
    heads = next((v for k, v in defaults.items() if _HEADS.match(k) and _is_int(v)), None)
    width = next(
        (defaults[k] for k in ("dim", "hidden_size", "model_dim") if _is_int(defaults.get(k))), None
    )
    return width // heads if heads and width else None


def shrink_value(name: str, value, defaults: dict):
    """The tiny value of one constructor argument (``value`` when kept)."""
    if _KEEP.match(name) and not _BLOCKS.match(name):
        return value
    if _is_int(value):
        if _LAYERS.match(name):
            return min(value, 2 if name == "num_layers" else 1)
        if _HEADS.match(name):
            return min(value, HEADS)
        if name in ("num_key_value_heads", "num_kv_heads"):
            return min(value, 1)
        if _HEAD_DIM.match(name):
            return min(value, HEAD_DIM) if value > 16 else value
        if name == "norm_num_groups":
            return min(value, 8)
        if _WIDTHS.match(name) and value > 64:
            return WIDTH
        return value
    if isinstance(value, (tuple, list)) and value and all(_is_int(v) for v in value):
        if _ROPE.match(name):
            old = _old_head_dim(defaults)  # the axes split the head dimension
            return rescale_axes(value, HEAD_DIM) if old == sum(value) else value
        if _BLOCKS.match(name):
            return type(value)(16 if i == 0 else 32 for i in range(len(value)))
        if _LAYERS.match(name):
            return type(value)(1 for _ in value)
        if _HEADS.match(name):
            return type(value)(min(v, HEADS) for v in value)
    return value


def tiny_kwargs(cls, overrides: dict | None = None) -> dict[str, Any]:
    """Constructor arguments of a tiny ``cls``: every shrunk default that differs from
    the default, then ``CONFIG_OVERRIDES`` and ``overrides``."""
    defaults = init_defaults(cls)
    kwargs = {}
    for name, value in defaults.items():
        new = shrink_value(name, value, defaults)
        if new is not value and new != value:
            kwargs[name] = new
    kwargs.update(CONFIG_OVERRIDES.get(cls.__name__, {}))
    kwargs.update(overrides or {})
    return kwargs
