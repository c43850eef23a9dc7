"""The parts of an image-text-to-text model a runtime chains: the vision encoder
(vision tower and projector: pixels to the features the decoder consumes), the
embedding merge (token embeddings with the image features at the image tokens) and
the decoder (``inputs_embeds`` in, logits and present cache out).

Each part is a :class:`torch.nn.Module` wrapping the transformers model; export each
one with ``to_onnx``.

.. code-block:: python

    vision = VisionEncoder(model, image_grid_thw=grid)
    features = vision(pixel_values)              # (n_image_tokens, hidden)
    merge = EmbeddingMerge(model)
    embeds = merge(input_ids, features)          # (batch, seq, hidden)
    logits, cache = Decoder(model)(embeds, attention_mask, position_ids, cache)
"""

from __future__ import annotations

import inspect
import re
from typing import Any

import torch

from .errors import MultimodalPartsError
from .families import (
    deepstack_language_model,
    deepstack_tensor,
    features_tensor,
    image_features_function,
    image_token_id,
    vision_tower,
)


def _source(fct) -> str:
    try:
        return inspect.getsource(fct)
    except (OSError, TypeError):
        return ""


def precomputed_vision_kwargs(model, grid) -> dict:
    """What a vision tower taking a grid of patches (``image_grid_thw``) computes from
    the grid with operators no graph holds (``repeat_interleave``, loops over
    ``grid.tolist()``): position ids, sequence boundaries, window indices, computed
    here with transformers' own functions (``transformers.vision_utils``) and given to
    the tower, which uses them instead (they become constants of the exported graph).

    :param model: the image-text-to-text model
    :param grid: the grid ``(images, 3)`` or None
    :return: the keyword arguments (empty without a grid)
    """
    tower: Any = vision_tower(model)
    if grid is None or tower is None:
        return {}
    from transformers import vision_utils

    # the tower's forward or its encoder's (Cosmos 3 computes the boundaries there)
    source = "".join(
        _source(t.forward) for t in {type(m) for m in tower.children()} | {type(tower)}
    )
    merge = getattr(tower, "spatial_merge_size", 2)
    kwargs: dict = {}
    # from the grid as given (Inkling 2 computes them from a grid of patches it derives)
    call = re.search(
        r"get_vision_position_ids\(\s*(?:image_)?grid_thw\b\s*"
        r"(?:,\s*(?:spatial_merge_size\s*=\s*)?(\d+)\b)?",
        source,
    )
    if call:
        # a merge size written in the call (Kimi K2.5: 1, it has none) wins over the default
        kwargs["position_ids"] = vision_utils.get_vision_position_ids(
            grid, int(call.group(1)) if call.group(1) else merge
        )
    if "get_vision_attention_seqlens(" in source or "get_vision_cu_seqlens(" in source:
        kwargs["cu_seqlens"] = vision_utils.get_vision_cu_seqlens(grid)
    if "get_vision_window_index(" in source:
        kwargs["window_index"], kwargs["cu_window_seqlens"] = vision_utils.get_vision_window_index(
            grid,
            spatial_merge_size=merge,
            window_size=tower.window_size,
            patch_size=tower.patch_size,
        )
    kwargs.update(temporal_merge_kwargs(tower, grid))
    return kwargs


def temporal_merge_kwargs(tower, grid) -> dict:
    """The index pooling the patches of every frame into the merged tokens (Kimi K2.5),
    computed by the tower's own ``get_vision_temporal_merge_index`` and given to it as
    ``temporal_merge_index``, which the function pops from the tower's keyword
    arguments instead of computing it again. In the tower it reads a data-dependent
    count (``int(patches.sum())`` since transformers 5.25: ``GuardOnDataDependentSymNode``,
    a loop over ``grid.tolist()`` before); here the grid is known. The value has the
    form the tower's version expects (a gather index, or the scatter index, the frame
    weights and the number of merged tokens), whatever that version is.

    :param tower: the vision tower
    :param grid: the grid ``(images, 3)``
    :return: ``{"temporal_merge_index": ...}``, empty for the other towers
    """
    fct = getattr(inspect.getmodule(type(tower)), "get_vision_temporal_merge_index", None)
    kernel = getattr(tower, "merge_kernel_size", None)
    if fct is None or kernel is None or "kwargs" not in inspect.signature(fct).parameters:
        return {}
    if not re.search(r"""kwargs\.pop\(\s*["']temporal_merge_index["']""", _source(fct)):
        return {}
    return {"temporal_merge_index": fct(grid, *kernel)}


def python_constants(constants: dict) -> dict:
    """The constants of ``get_image_features`` as the vision tower best reads them in a
    graph: ``image_sizes`` (a tensor ``(images, 2)``) becomes a list of ``(height,
    width)`` tuples of python integers. The Pixtral tower (Mistral3, LightOnOCR,
    Mistral-Large-4) slices the patches of every image with ``size[0] // patch``: read
    from a tensor, every size is a data-dependent symbol torch.export cannot guard on
    (``q_length > 1`` in the attention), read from a list it is an integer and the
    graph is specialized to the size of the example image, as the grid of patches of
    the Qwen-VL family is. The values are the same, and so are the eager results."""
    out = dict(constants)
    sizes = out.get("image_sizes")
    if isinstance(sizes, torch.Tensor) and sizes.dim() == 2:
        out["image_sizes"] = [tuple(int(v) for v in row) for row in sizes.tolist()]
    return out


class VisionEncoder(torch.nn.Module):
    """Pixels to image features: ``get_image_features`` of the model, the features of
    every image concatenated, ``(n_image_tokens, hidden)``.

    :param model: a transformers image-text-to-text model
    :param constants: inputs of ``get_image_features`` other than the pixels kept
        constant in the exported graph (``image_grid_thw``: the grid of patches, which
        the vision tower reads as python integers, fixes the image size)
    """

    def __init__(self, model, **constants):
        super().__init__()
        self.model = model
        self.fct_name = "get_image_features"
        self.constants = python_constants(constants)
        self.precomputed = precomputed_vision_kwargs(model, constants.get("image_grid_thw"))
        from .image_inputs import graph_constants

        self.constants, self.precomputed = graph_constants(model, self.constants, self.precomputed)
        image_features_function(model)
        from .families import features_projector

        self.projector = features_projector(model)
        # Qwen3-VL: features of intermediate vision layers the decoder adds (deepstack)
        self.deepstack = deepstack_language_model(model) is not None

    def forward(self, pixel_values, *args):
        fct = image_features_function(self.model)
        names = [
            n for n in inspect.signature(fct).parameters if n not in ("pixel_values", "kwargs")
        ]
        kwargs = dict(self.constants)
        kwargs.update(dict(zip(names[: len(args)], args)) if args else {})
        kwargs = {k: v for k, v in kwargs.items() if v is not None}
        kwargs.update(self.precomputed)  # popped by the tower: a new dict every call
        output = fct(pixel_values=pixel_values, **kwargs)
        features = features_tensor(output)
        features = features if self.projector is None else self.projector(features)
        deepstack = deepstack_tensor(output) if self.deepstack else None
        return features if deepstack is None else (features, deepstack)

    def features(self, *inputs) -> torch.Tensor:
        """The image features alone (the first output), ``(n_image_tokens, hidden)``."""
        out = self(*inputs)
        return out[0] if isinstance(out, tuple) else out


class EmbeddingMerge(torch.nn.Module):
    """Token embeddings with the image features placed at the image tokens, in order:
    the k-th image token of the batch (row-major) receives the k-th feature row.

    :param model: a transformers image-text-to-text model
    """

    def __init__(self, model):
        super().__init__()
        self.embed = model.get_input_embeddings()
        if self.embed is None:
            raise MultimodalPartsError(f"{type(model).__name__} has no input embeddings")
        self.token_id = image_token_id(model)
        from .families import adds_image_features

        self.add = adds_image_features(model)

    def forward(self, input_ids, image_features):
        embeds = self.embed(input_ids)
        mask = input_ids == self.token_id
        # index of the feature row of every image token (gather, no masked_scatter)
        index = (torch.cumsum(mask.reshape(-1).to(torch.int64), 0) - 1).clamp(min=0)
        index = torch.clamp(index, max=image_features.shape[0] - 1)
        placed = image_features.to(embeds.dtype)[index].reshape(embeds.shape)
        if self.add:  # Molmo 2 adds the features to the embeddings of the image tokens
            placed = embeds + placed
        return torch.where(mask.unsqueeze(-1), placed, embeds)


class Decoder(torch.nn.Module):
    """The language model with its head: ``inputs_embeds``, ``attention_mask``,
    ``position_ids`` and the past cache in, the logits and the present cache out. The
    model's own forward runs (logits scaling and soft-capping included) without pixels.

    :param model: a transformers image-text-to-text model
    """

    def __init__(self, model):
        super().__init__()
        from ..llm_helper import cache_argument_name

        params = set(inspect.signature(model.forward).parameters)
        try:
            cache_name = cache_argument_name(model)
        except ValueError as e:
            raise MultimodalPartsError(
                f"{e}: the decoder cannot be called with embeddings and a cache"
            ) from e
        config = getattr(model, "config", None)
        text = config.get_text_config(decoder=True) if config is not None else None
        if getattr(text, "hidden_size_per_layer_input", None):
            raise MultimodalPartsError(
                f"{type(model).__name__}: per-layer embeddings looked up from the token ids "
                "(hidden_size_per_layer_input, Gemma 4 E2B/E4B): the decoder part takes "
                "embeddings only and would recover the ids by matching the embedding table, "
                "which fails at the image tokens; not supported yet (the variants without "
                "per-layer embeddings export)"
            )
        if "inputs_embeds" not in params:
            raise MultimodalPartsError(
                f"{type(model).__name__}.forward takes no 'inputs_embeds': the decoder "
                f"cannot be called with embeddings and a cache"
            )
        self.model = model
        # the cache argument is found by its role: 'cache' since transformers 5.24
        self.cache_name = cache_name
        self.deepstack_lm = deepstack_language_model(model)

    def forward(
        self,
        inputs_embeds,
        attention_mask,
        position_ids,
        past_key_values,
        visual_pos_masks=None,
        deepstack_visual_embeds=None,
    ):
        from ..causal_lm import output_cache

        if deepstack_visual_embeds is not None:
            return self._deepstack_forward(
                inputs_embeds,
                attention_mask,
                position_ids,
                past_key_values,
                visual_pos_masks,
                deepstack_visual_embeds,
            )
        out = self.model(
            inputs_embeds=inputs_embeds,
            attention_mask=attention_mask,
            position_ids=position_ids,
            use_cache=True,
            **{self.cache_name: past_key_values},
        )
        return out.logits, output_cache(out)

    def _deepstack_forward(
        self, inputs_embeds, attention_mask, position_ids, cache, masks, deepstack
    ):
        """The language model with the deepstack features (``(layers, n, hidden)``,
        added at the positions ``masks`` marks after the first layers), then the head:
        what the model's forward does when it computed them from the pixels itself."""
        from ..causal_lm import output_cache
        from ..llm_helper import cache_argument_name

        lm: Any = self.deepstack_lm
        out = lm(
            inputs_embeds=inputs_embeds,
            attention_mask=attention_mask,
            position_ids=position_ids,
            use_cache=True,
            visual_pos_masks=masks,
            deepstack_visual_embeds=list(deepstack.unbind(0)),
            **{cache_argument_name(lm): cache},
        )
        logits = self.model.get_output_embeddings()(out.last_hidden_state)
        return logits, output_cache(out)


__all__ = [
    "Decoder",
    "EmbeddingMerge",
    "VisionEncoder",
    "precomputed_vision_kwargs",
    "python_constants",
    "temporal_merge_kwargs",
]
