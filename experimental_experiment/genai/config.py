"""Writes ``genai_config.json``, the file onnxruntime-genai reads next to the model:
the decoder's geometry from the transformers configuration, the names of the model's
inputs and outputs, and the default search options (greedy)."""

from __future__ import annotations

import json
import os
from typing import Any

from .io_names import PAST_KEY, PAST_VALUE, PRESENT_KEY, PRESENT_VALUE

#: model types onnxruntime-genai 0.18 runs as a decoder (``model.type``)
GENAI_DECODER_TYPES = frozenset(
    {
        "chatglm",
        "ernie4_5",
        "gemma",
        "gemma2",
        "gemma3_text",
        "gpt2",
        "granite",
        "llama",
        "mistral",
        "nemotron",
        "olmo",
        "phi",
        "phi3",
        "qwen2",
        "qwen3",
        "smollm3",
    }
)
#: types genai runs with another cache layout than one key and one value per layer
GENAI_OTHER_LAYOUT = {
    "gpt2": "genai's gpt2 type reads one combined key/value input per layer",
}


def decoder_geometry(config) -> dict[str, int]:
    """Layers, heads, key/value heads, head size, hidden size and vocabulary of the
    decoder described by a transformers configuration."""
    text = config.get_text_config(decoder=True)
    heads = text.num_attention_heads
    kv = getattr(text, "num_key_value_heads", None) or heads
    head_size = getattr(text, "head_dim", None) or text.hidden_size // heads
    return dict(
        num_hidden_layers=text.num_hidden_layers,
        num_attention_heads=heads,
        num_key_value_heads=kv,
        head_size=head_size,
        hidden_size=text.hidden_size,
        vocab_size=text.vocab_size,
    )


def _token_ids(config) -> tuple[Any, Any, Any]:
    """(bos, eos, pad): eos may be a list, pad defaults to the first eos."""
    text = config.get_text_config(decoder=True)
    bos, eos = getattr(text, "bos_token_id", None), getattr(text, "eos_token_id", None)
    pad = getattr(text, "pad_token_id", None)
    first_eos = eos[0] if isinstance(eos, (list, tuple)) and eos else eos
    if pad is None:
        pad = first_eos if first_eos is not None else 0
    if eos is None:
        eos = pad
    if bos is None:
        bos = first_eos if first_eos is not None else 0
    return bos, list(eos) if isinstance(eos, (list, tuple)) else eos, pad


def genai_config(
    config,
    input_names: list[str],
    *,
    model_type: str,
    filename: str = "model.onnx",
    context_length: int | None = None,
    search: dict | None = None,
    geometry: dict | None = None,
    share_buffer: bool = False,
) -> dict:
    """The content of genai_config.json.

    :param config: the transformers configuration of the decoder
    :param input_names: the inputs of the renamed model (``position_ids`` is mapped
        only when the model has it)
    :param model_type: ``model.type`` (a type of :data:`GENAI_DECODER_TYPES`)
    :param filename: the model file, relative to the package folder
    :param context_length: the longest sequence (default ``max_position_embeddings``)
    :param search: search options replacing the defaults (greedy, the buffer shared
        as ``share_buffer`` says)
    :param geometry: values replacing those of :func:`decoder_geometry` (the cache
        the model returns says how many layers, key/value heads and head size it has)
    :param share_buffer: ``past_present_share_buffer``: genai gives the model past
        inputs of ``max_length`` positions, the model writes the new positions in them;
        true only for a graph which reads the cache length from ``attention_mask``
        (see ``experimental_experiment.genai.share_buffer``)
    :return: a dictionary ready for :func:`json.dump`
    """
    geo = {**decoder_geometry(config), **(geometry or {})}
    text = config.get_text_config(decoder=True)
    if context_length is None:
        context_length = (
            getattr(text, "max_position_embeddings", None)
            or getattr(text, "n_positions", None)
            or 2048
        )
    bos, eos, pad = _token_ids(config)
    inputs = {k: k for k in ("input_ids", "attention_mask", "position_ids") if k in input_names}
    inputs.update(past_key_names=PAST_KEY, past_value_names=PAST_VALUE)
    options = dict(
        diversity_penalty=0.0,
        do_sample=False,
        early_stopping=True,
        length_penalty=1.0,
        max_length=context_length,
        min_length=0,
        no_repeat_ngram_size=0,
        num_beams=1,
        num_return_sequences=1,
        past_present_share_buffer=bool(share_buffer),
        repetition_penalty=1.0,
        temperature=1.0,
        top_k=1,
        top_p=1.0,
    )
    options.update(search or {})
    decoder = dict(
        session_options=dict(log_id="onnxruntime-genai", provider_options=[]),
        filename=filename,
        head_size=geo["head_size"],
        hidden_size=geo["hidden_size"],
        inputs=inputs,
        outputs=dict(
            logits="logits", present_key_names=PRESENT_KEY, present_value_names=PRESENT_VALUE
        ),
        num_attention_heads=geo["num_attention_heads"],
        num_hidden_layers=geo["num_hidden_layers"],
        num_key_value_heads=geo["num_key_value_heads"],
    )
    return dict(
        model=dict(
            bos_token_id=bos,
            context_length=int(context_length),
            decoder=decoder,
            eos_token_id=eos,
            pad_token_id=pad,
            type=model_type,
            vocab_size=geo["vocab_size"],
        ),
        search=options,
    )


def write_genai_config(content: dict, folder: str) -> str:
    """Writes ``content`` to ``folder/genai_config.json``; returns the path."""
    path = os.path.join(folder, "genai_config.json")
    with open(path, "w", encoding="utf-8") as f:
        json.dump(content, f, indent=2, sort_keys=False)
        f.write("\n")
    return path


__all__ = [
    "GENAI_DECODER_TYPES",
    "GENAI_OTHER_LAYOUT",
    "decoder_geometry",
    "genai_config",
    "write_genai_config",
]
