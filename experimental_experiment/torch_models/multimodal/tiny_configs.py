"""Repairs of the tiny configurations of image-text-to-text models the generic
shrinking of the zoo (``experimental_experiment.bench.zoo_configs.tiny_config``) breaks,
and the vision inputs of towers with their own pixel layout. Every repair reads the
configuration's own fields: ``DICT_REPAIRS`` fix the shrunk dictionary before the
configuration class validates it (3D rotary sections, per-stage lists, the vision
layers an adapter reads), ``REPAIRS`` the configuration (a vision configuration the
default leaves out, a VQ-VAE codebook and its vocabulary map, projector sizes the
shrinking leaves at their original values...); ``INPUT_BUILDERS`` give the image of a
tower taking patches with positions, flattened patches, patches as images, blocks of
pixels per token, pooled crops.

.. code-block:: python

    config = tiny_multimodal_config("gemma4")    # used by cases.build_model
    inputs, constants = vision_inputs(model, params, generator)  # or None
"""

from __future__ import annotations

from typing import Any

import torch

from .errors import MultimodalPartsError


def _fill_missing_vision_config(config) -> None:
    """A vision configuration the default configuration leaves out (``None``, an
    optional sub-configuration: Gemma 4 builds no vision tower then) becomes the
    default one of its class, shrunk like the others."""
    from ...bench.zoo_configs import shrink_config_dict

    classes = getattr(type(config), "sub_configs", {}) or {}
    cls = classes.get("vision_config")
    if cls is None or getattr(config, "vision_config", 0) is not None:
        return
    d = shrink_config_dict(cls().to_dict())
    config.vision_config = cls.from_dict(d)


def _position_grid_inputs(model, params: set, gen) -> tuple[dict, dict] | None:
    """A vision tower taking flattened patches with their (x, y) positions
    (``image_position_ids``, Gemma 4) and pooling ``k x k`` patches into one token: a
    grid of ``2k x 2k`` patches, ``(1, patches, channels * patch * patch)``; patches of
    ``model_patch_size`` when the configuration has one (Gemma 4 unified: one token per
    patch, merged by the image processor), a grid of ``2 x 2``."""
    if "image_position_ids" not in params:
        return None
    vc = model.config.vision_config
    patch = vc.patch_size
    kernel = getattr(vc, "pooling_kernel_size", 1) or 1
    if isinstance(getattr(vc, "model_patch_size", None), int):
        # Gemma 4 unified: the patches are merged by the image processor, not pooled
        patch, kernel = vc.model_patch_size, 1
    side = 2 * kernel
    ys, xs = torch.meshgrid(torch.arange(side), torch.arange(side), indexing="ij")
    positions = torch.stack([xs.reshape(-1), ys.reshape(-1)], dim=-1).unsqueeze(0)
    pixels = torch.rand(1, side * side, 3 * patch * patch, generator=gen)
    return {"pixel_values": pixels}, {"image_position_ids": positions.to(torch.int64)}


def _linear_patch_inputs(model, params: set, gen) -> tuple[dict, dict] | None:
    """A vision embedding which is a linear layer on flattened patches (Fuyu: no
    vision tower, ``vision_embed_tokens`` takes ``channels * patch * patch`` values per
    patch): the image of the configuration cut into patches,
    ``(1, patches, channels * patch * patch)``."""
    config = model.config
    patch = getattr(config, "patch_size", None)
    channels = getattr(config, "num_channels", 3)
    size = getattr(config, "image_size", None)
    if not isinstance(patch, int) or not isinstance(size, int):
        return None
    inner = getattr(model, "model", model)
    width = channels * patch * patch
    if not any(isinstance(m, torch.nn.Linear) and m.in_features == width for m in inner.children()):
        return None
    n = (size // patch) ** 2
    return {"pixel_values": torch.randn(1, n, width, generator=gen)}, {}


def _vq_inputs(model, params: set, gen) -> tuple[dict, dict] | None:
    """An image tokenizer (``vqmodel``, a VQ-VAE downsampling ``2 ** (levels - 1)``
    times): an image of twice that many pixels per side (2 x 2 codes), its size as
    ``image_sizes`` when ``get_image_features`` takes it."""
    vq = getattr(getattr(model, "model", model), "vqmodel", None)
    if vq is None:
        return None
    levels = len(vq.config.channel_multiplier)
    size = 2 * 2 ** (levels - 1)
    channels = getattr(vq.config, "in_channels", 3)
    pixels = torch.randn(1, channels, size, size, generator=gen)
    constants = {}
    if "image_sizes" in params:
        constants["image_sizes"] = torch.tensor([[size, size]], dtype=torch.int64)
    return {"pixel_values": pixels}, constants


def _raw_patch_conv(inner, patch) -> torch.nn.Conv2d | None:
    """The 2D convolution of kernel ``patch`` a module applies to the input of its
    forward as it comes (``self.proj(pixel_values)``, the input never reshaped before),
    None if there is none."""
    import inspect
    import re

    if not isinstance(patch, int):
        return None
    for parent in inner.modules():
        for name, conv in parent.named_children():
            if not isinstance(conv, torch.nn.Conv2d) or tuple(conv.kernel_size) != (patch, patch):
                continue
            try:
                source = inspect.getsource(type(parent).forward)
                first = list(inspect.signature(type(parent).forward).parameters)[1]
            except (OSError, TypeError, IndexError):
                continue
            if re.search(rf"self\.{name}\(\s*{first}\b", source) and not re.search(
                rf"\b{first}\s*=[^=]", source
            ):
                return conv
    return None


def _conv_patch_grid_inputs(model, params: set, gen) -> tuple[dict, dict] | None:
    """A vision tower taking a grid of patches (``image_grid_thw``) embedded by a 2D
    convolution of the patch size (Kimi K2.5): every patch is an image
    ``(patches, channels, patch, patch)``, not a flattened row; a grid of
    ``2 merge x 2 merge`` patches (``merge_kernel_size`` or ``spatial_merge_size``)."""
    if "image_grid_thw" not in params:
        return None
    vc = model.config.vision_config
    patch = getattr(vc, "patch_size", None)
    conv = _raw_patch_conv(getattr(model, "model", model), patch)
    if conv is None or not isinstance(patch, int):
        return None
    kernel = getattr(vc, "merge_kernel_size", None)
    merge = kernel[0] if isinstance(kernel, (list, tuple)) else getattr(vc, "spatial_merge_size", 2)
    side = 2 * merge
    pixels = torch.randn(side * side, conv.in_channels, patch, patch, generator=gen)
    grid = torch.tensor([[1, side, side]], dtype=torch.int64)
    return {"pixel_values": pixels}, {"image_grid_thw": grid}


def _runs(model, inputs: dict, constants: dict) -> bool:
    from .parts import VisionEncoder

    try:
        with torch.no_grad():
            VisionEncoder(model, **constants)(*inputs.values())
    except Exception:
        return False
    return True


def _token_block_grid_inputs(model, params: set, gen) -> tuple[dict, dict] | None:
    """A vision tower taking a grid (``image_grid_thw``) counted in language model
    tokens, one block of ``merge x merge`` patches of pixels per token, channels last
    (Inkling 2: ``(tokens, patch * merge, patch * merge, channels)``), where the layout
    of the Qwen-VL family (a grid of patches, one flattened row per patch) fails: a
    grid of ``2 x 2`` tokens. The tower is probed with both layouts; None when the
    Qwen-VL one runs or this one does not."""
    if "image_grid_thw" not in params:
        return None
    vc = model.config.vision_config
    patch, merge = getattr(vc, "patch_size", None), getattr(vc, "spatial_merge_size", None)
    channels = getattr(vc, "num_channels", None) or getattr(vc, "in_channels", 3)
    if not isinstance(patch, int) or not isinstance(merge, int):
        return None
    temporal = getattr(vc, "temporal_patch_size", 1) or 1
    side = 2 * merge
    qwen = torch.randn(side * side, channels * temporal * patch * patch)
    if _runs(model, {"pixel_values": qwen}, {"image_grid_thw": torch.tensor([[1, side, side]])}):
        return None
    block = patch * merge
    pixels = torch.rand(4, block, block, channels, generator=gen) * 2 - 1
    constants = {"image_grid_thw": torch.tensor([[1, 2, 2]], dtype=torch.int64)}
    if not _runs(model, {"pixel_values": pixels}, constants):
        return None
    return {"pixel_values": pixels}, constants


def _pooled_crop_inputs(model, params: set, gen) -> tuple[dict, dict] | None:
    """A vision tower pooling the patches of crops with indices from the image
    processor (``image_token_pooling``, ``image_grids``: Molmo 2): one crop of
    ``num_position_embeddings`` patches (a square), ``(1, patches, patch * patch *
    channels)``, every token pooling a block of ``2 x 2`` patches, the grid of tokens
    as the low resolution grid of ``image_grids`` (no high resolution one)."""
    if not {"image_token_pooling", "image_grids"} <= params:
        return None
    vc = model.config.vision_config
    side = int(round(vc.num_position_embeddings**0.5))
    if side * side != vc.num_position_embeddings or side % 2:
        return None
    width = vc.patch_size * vc.patch_size * vc.num_channels
    pixels = torch.randn(1, side * side, width, generator=gen)
    index = torch.arange(side * side).reshape(side // 2, 2, side // 2, 2)
    pooling = index.permute(0, 2, 1, 3).reshape(-1, 4)
    grids = torch.tensor([[side // 2, side // 2, 0, 0]], dtype=torch.int64)
    return {"pixel_values": pixels}, {"image_token_pooling": pooling, "image_grids": grids}


def _nested_vision_inputs(model, params: set, gen) -> tuple[dict, dict] | None:
    """A vision configuration nested in a sub-configuration (an encoder-decoder,
    T5Gemma 2: ``config.encoder.vision_config``) gives the image size, an image
    ``(1, channels, size, size)``."""
    config = model.config
    if getattr(config, "vision_config", None) is not None or params - {"pixel_values", "kwargs"}:
        return None
    vc = next(
        (
            getattr(sub, "vision_config", None)
            for name in getattr(type(config), "sub_configs", {})
            if (sub := getattr(config, name, None)) is not None
            and getattr(sub, "vision_config", None) is not None
        ),
        None,
    )
    size = getattr(vc, "image_size", None)
    if not isinstance(size, int):
        return None
    channels = getattr(vc, "num_channels", 3)
    return {"pixel_values": torch.randn(1, channels, size, size, generator=gen)}, {}


#: builders of the vision inputs of towers with their own pixel layout, first found wins
INPUT_BUILDERS = [
    _position_grid_inputs,
    _linear_patch_inputs,
    _vq_inputs,
    _conv_patch_grid_inputs,
    _token_block_grid_inputs,
    _pooled_crop_inputs,
    _nested_vision_inputs,
]


def vision_inputs(model, params: set, gen) -> tuple[dict, dict] | None:
    """The vision inputs ``(inputs, constants)`` of a tower with its own pixel layout
    (flattened patches with positions...), None for the layouts ``make_vision_inputs``
    knows.

    :param model: the image-text-to-text model
    :param params: the parameter names of its ``get_image_features``
    :param gen: the random generator
    :return: the inputs and constants or None
    """
    for builder in INPUT_BUILDERS:
        found = builder(model, params, gen)
        if found is not None:
            return found
    return None


def _no_per_layer_inputs(config) -> None:
    """No per-layer token embeddings (``hidden_size_per_layer_input``, the PLE of the
    small Gemma 4 models; the large ones have none): they are looked up from the token
    ids, and a decoder given ``inputs_embeds`` only recovers the ids by matching every
    row with the embedding table, which fails at the image tokens (their rows are image
    features). The decoder part takes embeddings, so the tiny model is the variant
    without them."""
    text = config.get_text_config(decoder=True)
    if getattr(text, "hidden_size_per_layer_input", None):
        text.hidden_size_per_layer_input = 0


def _fix_pixel_shuffle(config) -> None:
    """A vision adapter shuffling pixels (``pixel_shuffle_ratio``, Llama 4): its input
    is the shrunk hidden size divided by the square of the ratio (``intermediate_size``
    in the default configuration), the projector dimensions (left at 4096 by the
    shrinking) become the hidden size."""
    vc: Any = getattr(config, "vision_config", None)
    ratio = getattr(vc, "pixel_shuffle_ratio", None)
    if not isinstance(ratio, float) or not isinstance(
        getattr(vc, "projector_input_dim", None), int
    ):
        return
    vc.intermediate_size = int(vc.hidden_size / ratio**2)
    for name in ("projector_input_dim", "projector_output_dim", "vision_output_dim"):
        setattr(vc, name, vc.hidden_size)


#: codebook entries of a tiny VQ-VAE image tokenizer
CODEBOOK = 32


_LETTERS = {str(i): chr(ord("A") + i) for i in range(10)}

#: the name of codebook entry ``code`` in the tokenizer vocabulary, per VQ-VAE type
_CODE_NAMES = {
    # IMGIMG, the digits as letters A-J, Z
    "chameleon_vqgan": lambda code: "IMGIMG" + "".join(_LETTERS[c] for c in str(code)) + "Z",
    "emu3_vqgan": lambda code: f"<|visual token{code:06d}|>",
}


def _vq_vocabulary(config) -> None:
    """An image tokenizer (a VQ-VAE, ``vq_config``: Chameleon, Emu3) maps its codebook
    entries to token ids of the text vocabulary with ``vocabulary_map`` (the tokenizer's
    vocabulary, None by default): a codebook of ``CODEBOOK`` entries (the zoo's
    shrinking leaves 8192 or 32768) whose ids are the last ones of the vocabulary, the
    image placeholder (and Emu3's end-of-line token) just below them; the VQ-VAE gets
    32 base channels (its group normalizations have 32 groups)."""
    vq = getattr(config, "vq_config", None)
    if (
        vq is None
        or getattr(config, "vocabulary_map", 0) is not None
        or vq.model_type not in _CODE_NAMES
    ):
        return
    for name in ("num_embeddings", "codebook_size"):
        if isinstance(getattr(vq, name, None), int):
            setattr(vq, name, CODEBOOK)
    vq.base_channels = 32
    if isinstance(getattr(vq, "hidden_size", None), int):  # attention at the last level
        vq.hidden_size = 32 * vq.channel_multiplier[-1]
    if getattr(vq, "latent_channels", 0) > 32:
        vq.latent_channels = 32
    vocab = config.get_text_config(decoder=True).vocab_size
    first = vocab - CODEBOOK
    mapping = {"<image>": first - 1, "<|extra_200|>": first - 2}
    for code in range(CODEBOOK):
        mapping[_CODE_NAMES[vq.model_type](code)] = first + code
    config.vocabulary_map = mapping
    config.image_token_id = mapping["<image>"]


#: names of the grid parameters ``make_vision_inputs`` reads -> other names for them
_GRID_ALIASES = {
    "temporal_patch_size": "patch_temporal",
    "spatial_merge_size": "merge_size",
}


def _grid_aliases(config) -> None:
    """A vision configuration naming the temporal patch size ``patch_temporal`` and the
    merge size ``merge_size`` (Muse Spark, Muse Glimmer) also gets them under the names
    of the Qwen-VL family (``temporal_patch_size``, ``spatial_merge_size``), which
    ``make_vision_inputs`` reads to cut the image into patches."""
    vc: Any = getattr(config, "vision_config", None)
    if vc is None:
        return
    for name, other in _GRID_ALIASES.items():
        value = getattr(vc, other, None)
        if getattr(vc, name, None) is None and isinstance(value, int):
            setattr(vc, name, value)


def _fix_merged_projector(config) -> None:
    """A projector reading the merged patches (``out_hidden_size``: vision hidden size
    times the square of ``merge_size``, Muse Spark) of the shrunk vision tower, its
    hidden size (``projector_hidden_size``, left at 4096) the text hidden size."""
    vc: Any = getattr(config, "vision_config", None)
    merge = getattr(vc, "merge_size", None)
    if not isinstance(merge, int) or not isinstance(getattr(config, "out_hidden_size", None), int):
        return
    config.out_hidden_size = vc.hidden_size * merge * merge
    if isinstance(getattr(config, "projector_hidden_size", None), int):
        config.projector_hidden_size = config.get_text_config(decoder=True).hidden_size


def _rope_per_layer_type(config) -> None:
    """Rotary parameters per layer type (``rope_parameters[layer_type]``, Cohere
    Compass) the default configuration leaves empty: the default rotary embedding of
    the configuration's base (``default_theta``) for every layer type."""
    text = config.get_text_config(decoder=True)
    rope, types = getattr(text, "rope_parameters", None), getattr(text, "layer_types", None)
    if not isinstance(rope, dict) or not isinstance(types, list) or rope:
        return
    theta = getattr(text, "default_theta", None) or 10000.0
    text.rope_parameters = {t: {"rope_type": "default", "rope_theta": theta} for t in types}


def _modeling_source(config) -> str:
    """The source of the modeling module next to the module of ``config``'s class."""
    import importlib
    import inspect

    name = type(config).__module__.replace(".configuration_", ".modeling_")
    try:
        return inspect.getsource(importlib.import_module(name))
    except (ImportError, OSError, TypeError):
        return ""


def _sliding_window_without_sliding_layers(config) -> None:
    """A decoder building the mask of sliding layers whatever its layer types (the
    modeling module of Step 3.7 maps ``"sliding_attention"`` to
    ``create_sliding_window_causal_mask`` in every case) needs a ``sliding_window``
    even when no layer slides (``layer_types`` all full attention):
    ``max_position_embeddings``, which changes nothing."""
    text = config.get_text_config(decoder=True)
    types = getattr(text, "layer_types", None)
    if (
        not isinstance(types, list)
        or "sliding_window" not in type(text).__dataclass_fields__
        or text.sliding_window is not None
        or any("sliding" in t for t in types)
        or '"sliding_attention": create_sliding_window_causal_mask(' not in _modeling_source(text)
    ):
        return
    text.sliding_window = text.max_position_embeddings


def _experts_left_unset(config) -> None:
    """A mixture of experts whose default configuration leaves the routing unset
    (DeepSeek-OCR-2: ``num_experts_per_tok`` and ``mlp_layer_types`` None, its layers
    index the list): 2 experts per token and, as the documented example, a dense first
    layer then sparse ones."""
    text = config.get_text_config(decoder=True)
    experts = getattr(text, "n_routed_experts", None) or getattr(text, "num_local_experts", None)
    if not isinstance(experts, int):
        return
    fields = type(text).__dataclass_fields__
    if "num_experts_per_tok" in fields and text.num_experts_per_tok is None:
        text.num_experts_per_tok = min(2, experts)
    if "mlp_layer_types" in fields and text.mlp_layer_types is None:
        n = text.num_hidden_layers
        text.mlp_layer_types = ["dense"] + ["sparse"] * (n - 1)


def _fix_neck_channels(config) -> None:
    """A vision tower chaining two encoders (DeepSeek-OCR-2: a SAM encoder whose neck
    downsamples to ``downsample_channels``, then an encoder reading them): the last
    channels of the neck are the hidden size of the second encoder (896 in the
    default, which the shrinking leaves), the others scaled alike."""
    vc: Any = getattr(config, "vision_config", None)
    sam: Any = getattr(vc, "sam_config", None)
    encoder: Any = getattr(vc, "encoder_config", None)
    channels = getattr(sam, "downsample_channels", None)
    if not isinstance(channels, list) or not isinstance(getattr(encoder, "hidden_size", None), int):
        return
    hidden = encoder.hidden_size
    sam.downsample_channels = [max(1, c * hidden // channels[-1]) for c in channels]


def _image_token_in_vocabulary(config) -> None:
    """An image token id outside the shrunk text vocabulary (Molmo 2's
    ``image_patch_id``: the zoo's shrinking moves the ids named ``*_token_id`` only)
    becomes the largest id of the vocabulary no other token id uses."""
    token = getattr(config, "image_token_id", None)
    vocab = config.get_text_config(decoder=True).vocab_size
    if not isinstance(token, int) or token < vocab:
        return
    used = {v for k, v in config.to_dict().items() if k.endswith("_id") and isinstance(v, int)}
    config.image_token_id = next(i for i in range(vocab - 1, 0, -1) if i not in used)


#: the repairs, in order
REPAIRS = [
    _fill_missing_vision_config,
    _no_per_layer_inputs,
    _fix_pixel_shuffle,
    _vq_vocabulary,
    _grid_aliases,
    _fix_merged_projector,
    _rope_per_layer_type,
    _sliding_window_without_sliding_layers,
    _experts_left_unset,
    _fix_neck_channels,
    _image_token_in_vocabulary,
]


def _scale_sections(section: list[int], total: int) -> list[int]:
    new = [max(1, v * total // sum(section)) for v in section]
    new[0] += total - sum(new)
    return new


def _dict_mrope_sections(d: dict, before: dict) -> None:
    """The sections of a 3D rotary embedding (``rope_parameters.mrope_section``) add up
    to half the shrunk head dimension (Cosmos 3 validates it), nested configurations
    included."""
    for v in d.values():
        if isinstance(v, dict) and "model_type" in v:
            _dict_mrope_sections(v, {})
    rope: Any = d.get("rope_parameters")
    section = rope.get("mrope_section") if isinstance(rope, dict) else None
    if not isinstance(section, list):
        return
    head_dim = d.get("head_dim") or d["hidden_size"] // d["num_attention_heads"]
    if sum(section) != head_dim // 2:
        rope["mrope_section"] = _scale_sections(section, head_dim // 2)


#: per-stage lists validated against the number of stages (``num_hidden_layers``)
_STAGE_LISTS = ("patch_sizes", "hidden_sizes", "depths")


def _dict_stage_lists(d: dict, before: dict) -> None:
    """Per-stage lists (``patch_sizes``, ``hidden_sizes``, ``depths``: Muse Spark's
    audio pyramid) keep the first ``num_hidden_layers`` stages when the shrinking cut
    the stages but not the lists, nested configurations included."""
    for v in d.values():
        if isinstance(v, dict) and "model_type" in v:
            _dict_stage_lists(v, {})
    n = d.get("num_hidden_layers")
    lists = [k for k in _STAGE_LISTS if isinstance(d.get(k), list)]
    if not isinstance(n, int) or len(lists) != len(_STAGE_LISTS):
        return
    if all(len(d[k]) == len(d[lists[0]]) > n for k in lists):
        for k in lists:
            d[k] = d[k][:n]


def _dict_feature_layers(d: dict, before: dict) -> None:
    """The vision layers an adapter reads (``vision_feature_layer`` of a nested
    configuration, Molmo 2: ``[24, 18]``) index the shrunk vision tower: each layer at
    the same distance from the last one, as a negative index, clamped to the first one,
    and distinct."""
    vision, old = d.get("vision_config"), before.get("vision_config")
    if not isinstance(vision, dict) or not isinstance(old, dict):
        return
    n, n_before = vision.get("num_hidden_layers"), old.get("num_hidden_layers")
    if not isinstance(n, int) or not isinstance(n_before, int):
        return
    # nested only: a top-level list (VipLLaVA) indexes the hidden states, one more
    for sub in (v for v in d.values() if isinstance(v, dict)):
        layers = sub.get("vision_feature_layer")
        if not isinstance(layers, list) or all(-n <= i < n for i in layers):
            continue
        new: list[int] = []
        for i in layers:
            j = max(-n, (i - n_before) if i >= 0 else i)
            while j in new and j < -1:
                j += 1
            while j in new and j > -n:
                j -= 1
            new.append(j)
        sub["vision_feature_layer"] = new


def _dict_positions_of_image(d: dict, before: dict) -> None:
    """A vision tower with one learned position per patch of its image
    (``num_position_embeddings`` equal to ``(image_size / patch_size) ** 2`` in the
    default, Molmo 2: 729) keeps one per patch of the shrunk image."""
    vision, old = d.get("vision_config"), before.get("vision_config")
    if not isinstance(vision, dict) or not isinstance(old, dict):
        return

    def patches(c):
        size, patch = c.get("image_size"), c.get("patch_size")
        size = size[0] if isinstance(size, list) else size
        return (size // patch) ** 2 if isinstance(size, int) and isinstance(patch, int) else None

    n = old.get("num_position_embeddings")
    if isinstance(n, int) and n == patches(old) and patches(vision):
        vision["num_position_embeddings"] = patches(vision)


def _dict_text_hidden_size(d: dict, before: dict) -> None:
    """A nested configuration (Molmo 2's adapter) holding the text hidden size
    (``text_hidden_size``) gets the shrunk one."""
    text = d.get("text_config")
    if not isinstance(text, dict):
        return
    for sub in d.values():
        if isinstance(sub, dict) and isinstance(sub.get("text_hidden_size"), int):
            sub["text_hidden_size"] = text["hidden_size"]


#: the repairs of the configuration dictionary, before the configuration validates it
DICT_REPAIRS = [
    _dict_mrope_sections,
    _dict_stage_lists,
    _dict_feature_layers,
    _dict_positions_of_image,
    _dict_text_hidden_size,
]


def check_generation_path(cls) -> None:
    """Raises ``MultimodalPartsError`` when the model class ``cls`` does not generate
    text token by token with transformers' ``GenerationMixin`` (greedy decoding with a
    cache, what the parts reproduce): PI0 predicts robot actions (``sample_actions``),
    DiffusionGemma denoises blocks of tokens with its own ``generate``.

    :param cls: the model class
    """
    from transformers import GenerationMixin

    if issubclass(cls, GenerationMixin):
        return
    owner = next((k for k in cls.__mro__ if "generate" in k.__dict__), None)
    if owner is not None:
        how = (
            f"it generates with {owner.__name__}.generate (not transformers' "
            f"GenerationMixin: no greedy decoding one token at a time with a cache)"
        )
    else:
        others = sorted(n for n in dir(cls) if n.startswith(("sample", "predict")))
        how = f"it generates no text (it has {', '.join(others) or 'no generation method'})"
    raise MultimodalPartsError(f"{cls.__name__} is not a GenerationMixin: {how}")


def check_decoder_only(model) -> None:
    """Raises ``MultimodalPartsError`` when ``model`` is an encoder-decoder (T5Gemma 2):
    the image and the prompt go through its encoder, its decoder attends to the encoder
    states; the decoder part takes ``inputs_embeds`` holding the image.

    :param model: the image-text-to-text model
    """
    if getattr(model.config, "is_encoder_decoder", False):
        raise MultimodalPartsError(
            f"{type(model).__name__} is an encoder-decoder: the image and the prompt go "
            f"through its encoder and its decoder attends to the encoder states (an encoder "
            f"part and a decoder part with cross-attention, as speech.py does for Whisper); "
            f"the decoder part here is a decoder-only language model fed with inputs_embeds"
        )


def tiny_multimodal_config(model_type: str):
    """The tiny configuration of ``model_type``: the zoo's (``tiny_config``: the
    default shrunk, then the overrides), its dictionary repaired by ``DICT_REPAIRS``
    before the configuration class validates it, the configuration then repaired by
    ``repair_tiny_config``.

    :param model_type: an image-text-to-text model type
    :return: the configuration
    """
    from transformers import AutoConfig

    from ...bench.zoo_configs import OVERRIDES, _deep_update, shrink_config_dict

    default = AutoConfig.for_model(model_type)
    before = default.to_dict()
    d = shrink_config_dict(default.to_dict())
    _deep_update(d, OVERRIDES.get(model_type, {}))
    for repair in DICT_REPAIRS:
        repair(d, before)
    return repair_tiny_config(type(default).from_dict(d))


def repair_tiny_config(config) -> Any:
    """The configuration ``config`` (the shrunk default of an image-text-to-text model
    type) repaired so that its tiny model builds and runs on one image (in place).

    :param config: the tiny configuration
    :return: the same configuration
    """
    for repair in REPAIRS:
        repair(config)
    return config


__all__ = [
    "check_decoder_only",
    "check_generation_path",
    "repair_tiny_config",
    "tiny_multimodal_config",
    "vision_inputs",
]
