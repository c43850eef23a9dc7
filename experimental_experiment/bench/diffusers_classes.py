"""Every model class diffusers exports (public names of ``diffusers.models`` that
subclass ``ModelMixin``), with its kind (``transformer-2d``, ``unet``, ``vae-encoder``,
``controlnet``...). A variational auto-encoder gives two cases, its encoder and its
decoder. Containers of other models (``MultiControlNetModel``...) are listed with the
reason they are skipped.

.. code-block:: python

    from experimental_experiment.bench.diffusers_classes import list_diffusers_cases

    cases = list_diffusers_cases()   # [ZooCase('AutoencoderKL.encode', 'vae-encoder'), ...]
"""

from __future__ import annotations

import inspect
import re

from ..errors import ExportError

#: classes not exported on their own, or whose forward takes inputs the zoo's wrapper
#: (named tensors) cannot make, with the reason (status ``skip``)
SKIPPED: dict[str, str] = {
    "MultiAdapter": "container of T2IAdapter models (covered by T2IAdapter)",
    "ControlNetXSAdapter": "no forward of its own, runs inside UNetControlNetXSModel",
    "MotionAdapter": "no forward of its own, runs inside UNetMotionModel",
    "AutoencoderKLAllegro": (
        "encode and decode exist only tiled (without tiling they raise "
        "NotImplementedError): the tiles are cut by Python loops over fixed tile sizes"
    ),
    "RFD4ProteinaAutoencoder": (
        "protein-structure autoencoder: needs residue tables (atom37_mask, "
        "allowed_residue_types) and a dict of preprocessed features (conditioning: "
        "is_in_context_conditioning...), not images or latents; its encoder samples the latent"
    ),
    "CosmosControlNetModel": (
        "needs torchvision (its forward resizes the padding mask with "
        "transforms.functional.resize whatever the configuration), not installed here"
    ),
    "Cosmos3OmniTransformer": (
        "takes a packed multimodal sequence described by Python ints and lists "
        "(und_len, sequence_length, vision_token_shapes, per-sample token lists): "
        "every size is a constant of the call, nothing a pipeline varies stays dynamic"
    ),
    "JoyImageEditPlusTransformer3DModel": (
        "shape_list, a Python list of (frames, height, width) per sample, drives a loop "
        "over the batch and the rope of each image: batch and latent sizes are constants "
        "of the call, only the text length could stay dynamic"
    ),
    "ZImageTransformer2DModel": (
        "forward takes Python lists of one tensor per image (x, cap_feats), each padded "
        "to a multiple of 32 tokens with Python lengths: no batched tensor input the "
        "zoo's wrapper can make dynamic"
    ),
    "ZImageControlNetModel": (
        "forward takes Python lists of one tensor per image (x, cap_feats, "
        "control_context), as ZImageTransformer2DModel"
    ),
    "WanAnimate2Transformer3DModel": (
        "forward takes Python lists of one tensor per sample (hidden_states, "
        "encoder_hidden_states, condition_latents) and a required KV cache object"
    ),
    "T5FilmDecoder": (
        "forward takes encodings_and_masks, a Python list of (encoding, mask) pairs, one "
        "per encoder of the spectrogram diffusion pipeline: a nested input the zoo's "
        "wrapper (named tensors) does not make"
    ),
}

_FRAME_LOOP = (
    "frames static: the method loops in Python over the frames (a chunk at a time, "
    "carrying a cache of convolution features from one chunk to the next); the capture "
    "unrolls that loop for the example's frame count, so the ONNX model takes that count"
)
_ONE_FRAME = (
    "frames static (1): an image VAE in the 5-D layout of Wan's video VAE whose "
    "convolutions fold the single frame away (more frames raise ValueError)"
)
#: cases exported with a static frame count (checked on the export's frame count and
#: other batch, height and width), with the reason written in the CSV's cause column
STATIC_FRAMES: dict[str, str] = {
    "AutoencoderKLWan.encode": _FRAME_LOOP,
    "AutoencoderKLWan.decode": _FRAME_LOOP,
    "AutoencoderKLCogVideoX.decode": _FRAME_LOOP,
    "AutoencoderKLQwenImage21.encode": _ONE_FRAME,
    "AutoencoderKLQwenImage21.decode": _ONE_FRAME,
    "AutoencoderKLTemporalDecoder.decode": (
        "frames static: decode takes num_frames, a Python int splitting the first axis "
        "(batch * frames) of the latents, which fixes the frame count"
    ),
    "AnyFlowFARTransformer3DModel": (
        "frames static: forward takes chunk_partition, a Python list of the frames of "
        "each chunk summing to the frames, which fixes the frame count"
    ),
    "LatteTransformer3DModel": (
        "frames static: the temporal position embedding is a buffer of video_length "
        "frames added to the frames, which must be that many"
    ),
    "TransformerTemporalModel": (
        "frames static: forward takes num_frames, a Python int, to split its input "
        "(batch * frames, C, H, W) into the frames its attention runs along"
    ),
}
#: cases exported and checked with a batch of 1 (batch static), with the reason written
#: in the CSV's cause column
STATIC_BATCH: dict[str, str] = {
    f"AutoencoderKLHunyuanVideo15.{m}": (
        "batch static (1): the attention of its mid-block gives a (batch, L, L) mask to "
        "scaled_dot_product_attention with a (batch, 1, L, C) query, which broadcasts "
        "to (batch, batch, L, L) and fails in eager for a batch above 1"
    )
    for m in ("encode", "decode")
}
#: cases whose latents must be square (checked on a square of the check's height),
#: with the reason (the zoo writes it through FAIL_CAUSES when the case fails)
SQUARE: dict[str, str] = {
    "DiTTransformer2DModel": (
        "square latents only: the unpatchify takes height = width = "
        "int(tokens ** 0.5), a square root torch.export cannot keep symbolic"
    ),
}
_SINCOS_3D = (
    "the patch embedding rebuilds its 3D sinusoidal position embedding for the latent "
    "size inside the forward (get_3d_sincos_pos_embed written into a new tensor through "
    ".data), a constant torch.export cannot trace as a function of the dynamic sizes; "
    "the text is also static (max_text_seq_length tokens before the patches)"
)
_QWEN_SHAPES = (
    "height and width static: forward takes img_shapes, Python (frames, height, width) "
    "of the latents, from which the rotary embedding is computed (cached per size); "
    "the ONNX model takes the export's image size, any batch and text length"
)
#: cases exported with a static latent height and width (checked on the export's size
#: and another batch and text length), with the reason
STATIC_SIZE: dict[str, str] = {
    "QwenImageTransformer2DModel": _QWEN_SHAPES,
    "QwenImageControlNetModel": _QWEN_SHAPES,
    "NucleusMoEImageTransformer2DModel": _QWEN_SHAPES,
    "QwenImage21Transformer2DModel": _QWEN_SHAPES,
    "AutoencoderRAE.decode": (
        "latent height and width static: the ViT decoder has one position embedding per "
        "token of the encoder's fixed grid (encoder_input_size / encoder_patch_size)"
    ),
}
#: parameters a class creates with ``torch.empty`` and leaves to the checkpoint: the
#: tiny model gives them random values (uninitialized memory gives NaN at random)
UNINITIALIZED: dict[str, tuple[str, ...]] = {
    "NucleusMoEImageTransformer2DModel": ("gate_up_proj", "down_proj"),
}
#: known causes of a failing case, appended to the CSV's cause column
FAIL_CAUSES: dict[str, str] = {
    "DiTTransformer2DModel": SQUARE["DiTTransformer2DModel"],
    "CogVideoXTransformer3DModel": _SINCOS_3D,
    "ConsisIDTransformer3DModel": _SINCOS_3D,
    "BriaFibo2Transformer2DModel": (
        "the Perceiver's gist token count is computed in Python from the list of the "
        "batch's text lengths (compute_gist_count): batch and text length become "
        "constants of the capture"
    ),
    "CosmosTransformer3DModel": (
        "the learnable position embedding normalizes with np.sqrt(norm.numel() / "
        "emb.numel()), numpy on a size that depends on the dynamic dimensions"
    ),
    "EasyAnimateTransformer3DModel": (
        "get_3d_rotary_pos_embed builds the time grid with torch.linspace over the "
        "frame count read as a Python int, which fixes the frames"
    ),
    "HiDreamImageTransformer2DModel": (
        "the mixture of experts dispatches the tokens with "
        "bincount().cpu().numpy().cumsum(): a data-dependent count read back in numpy"
    ),
    "Lumina2Transformer2DModel": (
        "the rotary embedding reads the caption lengths with "
        "encoder_attention_mask.sum(dim=1).tolist() and pads to their Python max: the "
        "capture cannot hash the symbolic lengths"
    ),
    **{
        name: (
            "the rotary embedding slices its text table with int(max_txt_seq_len) "
            "(QwenEmbedRope.forward): torch.export fixes the text length of the example"
        )
        for name in ("QwenImageTransformer2DModel", "QwenImageControlNetModel")
    },
    "AnyFlowFARTransformer3DModel": (
        "the model pads its token sequence to a multiple of 128 with Python floats "
        "(math.ceil in _build_far_block_mask_from_far_cfg): torch.export fixes the padded "
        "length (256) and the flex_attention block mask, so latent height and width stay "
        "valid only for the sizes giving the same padded length; the export matches eager "
        "at those sizes"
    ),
}
#: cases exported and checked with other frame counts than ``EXPORT_SIZES`` and
#: ``CHECK_SIZES`` give: ``(export frames, check frames)``. Cosmos' encoder patches
#: 4 frames into 1 then halves the frames: 5 frames become one latent frame, a
#: dimension torch.export specializes to 1 (the ONNX model then fails to broadcast
#: on 9 frames); 9 frames keep 2 latent frames
MORE_FRAMES: dict[str, tuple[int, int]] = {
    "AutoencoderKLCosmos.encode": (9, 17),
    # Mochi's encoder divides the frames by 6: 5 frames would give 1 latent frame
    "AutoencoderKLMochi.encode": (13, 19),
    # LTX-2's encoder divides the frames by 8 (9 frames: 2 latent frames); its decoder
    # multiplies them by 8: 2 and 3 latent frames keep the check's 17 frames small
    "AutoencoderKLLTX2Video.encode": (9, 17),
    "AutoencoderKLLTX2Video.decode": (2, 3),
}


#: classes run first (the pipelines most used), the others follow in alphabetical order
PRIORITY = (
    "UNet2DConditionModel",
    "AutoencoderKL",
    "SD3Transformer2DModel",
    "FluxTransformer2DModel",
    "ControlNetModel",
    "WanTransformer3DModel",
    "AutoencoderKLWan",
    "AutoencoderTiny",
    "PixArtTransformer2DModel",
    "HunyuanVideoTransformer3DModel",
    "UNet2DModel",
    "SD3ControlNetModel",
    "FluxControlNetModel",
    "CogVideoXTransformer3DModel",
    "AutoencoderKLCogVideoX",
    "SanaTransformer2DModel",
    "UNet3DConditionModel",
    "T2IAdapter",
    "PriorTransformer",
    "DiTTransformer2DModel",
    "UNet1DModel",
    "VQModel",
    "ConsistencyDecoderVAE",
    "LTXVideoTransformer3DModel",
    "MochiTransformer3DModel",
    "QwenImageTransformer2DModel",
    "UNetSpatioTemporalConditionModel",
    "AutoencoderKLHunyuanVideo",
    "Transformer2DModel",
    "AuraFlowTransformer2DModel",
)


class DiffusersCaseError(ExportError):
    """A diffusers class the zoo cannot build with a tiny configuration or cannot run
    eagerly on the inputs it makes; the row of the class has the status ``skip``.

    Cause: the generic shrinking of the constructor's defaults broke a constraint of
    the class (head dimension, rope axes, channel multiples), or its forward needs an
    input the builder does not know how to make.

    Fix: add the constructor arguments to ``CONFIG_OVERRIDES``
    (``experimental_experiment.bench.diffusers_configs``) or the inputs to
    ``INPUT_OVERRIDES`` (``experimental_experiment.bench.diffusers_inputs``)."""


def diffusers_model_classes() -> dict[str, type]:
    """Public names of ``diffusers.models`` that subclass ``ModelMixin``, sorted."""
    import diffusers.models
    from diffusers.models.modeling_utils import ModelMixin

    out = {}
    for name in sorted(dir(diffusers.models)):
        if name.startswith("_"):
            continue
        try:
            cls = getattr(diffusers.models, name)
        except Exception:  # an optional dependency missing: not a class we can build
            continue
        if inspect.isclass(cls) and issubclass(cls, ModelMixin) and cls is not ModelMixin:
            out[name] = cls
    return out


def class_kind(name: str) -> str:
    """The kind of a diffusers class from its name (``vae`` gives two cases)."""
    if name.startswith("Multi") or re.match(r".*Multi(ControlNet|Adapter)", name):
        return "container"
    if re.search(r"Autoencoder|VQModel|VAE$|Vae$|^ConsistencyDecoderVAE", name):
        return "vae"
    if "ControlNet" in name:
        return "controlnet"
    if "Adapter" in name:
        return "adapter"
    if name.startswith("Prior"):
        return "prior"
    if "UNet" in name:
        return "unet"
    if re.search(r"3D|Video|Latte|Mochi|Wan|Allegro|Temporal", name):
        return "transformer-3d"
    if re.search(r"2D|DiT|Image|Transformer$|Flux|PixArt|Sana|Lumina", name):
        return "transformer-2d"
    return "other"


def list_diffusers_cases(names: list[str] | None = None):
    """One ``ZooCase`` per class
    (two for a VAE: ``Class.encode`` and ``Class.decode``), ``names`` restricting the
    classes or the cases (``AutoencoderKLWan.decode``); the model type of a case is the
    class name (``.encode``/``.decode``)."""
    from .zoo_heads import ZooCase

    cases = []
    classes = diffusers_model_classes()
    order = [n for n in PRIORITY if n in classes] + [n for n in classes if n not in PRIORITY]
    wanted = {n.partition(".")[0] for n in names or []}
    for name in order:
        if names and name not in wanted:
            continue
        kind = class_kind(name)
        if kind == "vae":
            cases.append(ZooCase(f"{name}.encode", "vae-encoder"))
            cases.append(ZooCase(f"{name}.decode", "vae-decoder"))
        else:
            cases.append(ZooCase(name, kind))
    if names:  # a case named with its method keeps only that method
        cases = [c for c in cases if c.model_type in names or c.model_type.split(".")[0] in names]
    return cases
