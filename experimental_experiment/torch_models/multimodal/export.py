"""Exports the parts of a multimodal model with ``to_onnx``: the vision encoder (the
shape of its example image), the embedding merge and the decoder (dynamic batch,
sequence and cache length).

.. code-block:: python

    parts = export_parts(build_multimodal("qwen2_5_vl"))
    parts.models["decoder"]  # onnx.ModelProto
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

import torch

from .cases import MultimodalCase
from .families import language_model_with_head
from .parts import Decoder, EmbeddingMerge, VisionEncoder

#: sizes of the random example the decoder is exported with
DECODER_EXAMPLE = dict(batch=2, seq=3, past=5)


@dataclass
class ExportedParts:
    """The ONNX models of the parts, by name (``vision``, ``merge``, ``decoder``, and
    ``decoder_step`` for a hybrid or reference decoder, see ``cache_layout``), and the
    seconds each export took."""

    models: dict[str, Any] = field(default_factory=dict)
    times: dict[str, float] = field(default_factory=dict)


def export_part(module, args: tuple, dynamic_shapes=None, kwargs: dict | None = None):
    """``to_onnx`` inside ``bypass_export_some_errors(patch_transformers=True)`` (the
    patches the zoo uses: caches registered as pytrees, mask functions exportable).

    :param module: the part to export
    :param args: positional example inputs
    :param dynamic_shapes: as ``to_onnx`` takes them (dimension names as strings)
    :param kwargs: keyword example inputs
    :return: the ONNX model
    """
    from ...torch_interpreter import to_onnx
    from ...torch_interpreter.onnx_export_errors import bypass_export_some_errors

    patches: Any = bypass_export_some_errors(patch_transformers=True)
    with torch.no_grad(), patches as modificator:
        args, kwargs = modificator((args, kwargs or {}))
        return to_onnx(module, args, kwargs, dynamic_shapes=dynamic_shapes)


def cache_layout(model) -> str:
    """How the cache of the decoder of ``model`` is built, read from the cache a
    one-token prefill returns:

    * ``"plain"``: keys and values of ``num_key_value_heads`` x ``head_dim`` in every
      layer (``make_dynamic_cache``);
    * ``"probed"``: other keys and values, or more tensors (the compressed keys and the
      indexer keys of the sparse attention of Dots3-Note or Mistral-Large-4): the cache
      takes the layers and shapes of the probe (``make_hybrid_cache``);
    * ``"hybrid"``: a layer holds convolution or recurrent states (LFM3-VL,
      GLM-5-Next): the cache is probed and the decoder is exported twice, for the
      prompt (the states of an empty cache are zeros) and for one new token (the
      linear layers take another path for one token);
    * ``"reference"``: a layer keeps the prompt apart from a sliding window of the
      generated tokens (reference sliding-window attention, UnlimitedOCR): the cache
      is probed and the decoder is exported twice, for the prompt (an empty cache whose
      layers store the next tokens as the prompt) and for one new token (the prompt
      kept, the token in the window).
    """
    from ...torch_interpreter.patches.cache_layers import flatten_cache, is_linear_layer, leaf_kind
    from ..hybrid_cache import prefilled_cache
    from ..llm_helper import _cache_geometry
    from .tiny_configs import check_decoder_only

    check_decoder_only(model)
    probe = prefilled_cache(model)
    if any(is_linear_layer(layer) for layer in probe.layers):
        return "hybrid"
    leaves, names, spec = flatten_cache(probe)
    if any(s.prefill for s in spec.layers):
        return "reference"
    n_layers, n_kv, head_dim = _cache_geometry(model.config)
    plain = len(names) == 2 * n_layers and all(
        leaf_kind(n) in ("key", "value") and t.shape[1] == n_kv and t.shape[3] == head_dim
        for n, t in zip(names, leaves)
    )
    return "plain" if plain else "probed"


def decoder_example(
    model,
    mrope: bool,
    batch: int = 2,
    seq: int = 3,
    past: int = 5,
    seed: int = 0,
    layout: str = "plain",
    deepstack: int = 0,
    prefill: int | None = None,
) -> tuple[tuple, dict]:
    """Random inputs of ``Decoder`` (``inputs_embeds``, ``attention_mask``,
    ``position_ids`` (3, batch, seq) when ``mrope``, the cache) and their dynamic shapes.
    ``seq=1`` leaves the sequence dimension static (a decode step). ``layout`` is
    given by ``cache_layout``. ``deepstack``: the number of decoder layers receiving
    vision features (Qwen3-VL), given with the image positions (two per row).
    ``prefill``: for the ``"reference"`` layout, the length of the prompt the cache
    keeps apart from its ``past`` tokens (the attention sees ``prefill + past``); None
    gives the empty cache before the prompt (``past`` must be 0, its axes are static).
    """
    from ...torch_interpreter.patches.cache_layers import before_prompt, flatten_cache
    from ...torch_interpreter.patches.cache_registration import cache_classes
    from ..hybrid_cache import make_hybrid_cache
    from ..llm_helper import cache_dynamic_shapes, dynamic_shapes_of_cache, make_dynamic_cache

    gen = torch.Generator().manual_seed(seed)
    text = model.config.get_text_config(decoder=True)
    embeds = torch.randn(batch, seq, text.hidden_size, generator=gen)
    seen = past + (prefill or 0)  # the positions the cache holds
    if layout == "reference" and prefill is None and past:
        raise ValueError(f"an empty cache before the prompt has no past (past={past})")
    mask = torch.ones((batch, seen + seq), dtype=torch.int64)
    positions = torch.arange(seen, seen + seq, dtype=torch.int64).expand(batch, -1)
    seq_ds: dict[int, str] = {1: "seq"} if seq > 1 else {}
    pos_ds: dict[int, str] = {0: "batch", **seq_ds}
    if mrope:
        positions = positions.unsqueeze(0).expand(3, -1, -1)
        pos_ds = {1: "batch", **({2: "seq"} if seq > 1 else {})}
    if layout == "plain":
        cache = make_dynamic_cache(model.config, batch, past, generator=gen)
        cache_ds = cache_dynamic_shapes(len(cache.layers))
    elif layout == "reference":
        cache = make_hybrid_cache(
            model.config, batch, past, model=model, generator=gen, prefill=prefill or 0
        )
        if prefill is None:  # the same layers, their next call is the prompt
            leaves, _, spec = flatten_cache(cache)
            cache = cache_classes()[type(cache)][1](leaves, before_prompt(spec))
            cache_ds = dynamic_shapes_of_cache(cache, past=None, prefill=None)
        else:
            cache_ds = dynamic_shapes_of_cache(cache)
    else:
        cache = make_hybrid_cache(model.config, batch, past, model=model, generator=gen)
        cache_ds = dynamic_shapes_of_cache(cache)
    ds = {
        "inputs_embeds": {0: "batch", **seq_ds},
        "attention_mask": {0: "batch", 1: "total"},
        "position_ids": pos_ds,
        "past_key_values": cache_ds,
    }
    args: tuple = (embeds, mask, positions.contiguous(), cache)
    if deepstack:
        image = torch.zeros((batch, seq), dtype=torch.bool)
        image[:, : min(2, seq)] = True
        features = torch.randn(deepstack, int(image.sum()), text.hidden_size, generator=gen)
        args = (*args, image, features)
        ds["visual_pos_masks"] = {0: "batch", **seq_ds}
        ds["deepstack_visual_embeds"] = {1: "n_image_tokens"}
    return args, ds


def export_parts(
    case: MultimodalCase, parts: tuple[str, ...] = ("vision", "merge", "decoder")
) -> ExportedParts:
    """Exports the parts of ``case``; raises the first export error.

    :param case: the model and its example image (``build_multimodal``)
    :param parts: the parts to export
    :return: ``ExportedParts``
    """
    result = ExportedParts()
    model = case.model
    vision = VisionEncoder(model, **case.constants)
    deepstack = 0  # decoder layers receiving vision features (Qwen3-VL)
    if vision.deepstack:
        with torch.no_grad():
            seen = vision(*case.vision_inputs.values())
        deepstack = seen[1].shape[0] if isinstance(seen, tuple) else 0
    for name in parts:
        begin = time.perf_counter()
        if name == "vision":
            onx = export_part(vision, tuple(case.vision_inputs.values()))
        elif name == "merge":
            with torch.no_grad():
                features = vision.features(*case.vision_inputs.values())
            ids = case.input_ids.expand(2, -1).contiguous()
            onx = export_part(
                EmbeddingMerge(model),
                (ids, features),
                dynamic_shapes=({0: "batch", 1: "seq"}, {0: "n_image_tokens"}),
            )
        elif name == "decoder":
            lm = language_model_with_head(model)  # BLIP-2: the language model generates
            layout = cache_layout(lm)
            # the prompt of a reference decoder comes with an empty cache
            first = {**DECODER_EXAMPLE, "past": 0} if layout == "reference" else DECODER_EXAMPLE
            args, ds = decoder_example(lm, case.mrope, **first, layout=layout, deepstack=deepstack)
            names = list(ds)
            onx = export_part(Decoder(lm), (), dynamic_shapes=ds, kwargs=dict(zip(names, args)))
            if layout in ("hybrid", "reference"):  # one new token: another path
                result.models[name] = onx
                result.times[name] = time.perf_counter() - begin
                begin = time.perf_counter()
                example: dict[str, Any] = {**DECODER_EXAMPLE, "seq": 1}
                if layout == "reference":  # a prompt and a window of distinct lengths
                    example["prefill"] = DECODER_EXAMPLE["past"] + 2
                args, ds = decoder_example(lm, case.mrope, **example, layout=layout)
                name = "decoder_step"
                onx = export_part(Decoder(lm), (), dynamic_shapes=ds, kwargs=dict(zip(names, args)))
        else:
            raise ValueError(f"unknown part {name!r}")
        result.models[name] = onx
        result.times[name] = time.perf_counter() - begin
    return result


__all__ = [
    "DECODER_EXAMPLE",
    "ExportedParts",
    "cache_layout",
    "decoder_example",
    "export_part",
    "export_parts",
]
