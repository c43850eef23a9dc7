"""What an image-text-to-text model is made of, read from its class and configuration
before any part is built: the image token, the function returning the image (or video)
features, its vision tower, the language model that generates, and the family the
export takes (the LLaVA layout, a Q-Former, an encoder-decoder, cross-attention layers,
an image merged inside the forward), with the configuration and input fixes a family
needs. Every other module of the package imports it, it imports none of them.
"""

from __future__ import annotations

import inspect
import re
import sys
from typing import Any

import torch

from .errors import MultimodalPartsError

#: configuration attributes holding the image token id, first found wins
IMAGE_TOKEN_ATTRIBUTES = (
    "image_token_id",
    "image_token_index",
    "image_token",
    "video_token_index",  # InstructBLIP-Video: the video features replace them
)


def _inner(model):
    """The base model of a ``...ForConditionalGeneration`` (``model.model``) or itself."""
    inner = getattr(model, "model", None)
    return inner if isinstance(inner, torch.nn.Module) else model


def image_token_id(model) -> int:
    """The id of the placeholder token the image features replace.

    :param model: a transformers image-text-to-text model
    :return: the token id, ``MultimodalPartsError`` when the configuration has none
    """
    for name in IMAGE_TOKEN_ATTRIBUTES:
        value = getattr(model.config, name, None)
        if isinstance(value, int):
            return value
    raise MultimodalPartsError(
        f"{type(model).__name__}: no image token id in its configuration "
        f"(looked for {list(IMAGE_TOKEN_ATTRIBUTES)})"
    )


def image_features_function(model):
    """``get_image_features`` of the model (or of its base model).

    :param model: a transformers image-text-to-text model
    :return: the bound method, ``MultimodalPartsError`` when there is none
    """
    for owner in (_inner(model), model):
        fct = getattr(owner, "get_image_features", None)
        if fct is not None:
            return fct
    fct = video_features_function(model)
    if fct is not None:
        return fct
    raise MultimodalPartsError(f"{type(model).__name__} has no get_image_features")


def features_tensor(output) -> torch.Tensor:
    """The image features returned by ``get_image_features`` as one tensor
    ``(n_image_tokens, hidden)``: the ``pooler_output`` of a model output (a tensor or
    a tuple of tensors, one per image), else the output itself."""
    value = output
    if not isinstance(output, (torch.Tensor, list, tuple)):
        value = getattr(output, "pooler_output", None)
        if value is None:
            value = output.last_hidden_state
    if isinstance(value, (list, tuple)):
        value = torch.cat([v.reshape(-1, v.shape[-1]) for v in value], dim=0)
    return value.reshape(-1, value.shape[-1])


#: the inputs of a decoder part receiving the deepstack features (Qwen3-VL): which
#: positions are image tokens, and the features added there after the first layers
DEEPSTACK_INPUTS = ("visual_pos_masks", "deepstack_visual_embeds")


def deepstack_language_model(model):
    """The inner language model (without head) of a model adding vision features to the
    hidden states of its first decoder layers at the image tokens (Qwen3-VL, Qwen3-VL-MoE,
    Granite-Docling: ``deepstack_visual_embeds``), None for any other model."""
    lm = getattr(_inner(model), "language_model", None)
    if not isinstance(lm, torch.nn.Module):
        return None
    params = inspect.signature(lm.forward).parameters
    return lm if all(name in params for name in DEEPSTACK_INPUTS) else None


def deepstack_tensor(output) -> torch.Tensor | None:
    """The deepstack features of ``get_image_features`` as one tensor ``(layers,
    n_image_tokens, hidden)`` (every image concatenated, as ``features_tensor`` does),
    None when the output has none."""
    layers = getattr(output, "deepstack_features", None)
    if not layers:
        return None
    return torch.stack([features_tensor(layer) for layer in layers])


def vision_tower(model):
    """The vision tower module of the model (``visual``, ``vision_tower`` or
    ``vision_model`` of its base model), None when it has none of them."""
    inner = _inner(model)
    for name in ("visual", "vision_tower", "vision_model"):
        tower = getattr(inner, name, None)
        if isinstance(tower, torch.nn.Module):
            return tower
    return None


def prepare_qformer_config(config) -> None:
    """Gives a Q-Former configuration (``num_query_tokens``) without an image token id
    the last id of the text vocabulary as its image token (``image_token_index``, and
    ``video_token_index`` when it has one), an id the random prompts never draw, and an
    OPT language model its word embeddings of the hidden size (``word_embed_proj_dim``,
    left at its original value by the zoo's shrinking, is the size the projection of the
    Q-Former must return)."""
    if not isinstance(getattr(config, "num_query_tokens", None), int):
        return
    text = config.get_text_config(decoder=True)
    if isinstance(getattr(text, "word_embed_proj_dim", None), int):
        text.word_embed_proj_dim = text.hidden_size
    last = text.vocab_size - 1
    for name in ("image_token_index", "video_token_index"):
        if hasattr(config, name) and getattr(config, name) is None:
            setattr(config, name, last)


def qformer_constants(fct, model, seed: int = 0, length: int = 4) -> dict:
    """The inputs of ``get_image_features`` (``fct``) reading the text prompt in the
    Q-Former (``qformer_input_ids``, InstructBLIP), random tokens of its vocabulary and
    a full mask, as constants of the vision part; empty for other models."""
    params = inspect.signature(fct).parameters
    if "qformer_input_ids" not in params:
        return {}
    gen = torch.Generator().manual_seed(seed + 3)
    qc: Any = getattr(model.config, "qformer_config", None)
    vocab = getattr(qc, "vocab_size", None) or 32
    ids = torch.randint(1, vocab, (1, length), generator=gen)
    out: dict = {"qformer_input_ids": ids}
    if "qformer_attention_mask" in params:
        out["qformer_attention_mask"] = torch.ones_like(ids)
    return out


#: frames of a video InstructBLIP-Video's generate expects (4 times the query tokens)
VIDEO_FRAMES = 4


def video_features_function(model):
    """``get_video_features`` of a model reading videos only (InstructBLIP-Video, no
    ``get_image_features``), None for the others."""
    inner = getattr(model, "model", None)
    for owner in (inner, model):
        fct = getattr(owner, "get_video_features", None) if owner is not None else None
        if fct is not None and not hasattr(owner, "get_image_features"):
            return fct
    return None


def video_frames(fct, pixels: torch.Tensor) -> torch.Tensor:
    """The image ``pixels`` ``(1, c, h, w)`` repeated as ``VIDEO_FRAMES`` frames
    ``(1, frames, c, h, w)`` when ``fct`` is ``get_video_features``, else unchanged."""
    if getattr(fct, "__name__", "") != "get_video_features":
        return pixels
    return pixels.unsqueeze(1).expand(-1, VIDEO_FRAMES, -1, -1, -1).contiguous()


def has_output_head(module) -> bool:
    "Whether ``module`` has an output projection to the vocabulary."
    head: Any = getattr(module, "get_output_embeddings", None)
    return callable(head) and head() is not None


def language_model_with_head(model):
    """The causal language model of ``model`` when ``model.forward`` takes no cache but
    ``model.language_model`` is a model with its head (BLIP-2, InstructBLIP: ``generate``
    calls ``language_model.generate`` with the merged embeddings); else ``model``."""
    from ..llm_helper import cache_argument_name

    try:
        cache_argument_name(model)
        return model
    except ValueError:
        pass
    lm = getattr(model, "language_model", None)
    if isinstance(lm, torch.nn.Module) and has_output_head(lm):
        return lm
    return model


#: inputs of the forward the prompt (prefill) reads beside the tokens and their mask
PREFILL_INPUTS = ("pixel_values", "flattened_patches", "image_embeds_position_mask")


def is_prefill_merging(model_type: str) -> bool:
    """True when the image-text-to-text class of ``model_type`` reads the pixels in its
    forward with a cache and exposes no ``get_image_features`` (GIT prepends the image
    states to the prompt, Kosmos-2 places them where ``image_embeds_position_mask``
    says): the image goes through the prompt's graph, the following tokens through a
    one-token graph reading the cache."""
    import transformers
    from transformers.models.auto import modeling_auto

    from ..llm_helper import CACHE_ARGUMENT_NAMES

    name = modeling_auto.MODEL_FOR_IMAGE_TEXT_TO_TEXT_MAPPING_NAMES.get(model_type)
    cls = getattr(transformers, name, None) if name else None
    if cls is None:
        return False
    params = set(inspect.signature(cls.forward).parameters)
    reads = bool(params & {"pixel_values", "flattened_patches"}) and bool(
        params & set(CACHE_ARGUMENT_NAMES)
    )
    if reads and "image_embeds_position_mask" in params:
        # Kosmos-2 places the image where this mask says, no image token: in the forward
        # (transformers 5.25 gives it a get_image_features too)
        return True
    if hasattr(cls, "get_image_features"):
        return False
    # the base model it wraps as ``self.model`` (FuyuModel, Emu3Model) has it
    wrapped = re.search(r"self\.model\s*=\s*(\w+)\(", inspect.getsource(cls.__init__))
    base = getattr(sys.modules[cls.__module__], wrapped.group(1), None) if wrapped else None
    if base is not None and hasattr(base, "get_image_features"):
        return False
    return reads and not params & {
        "encoder_outputs",
        "cross_attention_states",
        "image_attention_mask",
    }


#: inputs of a forward carrying an image (or a video)
IMAGE_INPUTS = ("pixel_values", "flattened_patches", "pixel_values_videos", "image_embeds")


def require_image_input(cls) -> None:
    """Raises ``MultimodalPartsError`` when the forward of the model class ``cls`` takes
    no image: a class transformers lists as image-text-to-text that reads only text
    (Mistral4ForCausalLM) or protein sequences (Evolla) has no image part to export."""
    params = set(inspect.signature(cls.forward).parameters)
    if params & set(IMAGE_INPUTS):
        return
    others = sorted(p for p in params if p.endswith("_input_ids") and p != "decoder_input_ids")
    what = f"it reads {others} besides the text" if others else "it reads text only"
    raise MultimodalPartsError(
        f"{cls.__name__} takes no image: {what}, not an image-to-text generation "
        f"(none of {list(IMAGE_INPUTS)} in its forward)"
    )


def is_image_seq2seq(model_type: str) -> bool:
    """True when the image-text-to-text class of ``model_type`` is an encoder-decoder
    model reading an image (its forward takes ``encoder_outputs`` and pixels or
    patches)."""
    import transformers
    from transformers.models.auto import modeling_auto

    name = modeling_auto.MODEL_FOR_IMAGE_TEXT_TO_TEXT_MAPPING_NAMES.get(model_type)
    cls = getattr(transformers, name, None) if name else None
    if cls is None:
        return False
    params = set(inspect.signature(cls.forward).parameters)
    if "encoder_outputs" in params and bool(params & {"pixel_values", "flattened_patches"}):
        return True
    return _is_vision_text_decoder(cls)


def _is_vision_text_decoder(cls) -> bool:
    """A vision model and a text decoder attending to its states, the forward taking the
    pixels and no cache, no image features merged into the prompt (BLIP)."""
    from ..llm_helper import CACHE_ARGUMENT_NAMES

    params = set(inspect.signature(cls.forward).parameters)
    return (
        "pixel_values" in params
        and not params & set(CACHE_ARGUMENT_NAMES)
        and not any(hasattr(cls, f) for f in ("get_image_features", "get_video_features"))
        and "text_decoder" in inspect.getsource(cls.__init__)
    )


def is_cross_attention_lm(model_type: str) -> bool:
    """True when the image-text-to-text class of ``model_type`` is a decoder-only model
    whose layers attend to the image states (its forward takes them:
    ``cross_attention_states`` for Mllama, ``image_encoder_embeddings`` for IDEFICS)."""
    import transformers
    from transformers.models.auto import modeling_auto

    name = modeling_auto.MODEL_FOR_IMAGE_TEXT_TO_TEXT_MAPPING_NAMES.get(model_type)
    cls = getattr(transformers, name, None) if name else None
    if cls is None:
        return False
    params = inspect.signature(cls.forward).parameters
    return "cross_attention_states" in params or "image_encoder_embeddings" in params


def cross_attention_names(model) -> tuple[str, str]:
    """The arguments of the forward taking the image states and the mask of what every
    token sees: ``(cross_attention_states, cross_attention_mask)`` (Mllama),
    ``(perceiver_embeddings or image_encoder_embeddings, image_attention_mask)``
    (IDEFICS, with or without its perceiver)."""
    params = inspect.signature(model.forward).parameters
    if "cross_attention_states" in params:
        return "cross_attention_states", "cross_attention_mask"
    if getattr(model.config, "use_resampler", False):
        return "perceiver_embeddings", "image_attention_mask"
    return "image_encoder_embeddings", "image_attention_mask"


def prepare_cross_attention_config(config) -> None:
    """Fixes what the zoo's shrinking leaves inconsistent in a configuration of a
    language model with cross-attention layers (``cross_attention_layers``): the last
    of the shrunk layers attends to the image (the original indices are all beyond
    them: the image would be ignored), the vision tower returns the states of layers
    it has (``intermediate_layers_indices``) and the projector reads their size
    (``vision_output_dim``)."""
    text = config.get_text_config(decoder=True)
    layers = getattr(text, "cross_attention_layers", None)
    if not isinstance(layers, list):
        return
    n = text.num_hidden_layers
    if not any(i < n for i in layers):
        text.cross_attention_layers = [n - 1]
    vc = getattr(config, "vision_config", None)
    indices = getattr(vc, "intermediate_layers_indices", None)
    if vc is not None and isinstance(indices, list):
        vc.intermediate_layers_indices = [i for i in indices if i < vc.num_hidden_layers] or [0]
        if isinstance(getattr(vc, "num_global_layers", None), int):
            vc.num_global_layers = min(vc.num_global_layers, 2)
        vc.vision_output_dim = vc.hidden_size * (len(vc.intermediate_layers_indices) + 1)


def config_image_size(vc) -> int:
    "The image size of a vision configuration (the first of a pair), 64 when unknown."
    size = getattr(vc, "image_size", None)
    if isinstance(size, (list, tuple)):
        size = size[0]
    return size if isinstance(size, int) else 64


def flattened_patches(vc, gen, side: int = 4) -> torch.Tensor:
    """Random patches of an image of ``side`` x ``side`` patches as Pix2Struct's and
    Kosmos-2.5's processors flatten them, ``(1, side * side, 2 + patch size)``: the row
    and the column of every patch (from 1), then its pixels."""
    rows, cols = torch.meshgrid(torch.arange(1, side + 1), torch.arange(1, side + 1), indexing="ij")
    values = torch.randn(side * side, vc.patch_embed_hidden_size, generator=gen)
    patches = torch.cat([rows.reshape(-1, 1), cols.reshape(-1, 1), values], dim=1)
    return patches.unsqueeze(0).to(torch.float32)


def features_projector(model) -> torch.nn.Module | None:
    """The projector the model applies to the output of ``get_image_features`` in its
    forward when ``get_image_features`` does not (Llama 4 returns the vision tower's
    output, its forward calls ``multi_modal_projector``), None otherwise.

    :param model: the image-text-to-text model
    :return: the projector module or None
    """
    import inspect

    inner = getattr(model, "model", model)
    projector = getattr(inner, "multi_modal_projector", None)
    fct = getattr(inner, "get_image_features", None)
    if not isinstance(projector, torch.nn.Module) or fct is None:
        return None
    try:
        forward, features = inspect.getsource(type(inner).forward), inspect.getsource(fct)
    except (OSError, TypeError):
        return None
    if "multi_modal_projector(" in forward and "multi_modal_projector" not in features:
        return projector
    return None


def adds_image_features(model) -> bool:
    """Whether the model adds the image features to the embeddings of the image tokens
    instead of replacing them (Molmo 2: ``inputs_embeds[mask] + image_features``), read
    from the source of its forward.

    :param model: the image-text-to-text model
    :return: True when the features are added
    """
    import inspect
    import re

    inner = getattr(model, "model", model)
    try:
        source = inspect.getsource(type(inner).forward)
    except (OSError, TypeError):
        return False
    return re.search(r"inputs_embeds\[\w+\]\s*\+\s*image_features", source) is not None


__all__ = [
    "IMAGE_INPUTS",
    "IMAGE_TOKEN_ATTRIBUTES",
    "PREFILL_INPUTS",
    "VIDEO_FRAMES",
    "adds_image_features",
    "config_image_size",
    "cross_attention_names",
    "features_projector",
    "features_tensor",
    "flattened_patches",
    "has_output_head",
    "image_features_function",
    "image_token_id",
    "is_cross_attention_lm",
    "is_image_seq2seq",
    "is_prefill_merging",
    "language_model_with_head",
    "prepare_cross_attention_config",
    "prepare_qformer_config",
    "qformer_constants",
    "require_image_input",
    "video_features_function",
    "video_frames",
    "vision_tower",
]
