"""Tiny transformers models built from a configuration (random weights, no download),
with inputs, a cache of a chosen length and the matching ``dynamic_shapes``.

.. code-block:: python

    from experimental_experiment.torch_models.llm_helper import get_tiny_llm

    data = get_tiny_llm("llama")
    model, inputs, ds = data["model"], data["inputs"], data["dynamic_shapes"]
    with bypass_export_some_errors(patch_transformers=True) as modificator:
        onx = to_onnx(model, (), modificator(inputs), dynamic_shapes=ds)
"""

from __future__ import annotations

import inspect
from typing import Any

import torch

from ..torch_interpreter.patches.cache_registration import CACHE_ARGUMENT_NAMES
from .causal_lm import _causal_lm_class, build_causal_lm, output_cache  # noqa: F401 (re-exported)
from .hybrid_cache import is_hybrid_config, make_hybrid_cache

#: architectures :func:`get_tiny_llm` knows, and the kind of model each one is
TINY_ARCHITECTURES = {
    "llama": "decoder",
    "mistral": "decoder",
    "qwen2": "decoder",
    "qwen3": "decoder",
    "phi3": "decoder",
    "gemma2": "decoder",
    "gemma3": "decoder",
    "gpt2": "decoder",
    "gpt_neox": "decoder",
    "bert": "encoder",
    "t5": "encoder-decoder",
    "vit": "vision",
}

_COMMON = dict(
    hidden_size=32,
    num_hidden_layers=2,
    num_attention_heads=4,
    vocab_size=1000,
    intermediate_size=64,
    max_position_embeddings=128,
)

_SPECIFIC: dict[str, dict] = {
    "llama": dict(num_key_value_heads=2),
    "mistral": dict(num_key_value_heads=2, sliding_window=4096),
    "qwen2": dict(num_key_value_heads=2),
    "qwen3": dict(num_key_value_heads=2, head_dim=8),
    "phi3": dict(num_key_value_heads=2, pad_token_id=0, bos_token_id=1, eos_token_id=2),
    "gemma2": dict(num_key_value_heads=2, head_dim=8, sliding_window=4096),
    "gemma3_text": dict(
        num_key_value_heads=2,
        head_dim=8,
        sliding_window=4096,
        layer_types=["sliding_attention", "full_attention"],
    ),
    "gpt2": dict(bos_token_id=0, eos_token_id=0, n_inner=64),
    "gpt_neox": dict(),
    "bert": dict(),
    "t5": dict(
        d_model=32,
        d_kv=8,
        d_ff=64,
        num_layers=2,
        num_decoder_layers=2,
        num_heads=4,
        decoder_start_token_id=0,
        pad_token_id=0,
        eos_token_id=1,
    ),
    "vit": dict(image_size=16, patch_size=8, num_channels=3),
}


def get_tiny_config(arch: str, **kwargs):
    """A small configuration (2 layers, hidden size 32, vocabulary 1000) for ``arch``."""
    from transformers import AutoConfig

    model_type = "gemma3_text" if arch == "gemma3" else arch
    if arch not in TINY_ARCHITECTURES:
        raise ValueError(
            f"unknown architecture {arch!r}, expected one of {list(TINY_ARCHITECTURES)}"
        )
    params = dict(_COMMON)
    if arch == "t5":
        params = {k: v for k, v in params.items() if k == "vocab_size"}
    params.update(_SPECIFIC[model_type])
    params.update(kwargs)
    config = AutoConfig.for_model(model_type, **params)
    # gemma2 has no sdpa implementation (soft-capping of the attention scores)
    config._attn_implementation = "eager" if arch == "gemma2" else "sdpa"
    return config


def _model_class(arch: str):
    import transformers

    kind = TINY_ARCHITECTURES[arch]
    if kind == "decoder":
        return transformers.AutoModelForCausalLM
    if kind == "encoder-decoder":
        return transformers.AutoModelForSeq2SeqLM
    return transformers.AutoModel


def _forward_parameters(model) -> set[str]:
    return set(inspect.signature(model.forward).parameters)


def cache_argument_name(model) -> str:
    """The name of the argument of ``model.forward`` (a model or a model class) that takes
    the cache: ``cache`` (transformers >= 5.24) or ``past_key_values`` (older releases).
    Read from the signature, not from version numbers.

    :param model: a transformers model, or its class
    :return: ``"cache"`` or ``"past_key_values"``, ValueError if ``forward`` takes none

    .. code-block:: python

        name = cache_argument_name(model)
        outputs = model(input_ids, **{name: cache})
    """
    params = _forward_parameters(model)
    for name in CACHE_ARGUMENT_NAMES:
        if name in params:
            return name
    cls = model if isinstance(model, type) else type(model)
    raise ValueError(
        f"{cls.__name__}.forward takes no cache argument (looked for "
        f"{list(CACHE_ARGUMENT_NAMES)}), its arguments are {sorted(params - {'self'})}"
    )


def _cache_geometry(config) -> tuple[int, int, int]:
    """(number of layers, number of key/value heads, head dimension)."""
    text = config.get_text_config(decoder=True)
    n_layers = getattr(text, "num_decoder_layers", None) or text.num_hidden_layers
    n_heads = text.num_attention_heads
    n_kv = getattr(text, "num_key_value_heads", None) or getattr(text, "num_kv_heads", None)
    if not n_kv:
        n_kv = 1 if getattr(text, "multi_query", False) else n_heads
    head_dim = (
        getattr(text, "head_dim", None)
        or getattr(text, "d_kv", None)
        or (text.hidden_size // n_heads)
    )
    return n_layers, n_kv, head_dim


def make_dynamic_cache(config, batch: int, past: int, *, dtype=torch.float32, generator=None):
    """A DynamicCache with ``past`` random positions for every layer of ``config``.

    Every layer is a full ``DynamicLayer``, sliding-window layers included: this is the
    form an exported model takes and returns (transformers' export patches trace
    sliding layers as full layers, the attention mask still applies the window), and
    eager gives the same results with it.
    """
    from transformers.cache_utils import DynamicCache

    n_layers, n_kv, head_dim = _cache_geometry(config)
    cache = DynamicCache()
    for i in range(n_layers):
        shape = (batch, n_kv, past, head_dim)
        cache.update(
            torch.randn(*shape, dtype=dtype, generator=generator),
            torch.randn(*shape, dtype=dtype, generator=generator),
            i,
        )
    return cache


def cache_dynamic_shapes(n_layers: int, batch="batch", past="past") -> list[dict]:
    """dynamic_shapes of a DynamicCache: keys of every layer then values of every layer."""
    return [{0: batch, 2: past} for _ in range(2 * n_layers)]


#: dynamic axes of every kind of cache leaf (``cache_layers.LEAF_KINDS``), the others
#: have a dynamic batch only
_LEAF_DYNAMIC_AXES = {
    "key": {0: "batch", 2: "past"},
    "value": {0: "batch", 2: "past"},
    "cumulative_length": {},
    "linear_length": {},
    "indexer_key": {0: "batch", 1: "past"},
    "indexer_position_ids": {1: "batch", 2: "past"},
    "prefill_key": {0: "batch", 2: "prefill"},
    "prefill_value": {0: "batch", 2: "prefill"},
}


def dynamic_shapes_of_cache(cache, batch="batch", past="past", prefill="prefill") -> list[dict]:
    """dynamic_shapes of any DynamicCache, one entry per tensor in the order torch.export
    flattens it (:func:`cache_leaf_names
    <experimental_experiment.torch_interpreter.patches.cache_registration.cache_leaf_names>`):
    keys and values ``{0: batch, 2: past}``, convolution and recurrent states
    ``{0: batch}`` (their other dimensions are fixed by the model), indexer keys
    ``{0: batch, 1: past}``, the prompt a reference sliding-window layer keeps apart
    ``{0: batch, 2: prefill}``. A name given as None leaves its axes static (an empty
    cache before the prompt)."""
    from ..torch_interpreter.patches.cache_layers import leaf_kind
    from ..torch_interpreter.patches.cache_registration import cache_leaf_names

    names = {"batch": batch, "past": past, "prefill": prefill}
    return [
        {
            axis: names[dim]
            for axis, dim in _LEAF_DYNAMIC_AXES.get(leaf_kind(leaf), {0: "batch"}).items()
            if names[dim] is not None
        }
        for leaf in cache_leaf_names(cache)
    ]


def make_llm_inputs(
    config,
    batch: int = 2,
    seq: int = 3,
    past: int = 5,
    *,
    with_cache: bool = True,
    model=None,
    generator=None,
) -> tuple[dict, dict]:
    """Inputs and dynamic shapes for a decoder described by ``config``.

    Returns ``(inputs, dynamic_shapes)``: ``input_ids`` (batch, seq), ``attention_mask``
    (batch, past + seq), ``position_ids`` (batch, seq) when ``model`` takes them (or
    ``model`` is None), and a DynamicCache of length ``past`` under the name the model's
    forward takes (:func:`cache_argument_name`: ``cache`` or ``past_key_values``; the
    causal LM class of ``config`` is looked at when ``model`` is None).
    Dimensions are named ``batch``, ``seq``, ``past`` and ``total`` (= past + seq).
    ``seq=1`` gives a decode step: the sequence dimension is left static (torch.export
    specializes a dynamic dimension of size 1; hybrid decoders take another path for one
    token). Other sizes of 1 are avoided by the caller.

    :param config: the transformers configuration of the decoder
    :param batch: batch size
    :param seq: number of new tokens
    :param past: cache length (0 when ``with_cache`` is False)
    :param with_cache: adds a DynamicCache, with the layers the model needs for a
        hybrid decoder (``make_hybrid_cache``)
    :param model: the model the inputs are for (None: the causal LM class of ``config``)
    :param generator: a ``torch.Generator`` for the random tokens and cache
    :return: ``(inputs, dynamic_shapes)``

    .. code-block:: python

        from experimental_experiment.torch_interpreter import to_onnx
        from experimental_experiment.torch_interpreter.onnx_export_errors import (
            bypass_export_some_errors)
        from experimental_experiment.torch_models.llm_helper import (
            build_causal_lm, get_tiny_config, make_llm_inputs)

        config = get_tiny_config("llama")
        model = build_causal_lm(config)
        inputs, ds = make_llm_inputs(config, batch=2, seq=3, past=5, model=model)
        # the dimensions are named with strings, which to_onnx takes
        with bypass_export_some_errors(patch_transformers=True) as modificator:
            onx = to_onnx(model, (), modificator(inputs), dynamic_shapes=ds)
    """
    past = past if with_cache else 0
    params = _forward_parameters(model) if model is not None else None
    vocab = config.get_text_config(decoder=True).vocab_size
    inputs: dict[str, Any] = {
        "input_ids": torch.randint(0, vocab, (batch, seq), generator=generator),
        "attention_mask": torch.ones((batch, past + seq), dtype=torch.int64),
    }
    ds: dict[str, Any] = {
        "input_ids": {0: "batch", 1: "seq"},
        "attention_mask": {0: "batch", 1: "total"},
    }
    if params is None or "position_ids" in params:
        inputs["position_ids"] = (
            torch.arange(past, past + seq, dtype=torch.int64).expand(batch, -1).contiguous()
        )
        ds["position_ids"] = {0: "batch", 1: "seq"}
    if seq == 1:  # a decode step: a dynamic dimension of size 1 would be specialized
        ds["input_ids"] = {0: "batch"}
        if "position_ids" in ds:
            ds["position_ids"] = {0: "batch"}
    if with_cache:
        name = cache_argument_name(model if model is not None else _causal_lm_class(config))
        if is_hybrid_config(config):
            cache = make_hybrid_cache(config, batch, past, model=model, generator=generator)
            inputs[name] = cache
            ds[name] = dynamic_shapes_of_cache(cache)
        else:
            inputs[name] = make_dynamic_cache(config, batch, past, generator=generator)
            ds[name] = cache_dynamic_shapes(_cache_geometry(config)[0])
    return inputs, ds


def _encoder_inputs(arch, config, batch, seq, generator):
    if arch == "vit":
        size = config.image_size
        return (
            {
                "pixel_values": torch.randn(
                    batch, config.num_channels, size, size, generator=generator
                )
            },
            {"pixel_values": {0: "batch"}},
        )
    inputs = {
        "input_ids": torch.randint(0, config.vocab_size, (batch, seq), generator=generator),
        "attention_mask": torch.ones((batch, seq), dtype=torch.int64),
    }
    return inputs, {"input_ids": {0: "batch", 1: "seq"}, "attention_mask": {0: "batch", 1: "seq"}}


def make_seq2seq_inputs(
    config,
    batch: int = 2,
    seq: int = 3,
    past: int = 5,
    *,
    with_cache: bool = True,
    model,
    generator=None,
) -> tuple[dict, dict]:
    """Inputs and dynamic shapes for an encoder-decoder (T5-like): ``seq + 2`` encoder
    tokens, ``seq`` decoder tokens and, with a cache, an EncoderDecoderCache (``past``
    self-attention positions) under the name ``model``'s forward takes.

    :param config: the transformers configuration of the model
    :param batch: batch size
    :param seq: number of decoder tokens
    :param past: length of the self-attention cache
    :param with_cache: adds an EncoderDecoderCache
    :param model: the model the inputs are for
    :param generator: a ``torch.Generator`` for the random tokens and cache
    :return: ``(inputs, dynamic_shapes)``

    .. code-block:: python

        inputs, ds = make_seq2seq_inputs(model.config, 2, 3, 5, model=model)
        with bypass_export_some_errors(patch_transformers=True) as modificator:
            onx = to_onnx(model, (), modificator(inputs), dynamic_shapes=ds)
    """
    from transformers.cache_utils import DynamicCache, EncoderDecoderCache

    enc = seq + 2
    inputs = {
        "input_ids": torch.randint(0, config.vocab_size, (batch, enc), generator=generator),
        "attention_mask": torch.ones((batch, enc), dtype=torch.int64),
        "decoder_input_ids": torch.randint(0, config.vocab_size, (batch, seq), generator=generator),
    }
    ds: dict[str, Any] = {
        "input_ids": {0: "batch", 1: "encoder_seq"},
        "attention_mask": {0: "batch", 1: "encoder_seq"},
        "decoder_input_ids": {0: "batch", 1: "seq"},
    }
    if with_cache:
        n_layers, n_kv, head_dim = _cache_geometry(config)
        self_cache, cross_cache = DynamicCache(), DynamicCache()
        for i in range(n_layers):
            for cache, length in ((self_cache, past), (cross_cache, enc)):
                shape = (batch, n_kv, length, head_dim)
                cache.update(
                    torch.randn(*shape, generator=generator),
                    torch.randn(*shape, generator=generator),
                    i,
                )
        name = cache_argument_name(model)
        inputs[name] = EncoderDecoderCache(self_cache, cross_cache)
        ds[name] = [
            cache_dynamic_shapes(n_layers, past="past"),
            cache_dynamic_shapes(n_layers, past="encoder_seq"),
        ]
    return inputs, ds


def get_tiny_llm(
    arch: str,
    *,
    batch: int = 2,
    seq: int = 3,
    past: int = 5,
    with_cache: bool = True,
    seed: int = 0,
    config_kwargs: dict | None = None,
) -> dict[str, Any]:
    """A tiny model of architecture ``arch`` with random weights and its inputs.

    :param arch: one of :data:`TINY_ARCHITECTURES`
    :param batch: batch size
    :param seq: number of new tokens
    :param past: cache length
    :param with_cache: gives a cache (decoders, encoder-decoders) under the name the
        model's forward takes (:func:`cache_argument_name`)
    :param seed: seed of the random weights and inputs
    :param config_kwargs: values replacing those of the tiny configuration
        (see ``get_tiny_config``)
    :return: ``dict(model=..., inputs=..., dynamic_shapes=..., config=...)``, the model in
        eval mode; ``with_cache`` is ignored for encoders and vision models

    .. code-block:: python

        from experimental_experiment.torch_interpreter import to_onnx
        from experimental_experiment.torch_interpreter.onnx_export_errors import (
            bypass_export_some_errors)
        from experimental_experiment.torch_models.llm_helper import get_tiny_llm

        data = get_tiny_llm("llama", batch=2, seq=3, past=5)
        with bypass_export_some_errors(patch_transformers=True) as modificator:
            onx = to_onnx(data["model"], (), modificator(data["inputs"]),
                          dynamic_shapes=data["dynamic_shapes"])
    """
    torch.manual_seed(seed)
    generator = torch.Generator().manual_seed(seed)
    config = get_tiny_config(arch, **(config_kwargs or {}))
    model = _model_class(arch).from_config(config).eval()
    kind = TINY_ARCHITECTURES[arch]
    if kind == "decoder":
        inputs, ds = make_llm_inputs(
            config, batch, seq, past, with_cache=with_cache, model=model, generator=generator
        )
    elif kind == "encoder-decoder":
        inputs, ds = make_seq2seq_inputs(
            config, batch, seq, past, with_cache=with_cache, model=model, generator=generator
        )
    else:
        inputs, ds = _encoder_inputs(arch, config, batch, seq, generator)
    return dict(model=model, inputs=inputs, dynamic_shapes=ds, config=config)
