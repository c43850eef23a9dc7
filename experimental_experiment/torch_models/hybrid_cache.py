"""Caches of hybrid decoders: models mixing attention layers with Mamba, gated
delta-net or short-convolution layers (Jamba, Falcon-H1, LFM2, Qwen3-Next, Bamba...).

transformers gives them a ``DynamicCache`` built from the configuration, whose layers
hold keys and values, convolution and recurrent states, or both. The shapes of the
states depend on the mixer of each model, so ``make_hybrid_cache`` reads them from a
one-token run of the model (a prefill), then fills a cache of the requested batch size
and length with random values, as after a prefill: the next call is a decode step.

.. code-block:: python

    from experimental_experiment.bench.zoo_configs import tiny_config
    from experimental_experiment.torch_models.llm_helper import (
        build_causal_lm, make_llm_inputs)

    config = tiny_config("jamba")
    model = build_causal_lm(config)
    # one new token, a cache of 5 positions: conv_state_0, recurrent_state_0, key_1...
    inputs, ds = make_llm_inputs(config, batch=2, seq=1, past=5, model=model)
"""

from __future__ import annotations

import torch

#: layer types (``config.layer_types``, transformers' cache mapping) holding states
STATE_LAYER_TYPES = ("conv", "linear_attention", "hybrid", "hybrid_sliding")


def is_hybrid_config(config) -> bool:
    """True when the cache transformers builds for ``config`` has a layer holding
    convolution or recurrent states (False for a transformers without such layers)."""
    from ..torch_interpreter.patches.cache_layers import is_linear_layer

    try:
        from transformers.cache_utils import DynamicCache

        cache = DynamicCache(config=config)
    except Exception:  # noqa: BLE001 - a configuration transformers cannot map
        return False
    return any(is_linear_layer(layer) for layer in cache.layers)


def prefilled_cache(model, batch: int = 1, seq: int = 2):
    """The cache ``model`` returns after a prefill of ``seq`` zero tokens."""
    from .causal_lm import output_cache

    with torch.no_grad():
        outputs = model(input_ids=torch.zeros((batch, seq), dtype=torch.int64), use_cache=True)
    cache = output_cache(outputs)
    if cache is None:
        raise ValueError(f"{type(model).__name__} returned no cache with use_cache=True")
    return cache


def resized_leaf(
    name: str,
    like: torch.Tensor,
    batch: int,
    past: int,
    generator=None,
    prefill: int | None = None,
) -> torch.Tensor:
    """A random tensor replacing the cache leaf ``name`` shaped like ``like``: batch
    ``batch``, ``past`` positions for keys, values and indexer keys, ``prefill``
    positions (``past`` when None) for the prompt a reference sliding-window layer
    keeps apart (``prefill_key_<i>``, ``prefill_value_<i>``)."""
    from ..torch_interpreter.patches.cache_layers import leaf_kind

    kind = leaf_kind(name)
    if kind in ("prefill_key", "prefill_value"):
        shape = [batch, *like.shape[1:]]
        shape[2] = past if prefill is None else prefill
        return torch.randn(*shape, dtype=like.dtype, generator=generator)
    if kind in ("cumulative_length", "linear_length"):
        return torch.tensor(past, dtype=like.dtype)
    if kind == "indexer_position_ids":  # (position dims, batch, past)
        return torch.arange(past, dtype=like.dtype).expand(like.shape[0], batch, past).clone()
    shape = [batch, *like.shape[1:]]
    if kind in ("key", "value"):
        shape[2] = past
    elif kind == "indexer_key":
        shape[1] = past
    return torch.randn(*shape, dtype=like.dtype, generator=generator)


def _shape_donors(names: list[str], leaves: list[torch.Tensor]) -> list[torch.Tensor]:
    """The tensor whose shape each leaf takes when resized: itself, or for the 1-D empty
    keys and values of a layer holding only its prompt (the sliding window of a
    reference layer right after the prefill), the prefill keys or values of that layer."""
    by_name = dict(zip(names, leaves))
    return [
        by_name.get(f"prefill_{n}", t) if t.dim() == 1 and t.numel() == 0 else t
        for n, t in zip(names, leaves)
    ]


def make_hybrid_cache(
    config, batch: int, past: int, *, model=None, generator=None, prefill: int | None = None
):
    """A cache of the class and layers ``model`` uses (built from ``config`` with the
    seed 0 when None), as after a prefill of ``past`` tokens: random keys and values of
    ``past`` positions, random convolution and recurrent states. A layer keeping the
    prompt apart from its sliding window (reference sliding-window attention) gets
    ``prefill`` positions of prompt (``past`` when None) and ``past`` in its window."""
    from ..torch_interpreter.patches.cache_layers import flatten_cache
    from ..torch_interpreter.patches.cache_registration import cache_classes
    from .causal_lm import build_causal_lm

    if model is None:
        model = build_causal_lm(config)
    probe = prefilled_cache(model)
    leaves, names, specs = flatten_cache(probe)
    new = [
        resized_leaf(n, t, batch, past, generator, prefill=prefill)
        for n, t in zip(names, _shape_donors(names, leaves))
    ]
    _, unflatten, _ = cache_classes()[type(probe)]
    return unflatten(new, specs)
