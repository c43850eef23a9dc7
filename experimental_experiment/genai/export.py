"""Loads a causal language model, checks it is a decoder with a cache, exports it with
:func:`to_onnx` (a DynamicCache, dynamic batch, sequence and cache lengths)."""

from __future__ import annotations

import contextlib
import os

from .cache_geometry import LayerCache
from .errors import NotADecoderError


def load_decoder(model):
    """``model`` itself, or the causal LM saved in the folder ``model``
    (``save_pretrained``, no download)."""
    if not isinstance(model, (str, os.PathLike)):
        return model
    path = os.fspath(model)
    if not os.path.isfile(os.path.join(path, "config.json")):
        raise NotADecoderError(
            f"{path!r} is not a folder written by save_pretrained (no config.json); give "
            "a transformers causal LM or the folder it was saved in"
        )
    import transformers

    try:
        return transformers.AutoModelForCausalLM.from_pretrained(path, local_files_only=True).eval()
    except (ValueError, KeyError) as e:  # a configuration no causal LM class maps to
        raise NotADecoderError(
            f"{path!r} holds no causal language model transformers can load "
            f"({str(e).splitlines()[0][:200]}); give a *ForCausalLM checkpoint"
        ) from e


def check_decoder(model) -> str:
    """Raises :class:`NotADecoderError` unless ``model`` is a transformers causal LM
    taking a cache; returns the name of its cache argument."""
    from ..torch_models.llm_helper import cache_argument_name

    config = getattr(model, "config", None)
    name = type(model).__name__
    if config is None or not hasattr(config, "get_text_config"):
        raise NotADecoderError(
            f"{name} is not a transformers model (no config); give a *ForCausalLM model"
        )
    if getattr(config, "is_encoder_decoder", False):
        raise NotADecoderError(
            f"{name} is an encoder-decoder; onnxruntime-genai packages here take a "
            "decoder-only *ForCausalLM model"
        )
    can_generate = getattr(model, "can_generate", None)
    if can_generate is None or not can_generate():
        raise NotADecoderError(
            f"{name} cannot generate (not a causal language model); give the "
            "*ForCausalLM class of this architecture"
        )
    try:
        return cache_argument_name(model)
    except ValueError as e:
        raise NotADecoderError(f"{name} has no recognizable cache: {e}") from e


#: tensors of a cache layer genai can feed: keys, values, indexer keys (packed with the
#: values), the sliding window of a sliding layer (a constant)
_KV_ATTRIBUTES = frozenset(
    {"keys", "values", "indexer_keys", "indexer_position_ids", "_sliding_window_tensor"}
)


def probe_cache(model) -> list[LayerCache]:
    """Runs ``model`` on two tokens and reads the cache it returns: a
    ``experimental_experiment.genai.cache_geometry.LayerCache``
    (``(key heads, key size), (value heads, value size), indexer size``) per layer.
    Raises :class:`NotADecoderError` when a layer holds something else than keys and
    values or states besides them (a state space or hybrid model), or more positions
    than tokens (virtual prompt tokens). Keys and values may differ in geometry (a
    latent attention caches a compressed latent and the rotary part of the keys), so
    may layers, and a sparse attention caches the keys of its token indexer (one head):
    the package packs and pads them to one geometry
    (``experimental_experiment.genai.cache_geometry``)."""
    import torch

    from ..torch_models.llm_helper import output_cache

    name = type(model).__name__
    ids = torch.ones((1, 2), dtype=torch.int64)
    try:
        with torch.no_grad():
            cache = output_cache(
                model(input_ids=ids, attention_mask=torch.ones_like(ids), use_cache=True)
            )
    except Exception as e:  # the eager model itself fails with a cache
        raise NotADecoderError(
            f"{name} fails in eager with use_cache=True on two tokens "
            f"({type(e).__name__}: {str(e).splitlines()[0][:200] if str(e) else ''}); "
            "genai runs the model with a cache"
        ) from e
    layers = getattr(cache, "layers", None)
    if not layers:
        hint = (
            " (its configuration says is_decoder=False: set is_decoder=True for a "
            "causal language model)"
            if getattr(getattr(model, "config", None), "is_decoder", None) is False
            else ""
        )
        raise NotADecoderError(
            f"{name} returned no cache with layers "
            f"({type(cache).__name__}){hint}; genai runs key/value caches"
        )
    shapes = []
    for i, layer in enumerate(layers):
        keys, values = getattr(layer, "keys", None), getattr(layer, "values", None)
        if (
            not isinstance(keys, torch.Tensor)
            or not isinstance(values, torch.Tensor)
            or keys.dim() != 4
            or values.dim() != 4
        ):
            raise NotADecoderError(
                f"layer {i} of the cache of {name} ({type(layer).__name__}) holds no "
                "keys and values of 4 dimensions (a state space or hybrid model); "
                "onnxruntime-genai runs decoders whose cache is keys and values only"
            )
        states = [
            a
            for a, v in vars(layer).items()
            if a not in _KV_ATTRIBUTES
            and (
                isinstance(v, torch.Tensor)
                or (isinstance(v, dict) and any(isinstance(t, torch.Tensor) for t in v.values()))
            )
        ]
        if states:
            raise NotADecoderError(
                f"layer {i} of the cache of {name} ({type(layer).__name__}) holds "
                f"{', '.join(states)} besides its keys and values (a hybrid model or "
                "a compressed cache); onnxruntime-genai runs decoders whose cache is "
                "keys and values only"
            )
        if keys.shape[2] != ids.shape[1] or values.shape[2] != ids.shape[1]:
            raise NotADecoderError(
                f"layer {i} of {name} caches {keys.shape[2]} positions for "
                f"{ids.shape[1]} tokens (virtual prompt tokens prepended to the cache); "
                "onnxruntime-genai allocates one cache position per token"
            )
        indexer = getattr(layer, "indexer_keys", None)
        size = int(indexer.shape[-1]) if isinstance(indexer, torch.Tensor) else 0
        if size and (indexer.dim() != 3 or values.shape[1] != 1):  # type: ignore[union-attr]
            raise NotADecoderError(
                f"layer {i} of {name}: indexer keys {tuple(indexer.shape)} (sparse "  # type: ignore[union-attr]
                f"attention) cannot be packed with values {tuple(values.shape)}: genai "
                "feeds two tensors per layer, the indexer keys go with values of one head"
            )
        if size and getattr(layer, "indexer_position_ids", None) is not None:
            raise NotADecoderError(
                f"layer {i} of {name} caches the positions of its indexer keys; genai "
                "feeds two tensors per layer (keys and values)"
            )
        shapes.append(
            LayerCache(
                (int(keys.shape[1]), int(keys.shape[3])),
                (int(values.shape[1]), int(values.shape[3])),
                size,
            )
        )
    return shapes


def _export_inputs(model, shapes: list[LayerCache]):
    """Batch 2, 3 new tokens, a cache of 5 positions of the probed geometry (a layer
    with indexer keys is a ``DynamicIndexedLayer``)."""
    import torch
    from transformers.cache_utils import DynamicCache, DynamicIndexedLayer, DynamicLayer

    from ..torch_models.llm_helper import cache_argument_name, make_llm_inputs

    gen = torch.Generator().manual_seed(0)
    inputs, ds = make_llm_inputs(model.config, batch=2, seq=3, past=5, model=model, generator=gen)
    cache = DynamicCache()
    for i, ((kh, ks), (vh, vs), indexer) in enumerate(shapes):
        indexed = DynamicIndexedLayer() if indexer else None
        cache.layers.append(indexed or DynamicLayer())
        cache.update(
            torch.randn(2, kh, 5, ks, generator=gen),
            torch.randn(2, vh, 5, vs, generator=gen),
            i,
        )
        if indexed is not None:
            indexed.update_indexer(torch.randn(2, 5, indexer, generator=gen))
    name = cache_argument_name(model)
    inputs[name] = cache
    # the leaves: every key, every value, then every indexer key (batch, past, size)
    ds[name] = [{0: "batch", 2: "past"} for _ in range(2 * len(shapes))] + [
        {0: "batch", 1: "past"} for s in shapes if s.indexer
    ]
    return inputs, ds


@contextlib.contextmanager
def _cache_enabled(model):
    """``use_cache=True`` in the configurations of ``model`` and its sub-models while
    the context runs: a configuration saying False (a model whose cache its own
    checkpoint disables) would make the exported graph return the logits only."""
    saved = []
    for module in model.modules():
        config = getattr(module, "config", None)
        configs = [config]
        if config is not None and hasattr(config, "get_text_config"):
            configs.append(config.get_text_config(decoder=True))
        for c in configs:
            if c is not None and getattr(c, "use_cache", None) is False:
                saved.append(c)
                c.use_cache = True
    try:
        yield
    finally:
        for c in saved:
            c.use_cache = False


def export_decoder(
    model,
    shapes: list[LayerCache],
    *,
    patterns: str = "default+onnxruntime",
    progress: bool = False,
):
    """Exports ``model`` with :func:`to_onnx` under ``bypass_export_some_errors``,
    example batch 2, 3 new tokens, a cache of 5 positions (geometry ``shapes`` from
    :func:`probe_cache`), every one of those dynamic.
    Returns the ModelProto (inputs ``input_ids``, ``attention_mask``, ``position_ids``
    when the model takes them, ``*_key_<i>``, ``*_value_<i>``); ``progress``: the
    export's progress bar (``to_onnx(progress=True)``)."""
    import torch

    from ..torch_interpreter import to_onnx
    from ..torch_interpreter.onnx_export_errors import bypass_export_some_errors
    from ..xbuilder import OptimizationOptions

    inputs, ds = _export_inputs(model, shapes)
    with (
        torch.no_grad(),
        _cache_enabled(model),
        bypass_export_some_errors(patch_transformers=True) as modificator,
    ):
        return to_onnx(
            model,
            (),
            modificator(inputs),
            dynamic_shapes=ds,
            options=OptimizationOptions(patterns=patterns),
            progress=progress,
        )


__all__ = ["check_decoder", "export_decoder", "load_decoder", "probe_cache"]
