"""The image inputs of the families whose ``get_image_features`` needs more than the
pixels of one image at the size of the vision tower: what each model's image
processor would give, derived from the tiny configuration, chosen by the parameters
of ``get_image_features`` (``family_vision_inputs``):

* ``image_sizes`` and ``image_grid_pinpoints`` (LLaVA-NeXT, LLaVA-OneVision): the base
  image and its tiles ``(1, tiles, c, h, w)``, the pinpoints scaled to the tiny tower;
* ``target_sizes`` (MiniCPM-V 4.6, 4.7, MiniCPM-OCR): the patches in one row;
* ``spatial_shapes`` and ``pixel_attention_mask`` (LFM2-VL): flattened patches;
* ``image_grid_thw`` with patches read as small images (PaddleOCR-VL);
* ``high_res_pixel_values`` (DeepSeek-VL-Hybrid): two resolutions;
* ``image_grid_hw`` (Nemotron-H-Omni), ``image_merge_sizes`` (VideoLLaMA3);
* a mask of tiles (Granite-Docling), a SAM tower before a CLIP encoder (Unlimited-OCR).

``fix_image_config`` repairs what the zoo's generic shrinking breaks in these
configurations (layer indices past the shrunk towers, channels, missing token ids),
``image_frame_tokens`` gives the tokens framing the image in the prompt, and
``graph_constants`` turns the size tensors into ``ConstantTensor`` so that the towers
computing sizes from them export.

.. code-block:: python

    config = tiny_config("llava_next")
    fix_image_config(config, cls)  # the pinpoints in tiles of the tiny tower
    inputs, constants = family_vision_inputs(model, params, None, gen, channels=3)
"""

from __future__ import annotations

import math

import torch

from .errors import MultimodalPartsError


def _scale_pinpoints(config) -> None:
    """``image_grid_pinpoints`` (the resolutions an image is tiled into) in multiples of
    the tiny vision tower's image size: the pinpoints are multiples of the original
    size (336 for LLaVA-NeXT, 384 for LLaVA-OneVision), which the zoo's shrinking
    leaves as they are, so an image of the tiny size would be tiled in hundreds of
    tiles."""
    points = getattr(config, "image_grid_pinpoints", None)
    vc = getattr(config, "vision_config", None)
    if not isinstance(points, list) or not points or vc is None:
        return
    size = vc.image_size if isinstance(vc.image_size, int) else vc.image_size[0]
    unit = math.gcd(*[int(v) for p in points for v in p])
    if unit == size:
        return
    config.image_grid_pinpoints = [[int(v) // unit * size for v in p] for p in points]


#: Qwen vocabulary: ``<|vision_start|>`` (``<|vision_bos|>`` of the Omni processors)
#: and ``<|vision_end|>``
QWEN_VISION_START, QWEN_VISION_END = 151652, 151653


def _rope_index_source(model_or_class) -> str:
    import inspect

    fct = getattr(model_or_class, "get_rope_index", None)
    if fct is None:
        return ""
    try:
        return inspect.getsource(fct)
    except (OSError, TypeError):
        return ""


def _fix_vision_start(config, cls) -> None:
    """The Qwen-Omni thinkers (Qwen2.5-Omni, Qwen3-Omni-MoE) find the images of the
    prompt by the token after ``config.vision_start_token_id`` in their
    ``get_rope_index``, an attribute only the full Omni configuration (or the talker's)
    defines: the thinker's configuration gets the Qwen vocabulary's ids."""
    if cls is None or "config.vision_start_token_id" not in _rope_index_source(cls):
        return
    vocab = config.get_text_config(decoder=True).vocab_size
    taken = _token_ids(config)
    for name, value in (
        ("vision_start_token_id", QWEN_VISION_START),
        ("vision_end_token_id", QWEN_VISION_END),
    ):
        if isinstance(getattr(config, name, None), int):
            continue
        if value >= vocab:  # a shrunk vocabulary: a free id at its end, as the zoo does
            value = vocab - 1
            while value in taken:
                value -= 1
        setattr(config, name, value)
        taken.add(value)


def _token_ids(config) -> set[int]:
    """The token ids of a configuration and of its sub-configurations."""
    ids: set[int] = set()

    def walk(d):
        for k, v in d.items():
            if isinstance(v, dict):
                walk(v)
            elif str(k).endswith(("_token_id", "_token_index")):
                for x in v if isinstance(v, list) else [v]:
                    if isinstance(x, int) and not isinstance(x, bool):
                        ids.add(x)

    walk(config.to_dict())
    return ids


def _refuse_layer_injection(config) -> None:
    """Granite-4-Vision gives no image embeddings: its image features are added to the
    hidden states of chosen decoder layers (``deepstack_layer_map``, the image tokens
    are zeros), which a decoder taking ``inputs_embeds`` and a cache cannot receive."""
    if "deepstack_layer_map" in config.to_dict():
        raise MultimodalPartsError(
            f"{type(config).__name__}: the image features are injected into decoder layers "
            f"(deepstack_layer_map), no image embeddings: the decoder part takes embeddings only"
        )


def fix_image_config(config, cls=None) -> None:
    """Configuration fixes of the families handled here (called by ``build_model``
    before the model is created).

    :param config: the tiny configuration
    :param cls: the model class
    """
    _refuse_layer_injection(config)
    _scale_pinpoints(config)
    _fix_vision_start(config, cls)
    _fix_image_token(config)
    _fix_insert_layer(config)
    _fix_global_attention_layers(config)
    _fix_feature_layers(config)
    _fix_sam_channels(config)
    _fix_paired_rope_sections(config, cls)


def _paired_rope_sections(cls) -> bool:
    """Whether a rotary embedding of the module of ``cls`` interleaves the height and
    width frequencies pairwise (``torch.stack([freq_h, freq_w])``, ERNIE-4.5-VL): both
    sections of its ``mrope_section`` must then be equal."""
    import inspect
    import sys

    module = sys.modules.get(getattr(cls, "__module__", ""), None)
    for obj in vars(module).values() if module is not None else []:
        fct = getattr(obj, "recomposition_frequencies", None) if inspect.isclass(obj) else None
        if fct is None:
            continue
        try:
            if "stack([freq_h, freq_w]" in inspect.getsource(fct):
                return True
        except (OSError, TypeError):
            continue
    return False


def _fix_paired_rope_sections(config, cls) -> None:
    """The sections (height, width, time) of a rotary embedding pairing the height and
    width frequencies (ERNIE-4.5-VL, 22, 22, 20 of 64) for the shrunk head dimension,
    height and width equal; the generic shrinking scales them unequally."""
    if cls is None or not _paired_rope_sections(cls):
        return
    text = config.get_text_config(decoder=True)
    rope = getattr(text, "rope_parameters", None)
    if not isinstance(rope, dict):
        return
    head_dim = getattr(text, "head_dim", None) or text.hidden_size // text.num_attention_heads
    half = head_dim // 2
    side = max(1, half * 22 // 64)
    rope["mrope_section"] = [side, side, half - 2 * side]


def _sam_config(config):
    """The configuration of the SAM tower nested in the vision configuration
    (Unlimited-OCR: SAM then a CLIP encoder), None if none."""
    return getattr(getattr(config, "vision_config", None), "sam_config", None)


def _fix_sam_channels(config) -> None:
    """The channels of the last convolution of a SAM tower feeding a CLIP encoder
    (Unlimited-OCR: ``downsample_channels`` 512, 1024 for an encoder of 1024) equal to
    the shrunk encoder's hidden size, the others scaled alike."""
    sam = _sam_config(config)
    encoder = getattr(getattr(config, "vision_config", None), "encoder_config", None)
    channels = getattr(sam, "downsample_channels", None)
    hidden = getattr(encoder, "hidden_size", None)
    if not isinstance(channels, list) or not channels or not isinstance(hidden, int):
        return
    if sam is not None and channels[-1] != hidden:
        sam.downsample_channels = [max(1, c * hidden // channels[-1]) for c in channels]


def _fix_feature_layers(config) -> None:
    """The vision layers whose hidden states a projector concatenates
    (``vision_feature_layer`` as a list, VipLLaVA: -2, -5, -8, -11 and 6 of 24) within
    the shrunk tower, as many of them (the projector's input size depends on it): an
    index past the tower becomes its first (negative) or last (positive) hidden
    states."""
    layers = getattr(config, "vision_feature_layer", None)
    n = getattr(getattr(config, "vision_config", None), "num_hidden_layers", None)
    if not isinstance(layers, list) or not isinstance(n, int):
        return
    config.vision_feature_layer = [max(i, -(n + 1)) if i < 0 else min(i, n) for i in layers]


def _fix_global_attention_layers(config) -> None:
    """The layers of global attention of a SAM tower (``global_attn_indexes``,
    DeepSeek-VL-Hybrid: 2, 5, 8, 11 of 12) within the shrunk tower, the last one at
    least: the model reads the hidden states after the first of them."""
    vision = getattr(config, "vision_config", None)
    for vc in (vision, getattr(config, "high_res_vision_config", None), _sam_config(config)):
        indexes = getattr(vc, "global_attn_indexes", None)
        n = getattr(vc, "num_hidden_layers", None)
        if vc is None or not isinstance(indexes, list) or not isinstance(n, int):
            continue
        if any(i >= n for i in indexes):
            vc.global_attn_indexes = [i for i in indexes if i < n - 1] + [n - 1]


def _free_token_id(config) -> int:
    """The largest id of the text vocabulary no token id of ``config`` takes."""
    taken = _token_ids(config)
    value = config.get_text_config(decoder=True).vocab_size - 1
    while value in taken:
        value -= 1
    return value


def _fix_image_token(config) -> None:
    """A free id of the vocabulary for an image token id left to None in the
    configuration (MiniCPM-V 4.6 and 4.7, MiniCPM-OCR: the processor reads it from its
    tokenizer), the model skips the image without it."""
    if "image_token_id" in config.to_dict() and config.image_token_id is None:
        config.image_token_id = _free_token_id(config)


def _fix_insert_layer(config) -> None:
    """The layer after which a vision tower merges its patches (``insert_layer_id``,
    MiniCPM-V 4.6) within the shrunk tower: the original one (6) is past its two
    blocks, the merge would never happen and the projector would get four times too
    many patches."""
    vc = getattr(config, "vision_config", None)
    layer = getattr(vc, "insert_layer_id", None)
    n = getattr(vc, "num_hidden_layers", None)
    if vc is not None and isinstance(layer, int) and isinstance(n, int) and layer >= n - 1:
        vc.insert_layer_id = max(n - 2, 0)
        if isinstance(getattr(config, "insert_layer_id", None), int):
            config.insert_layer_id = max(n - 2, 0)


def image_frame_tokens(model) -> tuple[list[int], list[int]]:
    """The tokens the processor puts before and after the image tokens when the model
    reads them: ``<|vision_start|>`` and ``<|vision_end|>`` for a ``get_rope_index``
    finding the images by the token after ``vision_start_token_id`` (Qwen-Omni
    thinkers), nothing for the others."""
    config = model.config
    start = getattr(config, "vision_start_token_id", None)
    if not isinstance(start, int) or "config.vision_start_token_id" not in _rope_index_source(
        model
    ):
        return [], []
    end = getattr(config, "vision_end_token_id", None)
    return [start], [end] if isinstance(end, int) else []


def _anyres_inputs(model, image_size, gen, channels: int) -> tuple[dict, dict]:
    """LLaVA-NeXT tiling of an image twice as wide as the tower: its base image (the
    whole image resized to the tower size) then the tiles of the best pinpoint."""
    from transformers.image_processing_utils import select_best_resolution

    config = model.config
    vc = config.vision_config
    size = vc.image_size if isinstance(vc.image_size, int) else vc.image_size[0]
    height, width = size, 2 * size
    best_h, best_w = select_best_resolution((height, width), config.image_grid_pinpoints)
    tiles = 1 + (best_h // size) * (best_w // size)
    pixels = torch.randn(1, tiles, channels, size, size, generator=gen)
    return {"pixel_values": pixels}, {
        "image_sizes": torch.tensor([[height, width]], dtype=torch.int64)
    }


def _navit_inputs(model, image_size, gen, channels: int) -> tuple[dict, dict]:
    """MiniCPM-V 4.6 and 4.7, MiniCPM-OCR: the patches of an image side by side in one
    row (``reshape_by_patch`` of the image processor: ``(1, channels, patch, patches x
    patch)``) and ``target_sizes``, the image size in patches, a multiple of the window
    of the merger in the tower times the merge kernel of the projector (twice that by
    default)."""
    config = model.config
    vc = config.vision_config
    patch = vc.patch_size
    window = getattr(vc, "window_kernel_size", None) or [1, 1]
    merge = getattr(config, "merge_kernel_size", None) or [1, 1]
    unit_h, unit_w = window[0] * merge[0] * patch, window[1] * merge[1] * patch
    height, width = image_size or (2 * unit_h, 2 * unit_w)
    if height % unit_h or width % unit_w:
        raise MultimodalPartsError(
            f"image size {(height, width)} is not a multiple of {(unit_h, unit_w)} (patch "
            f"size x window of the tower x merge kernel)"
        )
    gh, gw = height // patch, width // patch
    pixels = torch.randn(1, channels, patch, gh * gw * patch, generator=gen)
    return {"pixel_values": pixels}, {"target_sizes": torch.tensor([[gh, gw]], dtype=torch.int32)}


def _naflex_inputs(model, image_size, gen, channels: int) -> tuple[dict, dict]:
    """LFM2-VL (a SigLIP2 tower taking any size): the patches of the image flattened,
    ``(1, patches, channels x patch x patch)``, ``spatial_shapes`` (the image size in
    patches, a multiple of the ``downsample_factor`` of the projector, twice that
    by default) and ``pixel_attention_mask`` (every patch valid: one image, no
    padding)."""
    config = model.config
    vc = config.vision_config
    patch = vc.patch_size
    factor = getattr(config, "downsample_factor", 1) or 1
    unit = factor * patch
    height, width = image_size or (2 * unit, 2 * unit)
    if height % unit or width % unit:
        raise MultimodalPartsError(
            f"image size {(height, width)} is not a multiple of {unit} (patch size x "
            f"downsample factor)"
        )
    gh, gw = height // patch, width // patch
    pixels = torch.randn(1, gh * gw, channels * patch * patch, generator=gen)
    return {"pixel_values": pixels}, {
        "spatial_shapes": torch.tensor([[gh, gw]], dtype=torch.int64),
        "pixel_attention_mask": torch.ones((1, gh * gw), dtype=torch.int64),
    }


def _patches_as_images(model) -> bool:
    """Whether the embeddings of the vision tower read every patch as a small image
    ``(..., patches, channels, patch, patch)`` (PaddleOCR-VL: its image processor keeps
    the patches 4D) instead of the flattened rows of the Qwen-VL family."""
    import inspect
    import re

    from .families import vision_tower

    tower = vision_tower(model)
    embeddings = next(
        (
            m
            for m in (tower.modules() if tower is not None else [])
            if hasattr(m, "patch_embedding")
        ),
        None,
    )
    if embeddings is None:
        return False
    try:
        source = inspect.getsource(type(embeddings).forward)
    except (OSError, TypeError):
        return False
    # the first read of the shape unpacks five dimensions (HunYuan-VL reshapes flat rows first)
    first = re.search(r"([\w\s,]*)=\s*pixel_values\.shape", source)
    return first is not None and first.group(1).count(",") == 4


def _grid_patch_images(model, image_size, gen, channels: int) -> tuple[dict, dict]:
    """PaddleOCR-VL: a grid of patches (``image_grid_thw``) as the Qwen-VL family, every
    patch a ``(channels x temporal, patch, patch)`` image."""
    vc = model.config.vision_config
    patch = vc.patch_size
    merge = getattr(vc, "spatial_merge_size", 2)
    temporal = getattr(vc, "temporal_patch_size", 1) or 1
    height, width = image_size or (2 * patch * merge, 2 * patch * merge)
    gh, gw = height // patch, width // patch
    if gh % merge or gw % merge or height % patch or width % patch:
        raise MultimodalPartsError(
            f"image size {(height, width)} is not a multiple of patch size {patch} x "
            f"merge size {merge}"
        )
    pixels = torch.randn(gh * gw, channels * temporal, patch, patch, generator=gen)
    return {"pixel_values": pixels}, {
        "image_grid_thw": torch.tensor([[1, gh, gw]], dtype=torch.int64)
    }


def _size_of(vc, default: int = 224) -> int:
    size = getattr(vc, "image_size", default)
    return size if isinstance(size, int) else size[0]


def _hybrid_resolution_inputs(model, image_size, gen, channels: int) -> tuple[dict, dict]:
    """DeepSeek-VL-Hybrid: the image at the size of the low resolution tower
    (``pixel_values``) and at the size of the high resolution one
    (``high_res_pixel_values``), both inputs of the vision part."""
    config = model.config
    low, high = _size_of(config.vision_config), _size_of(config.high_res_vision_config)
    return {
        "pixel_values": torch.randn(1, channels, low, low, generator=gen),
        "high_res_pixel_values": torch.randn(1, channels, high, high, generator=gen),
    }, {}


def _grid_hw_inputs(model, image_size, gen, channels: int) -> tuple[dict, dict]:
    """Nemotron-H-Omni (a RADIO tower): the flattened patches of the image ``(patches,
    channels x patch x patch)`` and ``image_grid_hw``, its size in patches, a multiple of
    the pixel shuffle (``1 / downsample_ratio``), twice that by default."""
    config = model.config
    patch = config.vision_config.patch_size
    ratio = getattr(config, "downsample_ratio", None)
    factor = round(1 / ratio) if ratio else getattr(config.vision_config, "spatial_merge_size", 1)
    unit = factor * patch
    height, width = image_size or (2 * unit, 2 * unit)
    if height % unit or width % unit:
        raise MultimodalPartsError(
            f"image size {(height, width)} is not a multiple of {unit} (patch size x pixel shuffle)"
        )
    gh, gw = height // patch, width // patch
    pixels = torch.randn(gh * gw, channels * patch * patch, generator=gen)
    return {"pixel_values": pixels}, {"image_grid_hw": torch.tensor([[gh, gw]], dtype=torch.int64)}


def _merge_size_inputs(model, image_size, gen, channels: int) -> tuple[dict, dict]:
    """VideoLLaMA3: a grid of patches (``image_grid_thw``) as the Qwen-VL family and the
    merge size of every image (``image_merge_sizes``): 1, its image processor merges
    the patches of videos only."""
    vc = model.config.vision_config
    patch = vc.patch_size
    temporal = getattr(vc, "temporal_patch_size", 1) or 1
    height, width = image_size or (4 * patch, 4 * patch)
    if height % patch or width % patch:
        raise MultimodalPartsError(f"image size {(height, width)} is not a multiple of {patch}")
    gh, gw = height // patch, width // patch
    pixels = torch.randn(gh * gw, channels * temporal * patch * patch, generator=gen)
    return {"pixel_values": pixels}, {
        "image_grid_thw": torch.tensor([[1, gh, gw]], dtype=torch.int64),
        "image_merge_sizes": torch.tensor([1], dtype=torch.int64),
    }


class ConstantTensor(torch.Tensor):
    """A tensor whose value is known while the vision part is exported (the size of the
    image: ``image_grid_thw``, ``target_sizes``, ``image_grid_hw``): an operation whose
    tensor inputs are all constant tensors runs on the real values, outside the fake
    tensors of ``torch.export``, and returns a constant tensor; any other operation
    takes it as a plain tensor (a constant of the graph).

    The towers of these families compute sizes from these tensors (``grid.prod(-1)
    .tolist()``, ``for t, h, w in grid``, ``target_sizes // 2``): traced, every value
    is a data-dependent symbol torch.export cannot guard on (``GuardOnDataDependentSymNode``),
    computed on the real values they are python integers, the graph is specialized to
    the size of the example image, as with the precomputed inputs of the Qwen-VL
    towers."""

    @staticmethod
    def wrap(tensor: torch.Tensor) -> ConstantTensor:
        """``tensor`` as a constant tensor (no copy)."""
        return tensor.as_subclass(ConstantTensor)  # type: ignore[return-value]

    def _value(self):
        from torch.utils._python_dispatch import _disable_current_modes

        with torch._C.DisableTorchFunction(), _disable_current_modes():
            return self.as_subclass(torch.Tensor).item()

    def __index__(self):  # torch.arange(n) with a constant n: the number
        return int(self._value())

    def __int__(self):
        return int(self._value())

    def __float__(self):
        return float(self._value())

    @classmethod
    def __torch_function__(cls, func, types, args=(), kwargs=None):
        from torch.utils._python_dispatch import _disable_current_modes
        from torch.utils._pytree import tree_flatten, tree_map

        kwargs = kwargs or {}

        def plain(a):
            return a.as_subclass(torch.Tensor) if isinstance(a, ConstantTensor) else a

        def sizes(a):  # a list of sizes (interpolate's size=(h // m, w // m)): integers
            if isinstance(a, (list, tuple)):
                return type(a)(
                    int(x.as_subclass(torch.Tensor).item())
                    if isinstance(x, ConstantTensor)
                    and x.numel() == 1
                    and not x.dtype.is_floating_point
                    else x
                    for x in a
                )
            return a

        tensors = [a for a in tree_flatten((args, kwargs))[0] if isinstance(a, torch.Tensor)]
        with torch._C.DisableTorchFunctionSubclass():
            if not all(isinstance(t, ConstantTensor) for t in tensors):
                if (  # x[mask]: the indices of the true values, no data-dependent size
                    func is torch.Tensor.__getitem__
                    and isinstance(args[1], ConstantTensor)
                    and args[1].dtype == torch.bool
                ):
                    with _disable_current_modes():
                        index = args[1].as_subclass(torch.Tensor).nonzero(as_tuple=True)
                    args = (args[0], index)
                args = tuple(sizes(a) for a in args)
                kwargs = {k: sizes(v) for k, v in kwargs.items()}
                return func(*tree_map(plain, args), **tree_map(plain, kwargs))
            with torch._C.DisableTorchFunction(), _disable_current_modes():
                out = func(*tree_map(plain, args), **tree_map(plain, kwargs))
        return tree_map(lambda o: ConstantTensor.wrap(o) if type(o) is torch.Tensor else o, out)


def _resampler_reads_grid(model) -> bool:
    """Whether a resampler after the vision tower reads the grid of patches
    (ERNIE-4.5-VL: ``resampler_model(..., image_grid_thw)`` slices the features of
    every image with offsets computed from the grid, which no precomputed input
    replaces)."""
    import inspect
    import re

    from .families import image_features_function

    try:
        source = inspect.getsource(image_features_function(model))
    except (OSError, TypeError):
        return False
    return re.search(r"resampler\w*\([^)]*image_grid_thw", source) is not None


def graph_constants(model, constants: dict, precomputed: dict) -> tuple[dict, dict]:
    """The constants of ``get_image_features`` as ``ConstantTensor``, which the tower
    reads as python integers while it is exported, for the families handled here
    (no precomputed inputs: computed from the constants, they are constants too) and
    for a grid of patches a resampler reads (the precomputed inputs of the tower kept);
    the others unchanged, and so are the towers of PaddleOCR-VL, whose precomputed
    inputs suffice (``torch.arange`` of a constant count fails in export's torch
    function modes)."""
    import inspect

    from .families import image_features_function

    family = _family(model, set(inspect.signature(image_features_function(model)).parameters))
    wrapped = {
        k: ConstantTensor.wrap(v) if isinstance(v, torch.Tensor) else v
        for k, v in constants.items()
    }
    if family is not None and family is not _grid_patch_images:
        return wrapped, {}
    if family is None and "image_grid_thw" in constants and _resampler_reads_grid(model):
        return wrapped, precomputed
    return constants, precomputed


def _tiles_masked(model) -> bool:
    """Whether ``get_image_features`` selects the real tiles of the image with
    ``pixel_attention_mask`` (``pixel_values[pixel_attention_mask]``: Granite-Docling),
    a mask of tiles, not of pixels (Idefics3)."""
    import inspect

    from .families import image_features_function

    try:
        source = inspect.getsource(image_features_function(model))
    except (OSError, TypeError):
        return False
    return "pixel_values[pixel_attention_mask]" in source


def _tile_inputs(model, image_size, gen, channels: int) -> tuple[dict, dict]:
    """Granite-Docling: one tile of the size of the vision tower, ``(1, tiles, channels,
    size, size)``, and the mask of the real tiles ``(1, tiles)``."""
    size = _size_of(model.config.vision_config)
    pixels = torch.randn(1, 1, channels, size, size, generator=gen)
    return {"pixel_values": pixels}, {"pixel_attention_mask": torch.ones((1, 1), dtype=torch.bool)}


def _sam_inputs(model, image_size, gen, channels: int) -> tuple[dict, dict]:
    """Unlimited-OCR: the image at the size of the SAM tower (its absolute position
    embeddings fix it)."""
    size = _size_of(_sam_config(model.config))
    return {"pixel_values": torch.randn(1, channels, size, size, generator=gen)}, {}


def _family(model, params: set[str]):
    """The function building the inputs of the family of ``model``, None if not handled
    here."""
    config = model.config
    if "image_merge_sizes" in params:
        return _merge_size_inputs
    if "image_grid_hw" in params:
        return _grid_hw_inputs
    if "high_res_pixel_values" in params:
        return _hybrid_resolution_inputs
    if _sam_config(config) is not None:
        return _sam_inputs
    if "image_grid_thw" in params and _patches_as_images(model):
        return _grid_patch_images
    if "pixel_attention_mask" in params and _tiles_masked(model):
        return _tile_inputs
    if "spatial_shapes" in params and "pixel_attention_mask" in params:
        return _naflex_inputs
    if "target_sizes" in params:
        return _navit_inputs
    if "image_sizes" in params and isinstance(getattr(config, "image_grid_pinpoints", None), list):
        return _anyres_inputs
    return None


def family_vision_inputs(
    model, params: set[str], image_size: tuple[int, int] | None, gen, channels: int
) -> tuple[dict, dict] | None:
    """The inputs of ``get_image_features`` for the families handled here,
    ``(vision_inputs, constants)``, None for the others.

    :param model: the image-text-to-text model
    :param params: the parameter names of its ``get_image_features``
    :param image_size: the requested image size (height, width), may be None
    :param gen: random generator of the pixels
    :param channels: the number of channels of the image
    """
    fct = _family(model, params)
    return None if fct is None else fct(model, image_size, gen, channels)


__all__ = [
    "ConstantTensor",
    "family_vision_inputs",
    "fix_image_config",
    "graph_constants",
    "image_frame_tokens",
]
