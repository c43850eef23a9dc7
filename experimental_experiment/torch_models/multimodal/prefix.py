"""Image-text-to-text models whose image features come from a Q-Former (BLIP-2,
InstructBLIP): a fixed number of query embeddings per image, placed at image tokens the
processor of the real checkpoints inserts, then a causal language model with its own
head (``model.language_model``) generates.

Their tiny configurations have no image token id (``image_token_index`` is None, the id
of the real checkpoints is a token added to the tokenizer); InstructBLIP's Q-Former also
reads the text prompt (``qformer_input_ids``), a constant of the vision part here.

.. code-block:: python

    case = build_multimodal("blip-2")  # prepare_config gave it an image token
    parts = export_parts(case)          # the decoder is model.language_model
"""

from __future__ import annotations

import inspect
from typing import Any

import torch


def prepare_config(config) -> None:
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
    if isinstance(lm, torch.nn.Module) and lm.get_output_embeddings() is not None:
        return lm
    return model


__all__ = ["language_model_with_head", "prepare_config", "qformer_constants"]
