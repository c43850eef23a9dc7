"""Registers transformers' cache classes with torch's pytree, for a while.

torch.export only takes inputs it can flatten into tensors: without a registration it
fails with *"... DynamicCache ... is not a pytree node"* (or *"Unsupported input type"*).
transformers ships ``register_cache_pytrees_for_model`` but it registers for good (no
way back), and names the leaves by position (``past_key_values_0``...). The
registration here is removed on exit, restores any registration made before (by
transformers itself for example), and names the leaves after the layer index
(``key_<i>``, ``value_<i>``, ``conv_state_<i>``, ``recurrent_state_<i>``,
``prefill_key_<i>``..., see :mod:`.cache_layers`) so the ONNX inputs read
``past_key_values_key_0``.
"""

from __future__ import annotations

import contextlib
from typing import Any

from torch.utils import _pytree

from .cache_layers import UnknownCacheError, flatten_cache, unflatten_cache_parts

__all__ = [
    "CACHE_ARGUMENT_NAMES",
    "CACHE_INPUT_PREFIX",
    "UnknownCacheError",
    "cache_classes",
    "cache_leaf_names",
    "register_cache_classes",
]

#: names of the forward argument holding the cache, newest first: transformers 5.24
#: renamed ``past_key_values`` into ``cache`` (forward arguments and output fields);
#: ``cache_params`` is the name Mamba, Mamba2 and FalconMamba use
CACHE_ARGUMENT_NAMES = ("cache", "past_key_values", "cache_params")

#: prefix of the ONNX inputs of a cache, whatever the argument is called: a user's
#: onnxruntime feeding code does not change with the transformers release
CACHE_INPUT_PREFIX = "past_key_values"


def is_transformers_cache(value) -> bool:
    """True for an instance of transformers' ``Cache`` (transformers is not imported
    if the caller has not imported it)."""
    import sys

    module = sys.modules.get("transformers.cache_utils")
    return module is not None and isinstance(value, getattr(module, "Cache", ()))


def cache_input_renames(arg_names: list[str], values: list) -> dict[str, str]:
    """``{argument name: ONNX input prefix}`` for the arguments holding a transformers
    cache under another name than :data:`CACHE_INPUT_PREFIX` (``cache`` since
    transformers 5.24): their ONNX inputs keep the names ``past_key_values_key_<i>``."""
    return {
        name: CACHE_INPUT_PREFIX
        for name, value in zip(arg_names, values)
        if name in CACHE_ARGUMENT_NAMES
        and name != CACHE_INPUT_PREFIX
        and is_transformers_cache(value)
    }


def _is_static_layer(cls) -> bool:
    from transformers.cache_utils import StaticLayer

    return issubclass(cls, StaticLayer)


# DynamicCache, StaticCache and their subclasses (one function per layer kind in
# :mod:`.cache_layers`: attention, linear attention, hybrid, dummy)


def _flatten_cache(cache):
    leaves, _, context = flatten_cache(cache)
    return leaves, context


def _flatten_with_keys_cache(cache):
    leaves, names, context = flatten_cache(cache)
    return [(_pytree.MappingKey(k), v) for k, v in zip(names, leaves)], context


def cache_leaf_names(cache) -> list[str]:
    """Names of the tensors of a DynamicCache or StaticCache in the order torch.export
    flattens them (``key_<i>``..., ``value_<i>``..., ``conv_state_<i>``...,
    ``recurrent_state_<i>``...), ``<i>`` the index of the layer."""
    return flatten_cache(cache)[1]


def _make_unflatten(cls):
    def unflatten(values, context):
        from transformers.cache_utils import Cache, DynamicLayer

        cache = cls.__new__(cls)
        layers, lists = unflatten_cache_parts(list(values), context)
        if _is_static_layer_list(context.layers):
            Cache.__init__(cache, layers=layers)
        else:
            Cache.__init__(cache, layer_class_to_replicate=DynamicLayer)
            cache.layers = layers
        cache.__dict__.update(lists)
        return cache

    return unflatten


def _is_static_layer_list(context) -> bool:
    return bool(context) and all(_is_static_layer(spec.cls) for spec in context)


# EncoderDecoderCache: two caches


def _flatten_encoder_decoder(cache):
    return [cache.self_attention_cache, cache.cross_attention_cache], None


def _flatten_with_keys_encoder_decoder(cache):
    children, context = _flatten_encoder_decoder(cache)
    keys = ["self_attention_cache", "cross_attention_cache"]
    return [(_pytree.MappingKey(k), v) for k, v in zip(keys, children)], context


def _unflatten_encoder_decoder(values, context):
    from transformers.cache_utils import EncoderDecoderCache

    return EncoderDecoderCache(*values)


# VoxtralRealtimeConv1dPaddingCache: one padding tensor per causal convolution

#: module of the padding cache (not a ``Cache``) VoxtralRealtime returns with a cache
_VOXTRAL_REALTIME = "transformers.models.voxtral_realtime.modeling_voxtral_realtime"

#: padding cache layer attributes which are not part of the context
_PADDING_DERIVED = {"cache", "is_initialized"}


def _flatten_padding_cache(cache):
    """Leaves: the padding tensor of every initialized convolution, named after its
    ``cache_key``; context: the keys and the other (int) attributes of the layers."""
    layers = {k: v for k, v in cache.layers.items() if v.cache is not None}
    context = tuple(
        (key, tuple(sorted((n, v) for n, v in vars(layer).items() if n not in _PADDING_DERIVED)))
        for key, layer in layers.items()
    )
    return [layer.cache for layer in layers.values()], context


def _flatten_with_keys_padding_cache(cache):
    leaves, context = _flatten_padding_cache(cache)
    return [(_pytree.MappingKey(k), v) for (k, _), v in zip(context, leaves)], context


def _make_unflatten_padding_cache(cls):
    def unflatten(values, context):
        cache = cls()
        for value, (key, state) in zip(values, context):
            cache.layers[key] = layer = _new_padding_layer()
            layer.__dict__.update(dict(state), cache=value, is_initialized=True)
        return cache

    return unflatten


def _new_padding_layer():
    import sys

    return sys.modules[_VOXTRAL_REALTIME].VoxtralRealtimeConv1dCacheLayer()


def _padding_cache_classes() -> dict[type, tuple]:
    """VoxtralRealtime's padding cache when its module is imported (a model of this type
    exists; importing it for nothing takes seconds)."""
    import sys

    cls = getattr(sys.modules.get(_VOXTRAL_REALTIME), "VoxtralRealtimeConv1dPaddingCache", None)
    if cls is None:
        return {}
    return {
        cls: (
            _flatten_padding_cache,
            _make_unflatten_padding_cache(cls),
            _flatten_with_keys_padding_cache,
        )
    }


def cache_classes() -> dict[type, tuple]:
    """The cache classes of the installed transformers this module can register,
    ``{class: (flatten, unflatten, flatten_with_keys)}``: DynamicCache, StaticCache,
    EncoderDecoderCache and their subclasses when they exist (feature checks),
    VoxtralRealtime's padding cache when its module is imported."""
    try:
        from transformers import cache_utils
    except ImportError:
        return {}
    out: dict[type, tuple] = {}
    for name in ("DynamicCache", "StaticCache"):
        base = getattr(cache_utils, name, None)
        if base is None:
            continue
        for cls in [base, *_subclasses(base)]:
            out[cls] = (_flatten_cache, _make_unflatten(cls), _flatten_with_keys_cache)
    edc = getattr(cache_utils, "EncoderDecoderCache", None)
    if edc is not None:
        out[edc] = (
            _flatten_encoder_decoder,
            _unflatten_encoder_decoder,
            _flatten_with_keys_encoder_decoder,
        )
    out.update(_padding_cache_classes())
    return out


def _subclasses(cls) -> list[type]:
    out = []
    for sub in cls.__subclasses__():
        out.append(sub)
        out.extend(_subclasses(sub))
    return out


def check_cache_inputs(value: Any, known: dict[type, tuple]) -> None:
    """Raises :class:`UnknownCacheError` naming the class when an input is a
    transformers cache this module does not know."""
    try:
        from transformers.cache_utils import Cache
    except ImportError:
        return
    stack = [value]
    while stack:
        obj = stack.pop()
        if isinstance(obj, Cache) and type(obj) not in known:
            raise UnknownCacheError(
                f"cache class {type(obj).__module__}.{type(obj).__name__} is not supported by "
                f"bypass_export_some_errors (known: {sorted(c.__name__ for c in known)})"
            )
        if isinstance(obj, dict):
            stack.extend(obj.values())
        elif isinstance(obj, (list, tuple)):
            stack.extend(obj)


def _save_registration(cls) -> Any:
    """What torch's pytree holds for ``cls`` (None when not registered)."""
    if cls not in _pytree.SUPPORTED_NODES:
        return None
    return _pytree.SUPPORTED_NODES[cls], _pytree.SUPPORTED_SERIALIZED_TYPES.get(cls)


def _restore_registration(cls, saved) -> None:
    if cls in _pytree.SUPPORTED_NODES:
        _pytree._deregister_pytree_node(cls)
    if saved is None:
        return
    node, serialized = saved
    with _pytree._NODE_REGISTRY_LOCK:
        _pytree.SUPPORTED_NODES[cls] = node
        if serialized is not None:
            _pytree.SUPPORTED_SERIALIZED_TYPES[cls] = serialized
            _pytree.SERIALIZED_TYPE_TO_PYTHON_TYPE[serialized.serialized_type_name] = cls


def _serialized_name(cls) -> str:
    return f"{cls.__module__}.{cls.__qualname__}"


@contextlib.contextmanager
def register_cache_classes(verbose: int = 0):
    """Registers every class of :func:`cache_classes` while the context is active,
    yields the dictionary of the classes; on exit, restores what was registered before."""
    known = cache_classes()
    saved: dict[type, Any] = {}
    try:
        for cls, (flatten, unflatten, with_keys) in known.items():
            saved[cls] = _save_registration(cls)
            if saved[cls] is not None:
                _pytree._deregister_pytree_node(cls)
            _pytree.register_pytree_node(
                cls,
                flatten,
                unflatten,
                serialized_type_name=_serialized_name(cls),
                flatten_with_keys_fn=with_keys,
            )
        yield known
    finally:
        for cls, node in saved.items():
            _restore_registration(cls, node)
