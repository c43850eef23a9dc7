"""bypass_export_some_errors: temporary patches that make more models exportable."""

from __future__ import annotations

import contextlib
import logging
from typing import Any, Callable

import torch

logger = logging.getLogger(__name__)


def _flatten_dynamic_cache(cache):
    layers = [layer for layer in cache.layers if getattr(layer, "keys", None) is not None]
    keys = [layer.keys for layer in layers]
    values = [layer.values for layer in layers]
    return keys + values, len(keys)


def _flatten_with_keys_dynamic_cache(cache):
    leaves, n = _flatten_dynamic_cache(cache)
    names = [f"key_{i}" for i in range(n)] + [f"value_{i}" for i in range(n)]
    return [(torch.utils._pytree.MappingKey(k), v) for k, v in zip(names, leaves)], n


def _unflatten_dynamic_cache(values, n: int):
    from transformers.cache_utils import DynamicCache

    values = list(values)
    return DynamicCache(ddp_cache_data=list(zip(values[:n], values[n:])) or None)


def _register_cache_classes() -> list[type]:
    """Registers transformers' DynamicCache with torch's pytree; returns what it did."""
    try:
        from transformers.cache_utils import DynamicCache
    except ImportError:
        return []
    if DynamicCache in torch.utils._pytree.SUPPORTED_NODES:
        return []
    torch.utils._pytree.register_pytree_node(
        DynamicCache,
        _flatten_dynamic_cache,
        _unflatten_dynamic_cache,
        serialized_type_name=f"{DynamicCache.__module__}.{DynamicCache.__name__}",
        flatten_with_keys_fn=_flatten_with_keys_dynamic_cache,
    )
    return [DynamicCache]


def _identity_modificator(inputs: Any) -> Any:
    return inputs


@contextlib.contextmanager
def bypass_export_some_errors(patch_transformers: bool = False, patch_torch: bool = True,
                              verbose: int = 0) -> Callable[[Any], Any]:
    """Applies patches making models exportable, and removes them on exit.

    What it does today:

    * ``patch_transformers=True``: registers ``transformers.cache_utils.DynamicCache``
      with torch's pytree (torch.export otherwise refuses a model called with
      ``past_key_values``: *"DynamicCache is not a pytree node"*); the flattened inputs
      are named ``<arg>_key_<i>`` and ``<arg>_value_<i>``.
    * ``patch_torch``: nothing needs patching in torch 2.13 yet (kept for the API).

    The context manager yields a *modificator*, a function converting inputs into
    an exportable form (today the identity).

    .. code-block:: python

        with bypass_export_some_errors(patch_transformers=True) as modificator:
            inputs = modificator(inputs)
            onx = to_onnx(model, (), inputs, dynamic_shapes=ds)
    """
    registered: list[type] = []
    try:
        if patch_transformers:
            registered = _register_cache_classes()
            if verbose:
                logger.info("[bypass_export_some_errors] registered %s", registered)
        yield _identity_modificator
    finally:
        for cls in registered:
            torch.utils._pytree._deregister_pytree_node(cls)
