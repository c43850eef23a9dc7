"""The multimodal model types and how to build a tiny one with its inputs: an image
(the pixel values and the constants of its vision tower) and a prompt holding the image
tokens.

.. code-block:: python

    case = build_multimodal("llava", image_size=None, prompt=(3, 4))
    case.model, case.vision_inputs, case.input_ids
"""

from __future__ import annotations

import inspect
from dataclasses import dataclass, field
from typing import Any

import torch

from .errors import MultimodalPartsError
from .families import (
    image_features_function,
    image_token_id,
    prepare_cross_attention_config,
    prepare_qformer_config,
    qformer_constants,
    require_image_input,
    video_frames,
)
from .image_inputs import family_vision_inputs, fix_image_config, image_frame_tokens
from .parts import VisionEncoder
from .tiny_configs import check_generation_path, tiny_multimodal_config, vision_inputs


def list_types() -> list[str]:
    """The image-text-to-text model types transformers lists
    (``MODEL_FOR_IMAGE_TEXT_TO_TEXT_MAPPING_NAMES``), sorted."""
    from transformers.models.auto import modeling_auto

    return sorted(modeling_auto.MODEL_FOR_IMAGE_TEXT_TO_TEXT_MAPPING_NAMES)


@dataclass
class MultimodalCase:
    """A tiny image-text-to-text model with an image and a prompt.

    :param model_type: transformers model type
    :param model: the model (eval mode, perturbed weights)
    :param vision_inputs: ``pixel_values`` then the other inputs of the vision part
    :param constants: inputs of ``get_image_features`` kept constant in the graph
    :param input_ids: the prompt ``(1, length)`` with the image tokens
    :param generate_kwargs: what ``generate`` needs beyond ``input_ids`` and pixels
    :param mrope: positions are 3D (temporal, height, width: Qwen-VL family)
    """

    model_type: str
    model: Any
    vision_inputs: dict
    constants: dict
    input_ids: torch.Tensor
    generate_kwargs: dict = field(default_factory=dict)
    mrope: bool = False


def _model_class(model_type: str):
    import transformers
    from transformers.models.auto import modeling_auto

    names = modeling_auto.MODEL_FOR_IMAGE_TEXT_TO_TEXT_MAPPING_NAMES
    if model_type not in names:
        raise MultimodalPartsError(
            f"model type {model_type!r} is not an image-text-to-text model of transformers"
        )
    return getattr(transformers, names[model_type])


def build_model(model_type: str, seed: int = 0):
    """The tiny model of ``model_type`` (the zoo's tiny configuration), random weights
    drawn after ``torch.manual_seed(seed)``, normalization weights perturbed so that
    greedy decoding meets no near-tie."""
    from ..causal_lm import perturb_norm_weights

    cls = _model_class(model_type)
    require_image_input(cls)  # Evolla, Mistral4: listed, but read no image
    check_generation_path(cls)  # pi0, DiffusionGemma: no token-by-token text
    config = tiny_multimodal_config(model_type)
    prepare_qformer_config(config)
    prepare_cross_attention_config(config)
    _fix_mrope_section(config.get_text_config(decoder=True))
    _shrink_vision_depth(config)
    _deepstack_within_tower(config)
    _fix_projection(config)
    fix_image_config(config, cls)
    torch.manual_seed(seed)
    try:
        model = cls._from_config(config, attn_implementation="sdpa")
    except ValueError:
        model = cls._from_config(config, attn_implementation="eager")
    _fix_rotary_sections(model)
    return sharpen_logits(perturb_norm_weights(model.eval(), seed=seed + 1))


def _fix_projection(config) -> None:
    """The output dimension of the vision projector equal to the text hidden size (the
    shrinking of the zoo leaves ``out_hidden_size`` or ``projection_dim`` at their
    original values)."""
    vc = getattr(config, "vision_config", None)
    hidden = config.get_text_config(decoder=True).hidden_size
    for name in ("out_hidden_size", "projection_dim"):
        if vc is not None and isinstance(getattr(vc, name, None), int):
            setattr(vc, name, hidden)


def _fix_rotary_sections(model) -> None:
    """The sections of every 3D rotary embedding of ``model`` (``mrope_section``) add up
    to its number of frequencies (partial rotary factors included)."""
    for module in model.modules():
        section = getattr(module, "mrope_section", None)
        inv_freq = getattr(module, "inv_freq", None)
        if not isinstance(section, list) or not isinstance(inv_freq, torch.Tensor):
            continue
        half = inv_freq.shape[-1]
        if sum(section) != half:
            new = [max(1, s * half // sum(section)) for s in section]
            new[0] += half - sum(new)
            module.mrope_section = new


def _shrink_vision_depth(config) -> None:
    """Two blocks in a vision tower counting them with ``depth`` (the zoo's shrinking
    misses it: 32 blocks in Qwen2.5-VL), one of them with full attention when the tower
    mixes windowed and full attention."""
    vc = getattr(config, "vision_config", None)
    if vc is None or not isinstance(getattr(vc, "depth", None), int) or vc.depth <= 2:
        return
    vc.depth = 2
    if isinstance(getattr(vc, "fullatt_block_indexes", None), list):
        vc.fullatt_block_indexes = [1]


def _deepstack_within_tower(config) -> None:
    """The vision layers whose features are added to the first decoder layers
    (``deepstack_visual_indexes``, Qwen3-VL: 8, 16 and 24 of 27 blocks) within the shrunk
    tower, spread over it: left past its last layer, the tiny model adds none, where
    the real one does, and a check of the parts would miss what they must carry."""
    vc = getattr(config, "vision_config", None)
    indexes = getattr(vc, "deepstack_visual_indexes", None)
    n = getattr(vc, "depth", None) or getattr(vc, "num_hidden_layers", None)
    if not indexes or not isinstance(n, int) or all(0 <= i < n for i in indexes):
        return
    k = min(len(indexes), n)
    vc.deepstack_visual_indexes = [round(j * (n - 1) / max(k - 1, 1)) for j in range(k)]


def _fix_mrope_section(text) -> None:
    """The sections of the 3D rotary embedding (temporal, height, width) of the shrunk
    head dimension: the default ones add up to the half of the original head dimension."""
    rope = getattr(text, "rope_parameters", None)
    if (
        not isinstance(rope, dict)
        or "mrope" not in text.model_type + rope.get("rope_type", "")
        and "mrope_section" not in rope
        and "vl" not in text.model_type
    ):
        return
    # the rotary embedding of the Qwen-VL family defaults to [16, 24, 24]
    section = rope.get("mrope_section", [16, 24, 24])
    head_dim = getattr(text, "head_dim", None) or text.hidden_size // text.num_attention_heads
    half = head_dim // 2
    if sum(section) != half:
        new = [max(1, s * half // sum(section)) for s in section]
        new[0] += half - sum(new)
        rope["mrope_section"] = new


def sharpen_logits(model, factor: float = 100.0):
    """Multiplies the weights of the output projection by ``factor`` (untied from the
    input embeddings first): random tiny models give flat logits whose two best tokens
    differ by 1e-5, a gap float rounding flips; here it becomes about 1."""
    head = model.get_output_embeddings()
    if head is not None:
        with torch.no_grad():
            head.weight = torch.nn.Parameter(head.weight.detach().clone() * factor)
    return model


def _vision_config(config):
    return getattr(config, "vision_config", None) or config


def make_vision_inputs(
    model, image_size: tuple[int, int] | None = None, seed: int = 0
) -> tuple[dict, dict]:
    """Random pixels for one image, ``(vision_inputs, constants)``.

    A vision tower taking a grid of patches (``image_grid_thw``, Qwen-VL) gets an image
    of ``image_size`` pixels (height, width; a multiple of the patch size times the
    merge size), the grid is a constant; other towers take the size of their
    configuration (``image_size`` ignored).
    """
    gen = torch.Generator().manual_seed(seed)
    params = set(inspect.signature(image_features_function(model)).parameters)
    special = vision_inputs(model, params, gen)
    if special is not None:
        return special
    vc = _vision_config(model.config)
    channels = getattr(vc, "in_channels", None) or getattr(vc, "num_channels", 3)
    patch = getattr(vc, "patch_size", 14)
    found = family_vision_inputs(model, params, image_size, gen, channels)
    if found is not None:
        return found
    if "image_grid_thw" in params:
        merge = getattr(vc, "spatial_merge_size", 2)
        temporal = getattr(vc, "temporal_patch_size", 1)
        height, width = image_size or (2 * patch * merge, 2 * patch * merge)
        gh, gw = height // patch, width // patch
        if gh % merge or gw % merge:
            raise MultimodalPartsError(
                f"image size {image_size} is not a multiple of patch size {patch} x "
                f"merge size {merge}"
            )
        pixels = torch.randn(gh * gw, channels * temporal * patch * patch, generator=gen)
        grid = torch.tensor([[1, gh, gw]], dtype=torch.int64)
        return {"pixel_values": pixels}, {"image_grid_thw": grid}
    size = getattr(vc, "image_size", 224)
    size = size if isinstance(size, int) else size[0]
    pixels = video_frames(
        image_features_function(model), torch.randn(1, channels, size, size, generator=gen)
    )
    inputs: dict[str, Any] = {"pixel_values": pixels}
    constants: dict[str, Any] = {}
    if "pixel_attention_mask" in params:  # idefics3, smolvlm: (batch, images, c, h, w)
        inputs["pixel_values"] = pixels.unsqueeze(0)
        constants["pixel_attention_mask"] = torch.ones((1, 1, size, size), dtype=torch.bool)
    if "image_sizes" in params and (  # only where required: llava splits on it
        inspect.signature(image_features_function(model)).parameters["image_sizes"].default
        is inspect.Parameter.empty
    ):
        constants["image_sizes"] = torch.tensor([[size, size]], dtype=torch.int64)
    constants.update(qformer_constants(image_features_function(model), model, seed=seed))
    return inputs, constants


def _text_ids(vocab: int, n: int, avoid: set[int], gen) -> list[int]:
    ids = torch.randint(1, max(vocab - 64, 2), (n,), generator=gen).tolist()
    return [i if i not in avoid else 1 for i in ids]


def build_multimodal(
    model_type: str,
    image_size: tuple[int, int] | None = None,
    prompt: tuple[int, int] = (3, 4),
    seed: int = 0,
    model=None,
) -> MultimodalCase:
    """A tiny model of ``model_type``, one random image, a prompt of ``prompt[0]`` text
    tokens, the image tokens (as many as the vision part returns features) and
    ``prompt[1]`` text tokens.

    :param model_type: an image-text-to-text model type (``list_types``)
    :param image_size: (height, width) for vision towers taking any size
    :param prompt: text tokens before and after the image
    :param seed: seed of the weights, the pixels and the tokens
    :param model: the model if already built (``build_model``): parts exported
        for one image size are valid for another one (the decoder, the merge)
    :return: a ``MultimodalCase``
    """
    model = build_model(model_type, seed=seed) if model is None else model
    vision_inputs, constants = make_vision_inputs(model, image_size, seed=seed)
    with torch.no_grad():
        features = VisionEncoder(model, **constants).features(*vision_inputs.values())
    token = image_token_id(model)
    vocab = model.config.get_text_config(decoder=True).vocab_size
    gen = torch.Generator().manual_seed(seed + 2)
    avoid = {token} | {
        v
        for k, v in model.config.to_dict().items()
        if k.endswith(("_token_id", "_token_index")) and isinstance(v, int)
    }
    before, after = image_frame_tokens(model)
    ids = (
        _text_ids(vocab, prompt[0], avoid, gen)
        + before
        + [token] * features.shape[0]
        + after
        + _text_ids(vocab, prompt[1], avoid, gen)
    )
    input_ids = torch.tensor([ids], dtype=torch.int64)
    mrope = hasattr(getattr(model, "model", model), "get_rope_index")
    generate_kwargs = dict(constants)
    if mrope and "mm_token_type_ids" in inspect.signature(model.forward).parameters:
        generate_kwargs["mm_token_type_ids"] = (input_ids == token).to(torch.int32)
    return MultimodalCase(
        model_type, model, vision_inputs, constants, input_ids, generate_kwargs, mrope
    )


__all__ = [
    "MultimodalCase",
    "build_model",
    "build_multimodal",
    "list_types",
    "make_vision_inputs",
    "sharpen_logits",
]
