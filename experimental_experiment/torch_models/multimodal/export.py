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
from .parts import Decoder, EmbeddingMerge, VisionEncoder

#: sizes of the random example the decoder is exported with
DECODER_EXAMPLE = dict(batch=2, seq=3, past=5)


@dataclass
class ExportedParts:
    """The ONNX models of the parts, by name (``vision``, ``merge``, ``decoder``), and
    the seconds each export took."""

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


def decoder_example(
    model, mrope: bool, batch: int = 2, seq: int = 3, past: int = 5, seed: int = 0
) -> tuple[tuple, dict]:
    """Random inputs of ``Decoder`` (``inputs_embeds``, ``attention_mask``,
    ``position_ids`` (3, batch, seq) when ``mrope``, the cache) and their dynamic shapes.
    """
    from ..llm_helper import cache_dynamic_shapes, make_dynamic_cache

    gen = torch.Generator().manual_seed(seed)
    text = model.config.get_text_config(decoder=True)
    embeds = torch.randn(batch, seq, text.hidden_size, generator=gen)
    mask = torch.ones((batch, past + seq), dtype=torch.int64)
    positions = torch.arange(past, past + seq, dtype=torch.int64).expand(batch, -1)
    pos_ds: dict[int, str] = {0: "batch", 1: "seq"}
    if mrope:
        positions = positions.unsqueeze(0).expand(3, -1, -1)
        pos_ds = {1: "batch", 2: "seq"}
    cache = make_dynamic_cache(model.config, batch, past, generator=gen)
    n_layers = len(cache.layers)
    ds = {
        "inputs_embeds": {0: "batch", 1: "seq"},
        "attention_mask": {0: "batch", 1: "total"},
        "position_ids": pos_ds,
        "past_key_values": cache_dynamic_shapes(n_layers),
    }
    return (embeds, mask, positions.contiguous(), cache), ds


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
    for name in parts:
        begin = time.perf_counter()
        if name == "vision":
            onx = export_part(vision, tuple(case.vision_inputs.values()))
        elif name == "merge":
            with torch.no_grad():
                features = vision(*case.vision_inputs.values())
            ids = case.input_ids.expand(2, -1).contiguous()
            onx = export_part(
                EmbeddingMerge(model),
                (ids, features),
                dynamic_shapes=({0: "batch", 1: "seq"}, {0: "n_image_tokens"}),
            )
        elif name == "decoder":
            args, ds = decoder_example(model, case.mrope, **DECODER_EXAMPLE)
            names = list(ds)
            onx = export_part(Decoder(model), (), dynamic_shapes=ds, kwargs=dict(zip(names, args)))
        else:
            raise ValueError(f"unknown part {name!r}")
        result.models[name] = onx
        result.times[name] = time.perf_counter() - begin
    return result


__all__ = ["DECODER_EXAMPLE", "ExportedParts", "decoder_example", "export_part", "export_parts"]
