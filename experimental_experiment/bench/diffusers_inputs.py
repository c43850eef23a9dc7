"""Inputs of a diffusers model built from the names of its forward (or ``encode`` /
``decode``) arguments, with the sizes a pipeline varies as dynamic dimensions: batch,
latent height and width, frames of a video, sequence of the text embeddings.

The main tensor (``hidden_states``, ``sample``, ``x``...) has one of the
``LAYOUTS``; the case builder tries the layouts of the kind of the class until the
eager model runs on both sizes.

.. code-block:: python

    from experimental_experiment.bench.diffusers_inputs import EXPORT_SIZES, make_inputs

    inputs, ds, fixed = make_inputs(model, "forward", "4d", 4, EXPORT_SIZES, "transformer-2d")
"""

from __future__ import annotations

import inspect
import re
from typing import Any

import torch

from .diffusers_classes import DiffusersCaseError

#: sizes of the exported inputs and of the check inputs (latent height and width,
#: frames as a video VAE expects them: 1 + 4k)
EXPORT_SIZES = dict(batch=2, height=16, width=16, frames=5, seq=5)
CHECK_SIZES = dict(batch=3, height=24, width=32, frames=9, seq=7)

#: layout of the main tensor -> shape and dynamic axes (C: channels)
LAYOUTS = ("4d", "5d", "5d-fc", "packed", "3d")
#: layouts tried for each kind, in order
KIND_LAYOUTS = {
    "transformer-2d": ("4d", "packed", "3d"),
    "transformer-3d": ("5d", "5d-fc", "packed", "4d"),
    "unet": ("4d", "5d", "5d-fc", "3d"),
    "controlnet": ("4d", "packed", "5d"),
    "vae-encoder": ("4d", "5d", "3d"),
    "vae-decoder": ("4d", "5d", "3d"),
    "adapter": ("4d",),
    "prior": ("packed",),
}

MAIN = ("hidden_states", "sample", "x", "latents", "z", "mel", "inputs_embeds")
TIMESTEPS = ("timestep", "t", "timestep_r", "r_timestep", "timestep_ratio", "decoder_noise_time")
#: a forward that multiplies its timestep by 1000 (Flux and its followers) takes a
#: fraction of the schedule: given 900, its sinusoidal embedding would take float32
#: arguments near 1e6, where one rounding of the argument moves the sine by 1e-2 and
#: any two correct implementations differ
_SCALED_TIMESTEP = re.compile(r"\btimestep\w*\s*=\s*timestep\w*\b[^\n]*\*\s*1000\b")
TEXTS = ("encoder_hidden_states", "cap_feats", "text_bth")
MASKS = ("encoder_attention_mask", "encoder_mask")
POOLED = ("pooled_projections", "pooled_text_emb", "global_hidden_states")
#: configuration keys giving the width of the text embeddings, in order
TEXT_DIMS = (
    "joint_attention_dim",
    "cross_attention_dim",
    "caption_channels",
    "text_embed_dim",
    "text_dim",
    "cap_feat_dim",
    "context_dim",
    "text_hidden_dim",
    "encoder_hidden_size",
    "in_text_dim",
    "encoder_hidden_states_channels",
    "crossattn_proj_in_channels",
    "condition_dim",
)
POOLED_DIMS = (
    "pooled_projection_dim",
    "in_text_dim2",
    "projection_dim",
    "global_states_input_dim",
    "text_embed_dim",
)


def _batch(*shape, dtype=torch.float32, high: int = 0):
    """An input of shape ``(batch, *shape)``, dynamic batch: random normal values, or
    integers below ``high``."""

    def make(config, sizes, gen):
        full = (sizes["batch"], *shape)
        value = (
            torch.randint(0, high, full, generator=gen)
            if high
            else torch.randn(full, generator=gen).to(dtype)
        )
        return value, {0: "batch"}

    return make


def _from_config(key: str, *shape_before: int):
    """``(batch, *shape_before, config[key])`` random normal, dynamic batch."""

    def make(config, sizes, gen):
        return torch.randn(sizes["batch"], *shape_before, config[key], generator=gen), {0: "batch"}

    return make


def _prior_states(config, sizes, gen):
    return torch.randn(sizes["batch"], config["embedding_dim"], generator=gen), {0: "batch"}


def _prior_text(config, sizes, gen):
    return torch.randn(
        sizes["batch"], config["num_embeddings"], config["embedding_dim"], generator=gen
    ), {0: "batch"}


def _uvit_ids(config, sizes, gen):
    h, w = sizes["height"], sizes["width"]
    return torch.randint(0, config["codebook_size"], (sizes["batch"], h, w), generator=gen), {
        0: "batch",
        1: "height",
        2: "width",
    }


def _video_like_sample(config, sizes, gen):
    return main_tensor("5d", config["in_channels"], "unet", sizes, gen)


def _frame_timesteps(config, sizes, gen):
    """One timestep of the schedule (0-1000) per frame, ``(batch, frames)``: AnyFlow
    denoises each frame at its own time."""
    value = torch.rand(sizes["batch"], sizes["frames"], generator=gen) * 900 + 0.05
    return value, {0: "batch", 1: "frames"}


def _chunk_partition(config, sizes, gen):
    """Frames per chunk of AnyFlow-FAR, one frame a chunk: more chunks than
    ``full_chunk_limit`` (3), so the first ones go through the compressed patch
    embedding. A Python list summing to the frames: the frame count is static."""
    return [1] * sizes["frames"]


def _fraction_timestep(config, sizes, gen):
    """A fraction of the schedule, ``(batch,)``, for a model whose time embedding
    multiplies it by 1000 inside a submodule (ACE-Step: ``scaled_timestep`` only reads
    the forward)."""
    return torch.rand(sizes["batch"], generator=gen) * 0.9 + 0.05, {0: "batch"}


def _audio_length(sizes) -> int:
    return 4 * sizes["height"]


def _ace_latents(config, sizes, gen):
    """Noisy acoustic latents of ACE-Step, ``(batch, length, audio_acoustic_hidden_dim)``."""
    shape = (sizes["batch"], _audio_length(sizes), config["audio_acoustic_hidden_dim"])
    return torch.randn(*shape, generator=gen), {0: "batch", 1: "length"}


def _ace_context(config, sizes, gen):
    """Context latents of ACE-Step (source latents and chunk masks), the rest of the
    patch embedding's input channels."""
    width = config["in_channels"] - config["audio_acoustic_hidden_dim"]
    shape = (sizes["batch"], _audio_length(sizes), width)
    return torch.randn(*shape, generator=gen), {0: "batch", 1: "length"}


def _anima_source(config, sizes, gen):
    """Hidden states of Anima's text encoder (Qwen3), ``(batch, seq, source_dim)``."""
    shape = (sizes["batch"], sizes["seq"], config["source_dim"])
    return torch.randn(*shape, generator=gen), {0: "batch", 1: "seq"}


def _anima_target_ids(config, sizes, gen):
    """T5 token ids used as queries by Anima, ``(batch, target)``: ``height`` tokens."""
    shape = (sizes["batch"], sizes["height"])
    value = torch.randint(0, config["target_vocab_size"], shape, generator=gen)
    return value, {0: "batch", 1: "target"}


def _pixels(layout: str, channels: int | str, scale: int = 1):
    """The main tensor of an encoder, ``channels`` channels (a number, or the key of
    the configuration giving it) and height and width ``scale`` times those of
    ``main_tensor``: Mochi's encoder expands 3 RGB channels into 15 Fourier features
    (``in_channels``), LTX-2's compresses 32 times and needs 64 pixels to keep 2
    latent rows."""

    def make(config, sizes, gen):
        c = config[channels] if isinstance(channels, str) else channels
        h, w = sizes["height"] * scale, sizes["width"] * scale
        return main_tensor(layout, c, "vae-encoder", dict(sizes, height=h, width=w), gen)

    return make


def _none(config, sizes, gen):
    """``None``: an optional input the forward's default configuration does not use
    (the builder would otherwise make it from its name)."""
    return None


def _position_ids(axes: int, text: bool = False):
    """Position ids of the packed image tokens ``(height * width / 4, axes)`` (Flux 2:
    4 axes) or of the text tokens ``(seq, axes)``, zeros as the builder's ``img_ids``."""

    def make(config, sizes, gen):
        if text:
            return torch.zeros(sizes["seq"], axes), {0: "seq"}
        return torch.zeros(sizes["height"] * sizes["width"] // 4, axes), {0: "tokens"}

    return make


def _frames_as_batch(config, sizes, gen):
    """Latents of ``frames`` images of ``batch`` videos stacked along the first axis,
    ``(batch * frames, latent_channels, h, w)``, for a decoder that takes the frame
    count as a Python int (``num_frames``)."""
    b, f = sizes["batch"], sizes["frames"]
    h, w = _scaled("vae-decoder", sizes)
    value = torch.randn(b * f, config["latent_channels"], h, w, generator=gen)
    return value, {0: "batch", 2: "height", 3: "width"}


def _num_frames(config, sizes, gen):
    return sizes["frames"]


def _one_frame(key: str, kind: str):
    """A video of one frame, ``(batch, config[key], 1, h, w)``, for an image VAE
    written in the 5-D layout of a video one (Qwen-Image 2.1 folds the single frame
    of Wan's causal convolutions away): the frame axis stays static."""

    def make(config, sizes, gen):
        value, ds = main_tensor("5d", config[key], kind, dict(sizes, frames=1), gen)
        return value, {a: d for a, d in ds.items() if d != "frames"}

    return make


def _per_frame_text(config, sizes, gen):
    """Text embeddings repeated for each frame, ``(batch * frames, seq, dim)``: the
    pipeline of AnimateDiff gives every frame the prompt (UNetMotionModel runs its
    spatial blocks on the frames as a batch)."""
    dim = config["cross_attention_dim"]
    shape = (sizes["batch"] * sizes["frames"], sizes["seq"], dim)
    return torch.randn(*shape, generator=gen), {0: "batch_frames", 1: "seq"}


def _features_frames_as_batch(config, sizes, gen):
    """Features of a video whose frames are in the batch, ``(batch * frames, C, H, W)``,
    as a UNet block gives them to its temporal transformer."""
    shape = (
        sizes["batch"] * sizes["frames"],
        config["in_channels"],
        sizes["height"],
        sizes["width"],
    )
    return torch.randn(*shape, generator=gen), {0: "batch_frames", 2: "height", 3: "width"}


def _ltx_grid(sizes) -> tuple[int, int, int]:
    """Latent frames, height and width of LTX-Video: its latents are compressed 32
    times in space, half the sizes of an image model (the check keeps 1728 tokens)."""
    return sizes["frames"], sizes["height"] // 2, sizes["width"] // 2


def _video_tokens(config, sizes, gen):
    """The latents of a video patchified, ``(batch, frames * height * width, C)``."""
    f, h, w = _ltx_grid(sizes)
    tokens = f * h * w
    shape = (sizes["batch"], tokens, config["in_channels"])
    return torch.randn(*shape, generator=gen), {0: "batch", 1: "tokens"}


def _video_coords(config, sizes, gen):
    """Coordinates (frame, row, column) of each token of ``_video_tokens``,
    ``(batch, 3, tokens)``, in pixels (latents compressed 8 times in time, 32 in
    space, LTX-Video): the rotary embedding reads them, not Python sizes."""
    f, h, w = _ltx_grid(sizes)
    grid = torch.stack(
        torch.meshgrid(
            torch.arange(f) * 8.0, torch.arange(h) * 32.0, torch.arange(w) * 32.0, indexing="ij"
        )
    ).reshape(3, -1)
    return grid.unsqueeze(0).repeat(sizes["batch"], 1, 1), {0: "batch", 2: "tokens"}


def _audio_latents(key: str):
    """Latents of an audio, ``(batch, config[key], length)``, dynamic batch and length."""

    def make(config, sizes, gen):
        shape = (sizes["batch"], config[key], _audio_length(sizes))
        return torch.randn(*shape, generator=gen), {0: "batch", 2: "length"}

    return make


def _static_text(dim_key: str, length_key: str):
    """Text embeddings ``(batch, config[length_key], config[dim_key])`` of the length
    the model was built for (a learned padding or pooling of that length): the text
    length is static."""

    def make(config, sizes, gen):
        shape = (sizes["batch"], config[length_key], config[dim_key])
        return torch.randn(*shape, generator=gen), {0: "batch"}

    return make


def _latents(channels: int):
    """Image latents of ``channels`` channels, ``(batch, channels, height, width)``,
    for a class whose configuration does not give them."""

    def make(config, sizes, gen):
        return main_tensor("4d", channels, "unet", sizes, gen)

    return make


def _audio(key: str, kind: str):
    """A waveform or its latents, ``(batch, config[key], length)``, dynamic batch
    and length, for an argument not among ``MAIN``."""

    def make(config, sizes, gen):
        return main_tensor("3d", config[key], kind, sizes, gen)

    return make


def _static_mask(length_key: str):
    """A mask of ones ``(batch, config[length_key])`` for ``_static_text``."""

    def make(config, sizes, gen):
        return torch.ones(sizes["batch"], config[length_key], dtype=torch.int64), {0: "batch"}

    return make


def _video_channels(key: str | int):
    """A video of ``config[key]`` channels (or ``key`` channels),
    ``(batch, C, frames, height, width)``."""

    def make(config, sizes, gen):
        channels = key if isinstance(key, int) else config[key]
        return main_tensor("5d", channels, "unet", sizes, gen)

    return make


def _mono(config, sizes, gen):
    """A mono waveform, ``(batch, 1, samples)``, dynamic batch and length."""
    return main_tensor("3d", 1, "vae-encoder", sizes, gen)


def _waveform(config, sizes, gen):
    """A mono waveform, ``(batch, samples)``, of ``4 * height`` frames of the STFT
    (``hop_length`` samples a frame), dynamic batch and length."""
    samples = _audio_length(sizes) * config["hop_length"]
    return torch.randn(sizes["batch"], samples, generator=gen) * 0.1, {0: "batch", 1: "length"}


def _constant(value):
    """A constant keyword argument (LongCat's encoder samples its posterior unless
    ``sample_posterior=False``)."""

    def make(config, sizes, gen):
        return value

    return make


def _qwen_img_shapes(config, sizes, gen):
    """``img_shapes`` of Qwen-Image: (frames, height, width) of the packed latents of
    each image, Python integers (the image size is static, ``STATIC_SIZE``)."""
    return [(1, sizes["height"] // 2, sizes["width"] // 2)] * sizes["batch"]


def _lumina_rope(config, sizes, gen):
    """The rotary table Lumina-Next's pipeline gives the model, complex, for up to 384
    patches in height and width (it slices it to the image): a static shape."""
    from diffusers.models.embeddings import get_2d_rotary_pos_embed_lumina

    head_dim = config["hidden_size"] // config["num_attention_heads"]
    return get_2d_rotary_pos_embed_lumina(head_dim, 384, 384), {}


def _no_kwargs(config, sizes, gen):
    """An empty dictionary of keyword arguments."""
    return {}


def _audio_sequence(key: str):
    """Audio latents as a sequence, ``(batch, length, config[key])``."""

    def make(config, sizes, gen):
        shape = (sizes["batch"], _audio_length(sizes), config[key])
        return torch.randn(*shape, generator=gen), {0: "batch", 1: "length"}

    return make


def _second_text(dim_key: str):
    """A second text ``(batch, seq2, config[dim_key])`` (byT5 glyphs of HunyuanVideo
    1.5), its length a dynamic dimension of its own."""

    def make(config, sizes, gen):
        shape = (sizes["batch"], sizes["seq"] + 1, config[dim_key])
        return torch.randn(*shape, generator=gen), {0: "batch", 1: "seq2"}

    return make


def _rae_latents(config, sizes, gen):
    """Latents of RAE, ``(batch, encoder_hidden_size, grid, grid)``: its encoder
    resizes any image to ``encoder_input_size`` and its ViT decoder has one position
    embedding per token of that grid, so the latent height and width are static."""
    grid = config["encoder_input_size"] // config["encoder_patch_size"]
    value = torch.randn(sizes["batch"], config["encoder_hidden_size"], grid, grid, generator=gen)
    return value, {0: "batch"}


def _latents_4d(config, sizes, gen):
    """Latents of an image decoder, ``(batch, latent_channels, h, w)``, for a decode
    whose argument is not among ``MAIN`` (VQModel's ``h``)."""
    return main_tensor("4d", config["latent_channels"], "vae-decoder", sizes, gen)


def _second_mask(config, sizes, gen):
    """A mask of ones for ``_second_text``."""
    return torch.ones(sizes["batch"], sizes["seq"] + 1, dtype=torch.int64), {0: "batch", 1: "seq2"}


def _text_lens(config, sizes, gen):
    """Length of each text of the batch, ``(batch,)``: the whole text."""
    return torch.full((sizes["batch"],), sizes["seq"], dtype=torch.int64), {0: "batch"}


def _channels_last_video(extra: str, double: bool = False):
    """Latents ``(batch, frames, height, width, C)``, C = ``config[extra]`` (twice plus
    one with ``double``: the noisy latents, the condition and its mask)."""

    def make(config, sizes, gen):
        c = 2 * config[extra] + 1 if double else config[extra]
        shape = (sizes["batch"], sizes["frames"], sizes["height"], sizes["width"], c)
        value = torch.randn(*shape, generator=gen)
        return value, {0: "batch", 1: "frames", 2: "height", 3: "width"}

    return make


def _stereo_audio(config, sizes, gen):
    """Stereo waveform ``(batch, 2, samples)`` of Cosmos 3's audio tokenizer: the
    encoder takes ``input_channels`` per side of a stereo signal, ``height / 8``
    latent frames of 1920 samples (the product of the decoder's strides)."""
    channels = config["input_channels"] * (2 if config["stereo"] else 1)
    length = 1920 * (sizes["height"] // 8)
    value = torch.randn(sizes["batch"], channels, length, generator=gen)
    return value, {0: "batch", 2: "samples"}


def _text_layers(config, sizes, gen):
    """Hidden states of the text encoder's layers, one ``(batch, seq, text_encoder_dim)``
    per block of Bria-FIBO (double then single), a Python list of tensors."""
    count = config["num_layers"] + config["num_single_layers"]
    shape = (sizes["batch"], sizes["seq"], config["text_encoder_dim"])
    layers = [torch.randn(*shape, generator=gen) for _ in range(count)]
    return layers, [{0: "batch", 1: "seq"}] * count


def _text_bundles(config, sizes, gen):
    """Text features of Bria-FIBO 2, ``(batch, 1 + injection blocks, seq, cap_feat_dim)``:
    the Perceiver's bundle, then one bundle per injection block."""
    bundles = 1 + len(config["injection_layer_ids"])
    shape = (sizes["batch"], bundles, sizes["seq"], config["cap_feat_dim"])
    return torch.randn(*shape, generator=gen), {0: "batch", 2: "seq"}


def _visual_rope_pos(config, sizes, gen):
    """Rope positions of Kandinsky 5's patches, a list ``[arange(frames),
    arange(height / 2), arange(width / 2)]`` as its pipeline makes them."""
    sizes_ = (sizes["frames"], sizes["height"] // 2, sizes["width"] // 2)
    return [torch.arange(n) for n in sizes_], [{0: "frames"}, {0: "pheight"}, {0: "pwidth"}]


def _text_rope_pos(config, sizes, gen):
    """Rope positions of the text tokens, ``arange(seq)``."""
    return torch.arange(sizes["seq"]), {0: "seq"}


def _prior_tokens(config, sizes, gen):
    """Token ids of GLM-Image's autoregressive prior, one per 2x2 patch,
    ``(batch, height * width / 4)``."""
    shape = (sizes["batch"], sizes["height"] * sizes["width"] // 4)
    value = torch.randint(0, config["prior_vq_quantizer_codebook_size"], shape, generator=gen)
    return value, {0: "batch", 1: "tokens"}


def _prior_drop(config, sizes, gen):
    """Which prior embeddings are dropped (zeroed), a random boolean mask."""
    shape = (sizes["batch"], sizes["height"] * sizes["width"] // 4)
    return torch.rand(*shape, generator=gen) < 0.25, {0: "batch", 1: "tokens"}


def _packed_length(sizes) -> int:
    """Tokens of a sequence packing the text then the 2x2 patches of the image."""
    return sizes["seq"] + sizes["height"] * sizes["width"] // 4


def _packed_sequence(key: str):
    """``(batch, text + image tokens, config[key])``: Ideogram 4 packs both in one
    sequence (the indicator tells which is which)."""

    def make(config, sizes, gen):
        shape = (sizes["batch"], _packed_length(sizes), config[key])
        return torch.randn(*shape, generator=gen), {0: "batch", 1: "tokens"}

    return make


def _packed_positions(config, sizes, gen):
    """``(t, h, w)`` rope positions of the packed sequence: the text on the time axis,
    then the grid of the image."""
    b, s, h, w = sizes["batch"], sizes["seq"], sizes["height"] // 2, sizes["width"] // 2
    text = torch.arange(s)[:, None].expand(s, 3)
    hh, ww = torch.meshgrid(torch.arange(h), torch.arange(w), indexing="ij")
    image = torch.stack([torch.full_like(hh, s), hh, ww], dim=-1).reshape(-1, 3)
    value = torch.cat([text, image]).unsqueeze(0).expand(b, -1, -1).contiguous()
    return value, {0: "batch", 1: "tokens"}


def _packed_segments(config, sizes, gen):
    """One sample per row: every token in segment 0."""
    return torch.zeros(sizes["batch"], _packed_length(sizes), dtype=torch.int64), {
        0: "batch",
        1: "tokens",
    }


def _packed_indicator(config, sizes, gen):
    """3 for a text token, 2 for an image token (Ideogram 4's indicators)."""
    value = torch.full((sizes["batch"], _packed_length(sizes)), 2, dtype=torch.int64)
    value[:, : sizes["seq"]] = 3
    return value, {0: "batch", 1: "tokens"}


def _schedule_timestep(config, sizes, gen):
    """A timestep of the schedule (0-1000), ``(batch,)``, for an argument the builder
    does not recognize by its name (``timesteps``)."""
    return torch.rand(sizes["batch"], generator=gen) * 900 + 0.05, {0: "batch"}


def _text_of(index: int):
    """Text embeddings ``(batch, seq, config["caption_channels"][index])``."""

    def make(config, sizes, gen):
        shape = (sizes["batch"], sizes["seq"], config["caption_channels"][index])
        return torch.randn(*shape, generator=gen), {0: "batch", 1: "seq"}

    return make


def _llama_layers(config, sizes, gen):
    """Hidden states of the layers of HiDream's Llama 3, stacked:
    ``(layers, batch, seq, caption_channels[1])``."""
    shape = (
        max(config["llama_layers"]) + 1,
        sizes["batch"],
        sizes["seq"],
        config["caption_channels"][1],
    )
    return torch.randn(*shape, generator=gen), {1: "batch", 2: "seq"}


def _union_conditions(config, sizes, gen):
    """The conditioning images of ControlNet-Union, a list of one image (pixels, 8
    times the latents) for the control type ``control_type_idx``."""
    shape = (
        sizes["batch"],
        config["conditioning_channels"],
        8 * sizes["height"],
        8 * sizes["width"],
    )
    return [torch.randn(*shape, generator=gen)], [{0: "batch", 2: "cheight", 3: "cwidth"}]


def _union_control_type(config, sizes, gen):
    """``(batch, num_control_type)``: 1 for the control type given, 0 elsewhere."""
    value = torch.zeros(sizes["batch"], config["num_control_type"])
    value[:, 0] = 1
    return value, {0: "batch"}


def _union_control_index(config, sizes, gen):
    """The control types of the images, a Python list (a constant of the call)."""
    return [0]


#: frames of the clean, 2x and 4x history latents of FramePack (its pipeline's counts)
_FRAMEPACK_HISTORY = {"clean": 2, "2x": 2, "4x": 16}


def _framepack_latents(which: str):
    """History latents of FramePack ``(batch, C, frames, height, width)``, the frame
    count of its pipeline (``_FRAMEPACK_HISTORY``), static."""

    def make(config, sizes, gen):
        shape = (
            sizes["batch"],
            config["in_channels"],
            _FRAMEPACK_HISTORY[which],
            sizes["height"],
            sizes["width"],
        )
        return torch.randn(*shape, generator=gen), {0: "batch", 3: "height", 4: "width"}

    return make


def _framepack_indices(which: str | None):
    """Frame indices ``(frames,)`` of the latents (``None``: the noisy ones, after
    every history frame) or of one history (static)."""

    def make(config, sizes, gen):
        if which is None:
            start = sum(_FRAMEPACK_HISTORY.values())
            return torch.arange(start, start + sizes["frames"]), {0: "frames"}
        offset = {"4x": 0, "2x": 16, "clean": 18}[which]
        return torch.arange(offset, offset + _FRAMEPACK_HISTORY[which]), {}

    return make


def _class_labels(key: str):
    """Class labels ``(batch,)`` below ``config[key]`` (DiT: ImageNet classes)."""

    def make(config, sizes, gen):
        return torch.randint(0, config[key], (sizes["batch"],), generator=gen), {0: "batch"}

    return make


def _krea2_text(config, sizes, gen):
    """Hidden states of the text encoder tapped at ``num_text_layers`` layers,
    ``(batch, seq, num_text_layers, text_hidden_dim)``."""
    shape = (sizes["batch"], sizes["seq"], config["num_text_layers"], config["text_hidden_dim"])
    return torch.randn(*shape, generator=gen), {0: "batch", 1: "seq"}


def _krea2_positions(config, sizes, gen):
    """Rotary coordinates (t, h, w) of the text tokens (zeros) then of the packed
    image tokens (their grid), ``(seq + tokens, 3)``."""
    h, w = sizes["height"] // 2, sizes["width"] // 2
    rows, cols = torch.meshgrid(torch.arange(h), torch.arange(w), indexing="ij")
    image = torch.stack([torch.zeros_like(rows), rows, cols], dim=-1).reshape(-1, 3)
    text = torch.zeros(sizes["seq"], 3, dtype=image.dtype)
    return torch.cat([text, image]), {0: "positions"}


def _minimax_condition(config, sizes, gen):
    """Hidden states of the autoregressive stage, the layers concatenated per frame,
    ``(batch, frames, num_condition_layers * condition_hidden_dim)``."""
    width = config["num_condition_layers"] * config["condition_hidden_dim"]
    shape = (sizes["batch"], _audio_length(sizes), width)
    return torch.randn(*shape, generator=gen), {0: "batch", 1: "length"}


def _depth_steps(config, sizes, gen):
    """The depth sequence of the RVQ decoder, ``(batch, steps, hidden_size)``: the
    global state then the codes sampled so far (``seq`` steps, below
    ``max_position_embeddings``)."""
    shape = (sizes["batch"], sizes["seq"], config["hidden_size"])
    return torch.randn(*shape, generator=gen), {0: "batch", 1: "steps"}


def _qwen21_img_shapes(config, sizes, gen):
    """``img_shapes`` of Qwen-Image 2.1, one list per sample (condition images then
    the target): the target only, Python integers (``STATIC_SIZE``)."""
    return [[(1, sizes["height"] // 2, sizes["width"] // 2)]] * sizes["batch"]


def _qwen21_img_mask(config, sizes, gen):
    """Slots of the vision-language sequence, ``(batch, seq + tokens // 4)``: the text
    tokens (False) then one slot (True) per 2x2 group of target latent tokens."""
    slots = (sizes["height"] // 2) * (sizes["width"] // 2) // 4
    row = torch.cat(
        [torch.zeros(sizes["seq"], dtype=torch.bool), torch.ones(slots, dtype=torch.bool)]
    )
    return row.unsqueeze(0).repeat(sizes["batch"], 1), {0: "batch", 1: "slots"}


def _omnigen_length(config, sizes) -> int:
    """Joint sequence of OmniGen: the prompt's tokens, the time token, the patches."""
    p = config["patch_size"]
    return sizes["seq"] + 1 + (sizes["height"] // p) * (sizes["width"] // p)


def _omnigen_ids(config, sizes, gen):
    """Token ids of the prompt (no input image), ``(batch, seq)``."""
    shape = (sizes["batch"], sizes["seq"])
    return torch.randint(1, config["vocab_size"], shape, generator=gen), {0: "batch", 1: "seq"}


def _omnigen_mask(config, sizes, gen):
    """Attention mask of the joint sequence, ``(batch, length, length)``, 1 (float) where
    a token is visible: every token."""
    n = _omnigen_length(config, sizes)
    return torch.ones(sizes["batch"], n, n), {0: "batch", 1: "joint", 2: "joint"}


def _omnigen_positions(config, sizes, gen):
    """Positions of the joint sequence, ``(batch, length)``."""
    n = _omnigen_length(config, sizes)
    return torch.arange(n).unsqueeze(0).repeat(sizes["batch"], 1), {0: "batch", 1: "joint"}


def _empty_list(config, sizes, gen):
    """No input image latents (an empty list)."""
    return []


def _wan_animate_pose(config, sizes, gen):
    """Pose latents of Wan-Animate, one frame less than the latents (the reference
    frame), ``(batch, latent_channels, frames - 1, height, width)``."""
    shape = (sizes["batch"], config["latent_channels"], sizes["frames"] - 1)
    shape = (*shape, sizes["height"], sizes["width"])
    return torch.randn(*shape, generator=gen), {
        0: "batch",
        2: "pose_frames",
        3: "height",
        4: "width",
    }


def _wan_animate_faces(config, sizes, gen):
    """Face video in pixels, ``(batch, 3, 4 * (frames - 1), size, size)``: the face
    encoder divides its frames by 4 (rounded up) into the frames of the pose."""
    size = config["motion_encoder_size"]
    shape = (sizes["batch"], 3, 4 * (sizes["frames"] - 1), size, size)
    return torch.randn(*shape, generator=gen), {0: "batch", 2: "face_frames"}


#: per-class inputs: argument name -> function(config, sizes, generator) returning
#: ``(tensor, dynamic axes)`` or a constant keyword argument
INPUT_OVERRIDES: dict[str, dict[str, Any]] = {
    "UNetSpatioTemporalConditionModel": dict(added_time_ids=_batch(3)),
    "StableCascadeUNet": dict(
        clip_text_pooled=_from_config("clip_text_pooled_in_channels", 1),
        clip_text=_from_config("clip_text_in_channels", 3),
        clip_img=_from_config("clip_image_in_channels", 1),
    ),
    "UVit2DModel": dict(input_ids=_uvit_ids, micro_conds=_batch(5)),
    "PriorTransformer": dict(
        hidden_states=_prior_states, proj_embedding=_prior_states, encoder_hidden_states=_prior_text
    ),
    "AceStepTransformer1DModel": dict(
        hidden_states=_ace_latents,
        context_latents=_ace_context,
        timestep=_fraction_timestep,
        timestep_r=_fraction_timestep,
    ),
    "AnimaTextConditioner": dict(
        source_hidden_states=_anima_source, target_input_ids=_anima_target_ids
    ),
    "AutoencoderKLMochi": dict(x=_pixels("5d", 3)),
    "VQModel": dict(h=_latents_4d),
    "AutoencoderKLKVAEAudio": dict(
        audio_data=_audio("num_channels", "vae-encoder"),
        z=_audio("codebook_dim", "vae-decoder"),
    ),
    "AutoencoderRAE": dict(z=_rae_latents),
    "MMAudioVAE": dict(audio=_waveform, z=_audio("latent_channels", "vae-decoder")),
    "AutoencoderKLMiniMaxH3Audio": dict(sample=_mono),
    "LongCatAudioDiTVae": dict(sample_posterior=_constant(False)),
    "AutoencoderKLLTX2Video": dict(x=_pixels("5d", "in_channels", 2)),
    "AutoencoderKLQwenImage21": dict(
        x=_one_frame("in_channels", "vae-encoder"), z=_one_frame("z_dim", "vae-decoder")
    ),
    "AutoencoderKLTemporalDecoder": dict(z=_frames_as_batch, num_frames=_num_frames),
    "AnyFlowTransformer3DModel": dict(timestep=_frame_timesteps, r_timestep=_frame_timesteps),
    "AnyFlowFARTransformer3DModel": dict(
        timestep=_frame_timesteps, r_timestep=_frame_timesteps, chunk_partition=_chunk_partition
    ),
    # Flux 2 positions have 4 axes (time, height, width, layer)
    "Flux2Transformer2DModel": dict(img_ids=_position_ids(4), txt_ids=_position_ids(4, True)),
    # the patch embedding adds a sinusoidal embedding of max_text_seq_length text
    # positions then the patches: the text has that length
    "CogVideoXTransformer3DModel": dict(
        encoder_hidden_states=_static_text("text_embed_dim", "max_text_seq_length")
    ),
    "ConsisIDTransformer3DModel": dict(
        encoder_hidden_states=_static_text("text_embed_dim", "max_text_seq_length")
    ),
    # both texts are replaced by a learned padding of text_len + text_len_t5 tokens
    # where their mask is 0, and the T5 text is pooled with text_len_t5 positions
    "HunyuanDiT2DModel": dict(
        encoder_hidden_states=_static_text("cross_attention_dim", "text_len"),
        text_embedding_mask=_static_mask("text_len"),
        encoder_hidden_states_t5=_static_text("cross_attention_dim_t5", "text_len_t5"),
        text_embedding_mask_t5=_static_mask("text_len_t5"),
    ),
    "DiTTransformer2DModel": dict(class_labels=_class_labels("num_embeds_ada_norm")),
    "I2VGenXLUNet": dict(
        fps=_batch(),
        image_latents=_video_like_sample,
        image_embeddings=_from_config("cross_attention_dim"),
    ),
    # its time embedding multiplies the timestep (a fraction) by 1000
    "Flux3Transformer2DModel": dict(
        timestep=_fraction_timestep, img_ids=_position_ids(4), txt_ids=_position_ids(4, True)
    ),
    "ErnieImageTransformer2DModel": dict(text_lens=_text_lens),
    "HunyuanDiT2DControlNetModel": dict(
        encoder_hidden_states=_static_text("cross_attention_dim", "text_len"),
        text_embedding_mask=_static_mask("text_len"),
        encoder_hidden_states_t5=_static_text("cross_attention_dim_t5", "text_len_t5"),
        text_embedding_mask_t5=_static_mask("text_len_t5"),
    ),
    "Kandinsky6Transformer3DModel": dict(
        hidden_states=_channels_last_video("in_visual_dim", double=True)
    ),
    "Kandinsky6SRTransformer3DModel": dict(
        hidden_states=_channels_last_video("in_visual_dim", double=True)
    ),
    "Cosmos3AVAEAudioTokenizer": dict(sample=_stereo_audio),
    "BriaFiboTransformer2DModel": dict(text_encoder_layers=_text_layers),
    # no mask: the text lengths of a mask go through .tolist() (gist token counts)
    "BriaFibo2Transformer2DModel": dict(
        timestep=_fraction_timestep,
        encoder_hidden_states=_text_bundles,
        encoder_attention_mask=_none,
    ),
    "Kandinsky5Transformer3DModel": dict(
        hidden_states=_channels_last_video("in_visual_dim"),
        visual_rope_pos=_visual_rope_pos,
        text_rope_pos=_text_rope_pos,
    ),
    "GlmImageTransformer2DModel": dict(prior_token_id=_prior_tokens, prior_token_drop=_prior_drop),
    "Ideogram4Transformer2DModel": dict(
        hidden_states=_packed_sequence("in_channels"),
        timestep=_fraction_timestep,
        encoder_hidden_states=_packed_sequence("llm_features_dim"),
        position_ids=_packed_positions,
        segment_ids=_packed_segments,
        indicator=_packed_indicator,
    ),
    "HiDreamImageTransformer2DModel": dict(
        timesteps=_schedule_timestep,
        encoder_hidden_states_t5=_text_of(0),
        encoder_hidden_states_llama3=_llama_layers,
        pooled_embeds=_from_config("text_emb_dim"),
    ),
    "ControlNetUnionModel": dict(
        controlnet_cond=_union_conditions,
        control_type=_union_control_type,
        control_type_idx=_union_control_index,
    ),
    # the forward packs the three histories (it fails without them) and the SigLIP
    # features of the image
    "HunyuanVideoFramepackTransformer3DModel": dict(
        image_embeds=_from_config("image_proj_dim", 4),
        indices_latents=_framepack_indices(None),
        latents_clean=_framepack_latents("clean"),
        indices_latents_clean=_framepack_indices("clean"),
        latents_history_2x=_framepack_latents("2x"),
        indices_latents_history_2x=_framepack_indices("2x"),
        latents_history_4x=_framepack_latents("4x"),
        indices_latents_history_4x=_framepack_indices("4x"),
    ),
    # timestep_r is the second time of a mean-flow model (use_meanflow)
    "HunyuanImageTransformer2DModel": dict(timestep_r=_none),
    # image_embeds: SigLIP features of the first frame (all zeros for text-to-video)
    "HunyuanVideo15Transformer3DModel": dict(
        timestep_r=_none,
        encoder_hidden_states_2=_second_text("text_embed_2_dim"),
        encoder_attention_mask_2=_second_mask,
        image_embeds=_from_config("image_embed_dim", 4),
    ),
    # AnimateDiff: the prompt repeated for each frame
    "UNetMotionModel": dict(encoder_hidden_states=_per_frame_text),
    "MMAudioVocoder": dict(mel=_audio_latents("num_mels")),
    "MiniMaxMusic3ConditionEncoder": dict(hidden_states=_minimax_condition),
    "WanAnimateTransformer3DModel": dict(
        pose_hidden_states=_wan_animate_pose, face_pixel_values=_wan_animate_faces
    ),
    # text to image: the prompt's ids, no input image
    "OmniGenTransformer2DModel": dict(
        input_ids=_omnigen_ids,
        input_img_latents=_empty_list,
        input_image_sizes=_no_kwargs,
        attention_mask=_omnigen_mask,
        position_ids=_omnigen_positions,
    ),
    "QwenImage21Transformer2DModel": dict(
        img_shapes=_qwen21_img_shapes, img_mask=_qwen21_img_mask, timestep=_fraction_timestep
    ),
    "MiniMaxMusic3RVQDepthDecoder": dict(inputs_embeds=_depth_steps),
    # conditions aligned on the latent frames; timestep: a flow-matching time in [0, 1]
    "MiniMaxMusic3Transformer1DModel": dict(
        hidden_states=_audio_latents("in_channels"),
        encoder_hidden_states=_audio_sequence("condition_dim"),
        timestep=_fraction_timestep,
    ),
    "NucleusMoEImageTransformer2DModel": dict(
        img_shapes=_qwen_img_shapes, timestep=_fraction_timestep
    ),
    # timestep: a flow-matching time in [0, 1]
    "Krea2Transformer2DModel": dict(
        encoder_hidden_states=_krea2_text,
        position_ids=_krea2_positions,
        timestep=_fraction_timestep,
    ),
    # the time embedding multiplies the timestep by time_factor (1000)
    "PRXTransformer2DModel": dict(timestep=_fraction_timestep),
    # the latents of the audio and of the audio it continues, (batch, length, latent_dim)
    "LongCatAudioDiTTransformer": dict(
        hidden_states=_audio_sequence("latent_dim"),
        latent_cond=_audio_sequence("latent_dim"),
        timestep=_fraction_timestep,  # its sinusoidal embedding scales it by 1000
    ),
    # its blocks unpack cross_attention_kwargs (None fails)
    "LuminaNextDiT2DModel": dict(image_rotary_emb=_lumina_rope, cross_attention_kwargs=_no_kwargs),
    # the time projection scales the timestep by 1000: a fraction of the schedule
    "QwenImageTransformer2DModel": dict(img_shapes=_qwen_img_shapes, timestep=_fraction_timestep),
    "QwenImageControlNetModel": dict(img_shapes=_qwen_img_shapes, timestep=_fraction_timestep),
    # the control video (masked video latents and mask) of VACE, 96 channels
    "WanVACETransformer3DModel": dict(control_hidden_states=_video_channels("vace_in_channels")),
    # SparseCtrl (simplified embedding): latent conditions and their mask per frame
    "SparseControlNetModel": dict(
        encoder_hidden_states=_per_frame_text,
        controlnet_cond=_video_channels("conditioning_channels"),
        conditioning_mask=_video_channels(1),
    ),
    # the UNet of Stable Diffusion: 4 latent channels (its configuration has no in_channels)
    "UNetControlNetXSModel": dict(sample=_latents(4)),
    "StableAudio3DiTModel": dict(hidden_states=_audio_latents("io_channels")),
    "LTXVideoTransformer3DModel": dict(hidden_states=_video_tokens, video_coords=_video_coords),
    # the mask of the text is not repeated for the frames its spatial blocks batch
    "LatteTransformer3DModel": dict(encoder_attention_mask=_none),
    # the motion module: no text (self-attention twice), no timestep (layer norms)
    "TransformerTemporalModel": dict(
        hidden_states=_features_frames_as_batch,
        num_frames=_num_frames,
        encoder_hidden_states=_none,
        timestep=_none,
    ),
}
#: sizes of the image as conditions (CogView): ``(batch, 2)``
SIZE_CONDITIONS = ("original_size", "target_size", "crop_coords")


def _scaled(kind: str, sizes: dict) -> tuple[int, int]:
    """Height and width of the main tensor: pixels for an encoder (x2: an attention
    over every pixel of a VAE without downsampling stays small), latents divided by 4
    for a decoder, latents otherwise."""
    h, w = sizes["height"], sizes["width"]
    if kind == "vae-encoder":
        return 2 * h, 2 * w
    if kind == "vae-decoder":
        return h // 4, w // 4
    return h, w


def main_tensor(layout: str, channels: int, kind: str, sizes: dict, gen):
    """The main tensor of ``layout`` and its dynamic axes."""
    b, f = sizes["batch"], sizes["frames"]
    h, w = _scaled(kind, sizes)
    if layout == "4d":
        return torch.randn(b, channels, h, w, generator=gen), {0: "batch", 2: "height", 3: "width"}
    if layout == "5d":
        return torch.randn(b, channels, f, h, w, generator=gen), {
            0: "batch",
            2: "frames",
            3: "height",
            4: "width",
        }
    if layout == "5d-fc":
        return torch.randn(b, f, channels, h, w, generator=gen), {
            0: "batch",
            1: "frames",
            3: "height",
            4: "width",
        }
    if layout == "packed":
        return torch.randn(b, h * w // 4, channels, generator=gen), {0: "batch", 1: "tokens"}
    if layout == "3d":
        return torch.randn(b, channels, 4 * h, generator=gen), {0: "batch", 2: "length"}
    raise ValueError(f"unknown layout {layout!r}, expected one of {LAYOUTS}")


def config_value(config, keys, default=None):
    """The first integer of ``config`` among ``keys``."""
    for key in keys:
        value = config.get(key) if hasattr(config, "get") else getattr(config, key, None)
        if isinstance(value, int) and not isinstance(value, bool):
            return value
    return default


def channel_candidates(config, kind: str) -> list[int]:
    """Channels of the main tensor to try, most likely first."""
    keys = (
        (
            "latent_channels",
            "z_channels",
            "z_dim",
            "latent_dim",
            "in_channels",
            "decoder_input_channels",
        )
        if kind == "vae-decoder"
        else (
            "in_channels",
            "in_visual_dim",
            "input_channels",
            "audio_channels",
            "num_channels",
            "latent_channels",
            "encoder_in_channels",
        )
    )
    out = []
    for key in keys:
        value = config_value(config, (key,))
        if value and value not in out:
            out.append(value)
    return out or [3]


def method_parameters(fn) -> dict[str, inspect.Parameter]:
    return {
        k: p
        for k, p in inspect.signature(fn).parameters.items()
        if k != "self" and p.kind not in (p.VAR_KEYWORD, p.VAR_POSITIONAL)
    }


def scaled_timestep(model, method: str = "forward") -> bool:
    """Whether ``model.<method>`` multiplies its timestep by 1000 (it takes fractions
    of the schedule, ``_SCALED_TIMESTEP``)."""
    try:
        source = inspect.getsource(getattr(type(model), method))
    except (OSError, TypeError, AttributeError):
        return False
    return bool(_SCALED_TIMESTEP.search(source))


def make_inputs(
    model, method: str, layout: str, channels: int, sizes: dict, kind: str, seed: int = 0
) -> tuple[dict, dict, dict]:
    """Tensors, dynamic shapes and constant keyword arguments for ``model.<method>``."""
    gen = torch.Generator().manual_seed(seed)
    config = model.config
    params = method_parameters(getattr(model, method))
    b, s = sizes["batch"], sizes["seq"]
    text_dim = config_value(config, TEXT_DIMS, 32)
    inputs: dict[str, torch.Tensor] = {}
    ds: dict[str, dict] = {}
    fixed: dict[str, Any] = {}
    main = next((n for n in params if n in MAIN), None)
    extra = INPUT_OVERRIDES.get(type(model).__name__, {})
    for name, p in params.items():
        required = p.default is inspect.Parameter.empty
        if name in extra:
            value = extra[name](config, sizes, gen)
            if isinstance(value, tuple):
                inputs[name], ds[name] = value
            else:
                fixed[name] = value
        elif name == main:
            inputs[name], ds[name] = main_tensor(layout, channels, kind, sizes, gen)
        elif name in TIMESTEPS:
            fraction = name in ("t", "timestep_ratio") or scaled_timestep(model, method)
            inputs[name] = torch.rand(b, generator=gen) * (0.9 if fraction else 900) + 0.05
            ds[name] = {0: "batch"}
        elif name in TEXTS:
            inputs[name] = torch.randn(b, s, text_dim, generator=gen)
            ds[name] = {0: "batch", 1: "seq"}
        elif name in MASKS and (required or "encoder_hidden_states" in inputs):
            inputs[name] = torch.ones(b, s, dtype=torch.bool)
            ds[name] = {0: "batch", 1: "seq"}
        elif name in POOLED:
            inputs[name] = torch.randn(b, config_value(config, POOLED_DIMS, 32), generator=gen)
            ds[name] = {0: "batch"}
        elif name == "img_ids" and layout == "packed":
            h, w = _scaled(kind, sizes)
            inputs[name] = torch.zeros(h * w // 4, 3)
            ds[name] = {0: "tokens"}
        elif name == "txt_ids":
            inputs[name] = torch.zeros(s, 3)
            ds[name] = {0: "seq"}
        elif name == "guidance" and config.get("guidance_embeds", False):
            inputs[name] = torch.full((b,), 3.5)
            ds[name] = {0: "batch"}
        elif name == "controlnet_cond":
            if main == "sample":  # pixels of the conditioning image, 8 times the latents
                h, w = _scaled(kind, sizes)
                inputs[name] = torch.randn(
                    b,
                    config_value(config, ("conditioning_channels",), 3),
                    8 * h,
                    8 * w,
                    generator=gen,
                )
                ds[name] = {0: "batch", 2: "cheight", 3: "cwidth"}
            else:
                inputs[name], ds[name] = main_tensor(layout, channels, kind, sizes, gen)
        elif name in SIZE_CONDITIONS:
            inputs[name] = torch.full((b, 2), 128.0 if name != "crop_coords" else 0.0)
            ds[name] = {0: "batch"}
        elif name == "conditioning_scale":
            fixed[name] = 1.0
        elif name == "return_dict":
            fixed[name] = False
        elif required:
            raise DiffusersCaseError(
                f"{type(model).__name__}.{method} needs {name!r}, an input the builder "
                f"does not make; add it to INPUT_OVERRIDES"
            )
    if main is None and not inputs:
        raise DiffusersCaseError(f"{type(model).__name__}.{method} has no main input among {MAIN}")
    return inputs, ds, fixed
