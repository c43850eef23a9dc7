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


def _per_frame_text(config, sizes, gen):
    """Text embeddings repeated for each frame, ``(batch * frames, seq, dim)``: the
    pipeline of AnimateDiff gives every frame the prompt (UNetMotionModel runs its
    spatial blocks on the frames as a batch)."""
    dim = config["cross_attention_dim"]
    shape = (sizes["batch"] * sizes["frames"], sizes["seq"], dim)
    return torch.randn(*shape, generator=gen), {0: "batch_frames", 1: "seq"}


def _frames_as_batch(config, sizes, gen):
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


def _latents(channels: int):
    """Image latents of ``channels`` channels, ``(batch, channels, height, width)``,
    for a class whose configuration does not give them."""

    def make(config, sizes, gen):
        return main_tensor("4d", channels, "unet", sizes, gen)

    return make


def _video_channels(key: str | int):
    """A video of ``config[key]`` channels (or ``key`` channels),
    ``(batch, C, frames, height, width)``."""

    def make(config, sizes, gen):
        channels = key if isinstance(key, int) else config[key]
        return main_tensor("5d", channels, "unet", sizes, gen)

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


def _num_frames(config, sizes, gen):
    """The frame count, a Python int."""
    return sizes["frames"]


def _none(config, sizes, gen):
    """An optional input left out (None)."""
    return None


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
    "I2VGenXLUNet": dict(fps=_batch(), image_latents=_video_like_sample),
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
    "AnyFlowTransformer3DModel": dict(timestep=_frame_timesteps, r_timestep=_frame_timesteps),
    "AnyFlowFARTransformer3DModel": dict(
        timestep=_frame_timesteps, r_timestep=_frame_timesteps, chunk_partition=_chunk_partition
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
        hidden_states=_frames_as_batch,
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
        ("latent_channels", "z_channels", "z_dim", "latent_dim", "in_channels")
        if kind == "vae-decoder"
        else (
            "in_channels",
            "in_visual_dim",
            "input_channels",
            "audio_channels",
            "num_channels",
            "latent_channels",
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
