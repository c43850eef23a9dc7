"""bypass_export_some_errors: temporary patches that make more models exportable."""

from __future__ import annotations

import contextlib
import logging
from typing import Any, Callable

import torch

from .patches.cache_registration import (
    CACHE_ARGUMENT_NAMES,
    UnknownCacheError,
    check_cache_inputs,
    register_cache_classes,
)
from .patches.shared import shared_patches

logger = logging.getLogger(__name__)

__all__ = ["UnknownCacheError", "bypass_export_some_errors"]


def _legacy_cache_to_dynamic(value):
    """``((key_0, value_0), (key_1, value_1), ...)`` -> DynamicCache."""
    from transformers.cache_utils import DynamicCache

    cache = DynamicCache()
    for i, (k, v) in enumerate(value):
        cache.update(k, v, i)
    return cache


def _is_legacy_cache(value) -> bool:
    return (
        isinstance(value, (tuple, list))
        and len(value) > 0
        and all(isinstance(kv, (tuple, list)) and len(kv) == 2 for kv in value)
        and all(isinstance(t, torch.Tensor) and t.dim() == 4 for kv in value for t in kv)
    )


def _make_modificator(known: dict[type, tuple]) -> Callable[[Any], Any]:
    """A function converting inputs into an exportable form:

    * a cache given as a tuple of ``(key, value)`` pairs under ``past_key_values`` or
      ``cache`` (the name since transformers 5.24) becomes a ``DynamicCache``
      (torch.export sees a registered class),
    * a registered cache is copied (flattened then rebuilt, tensors shared) so that
      running or exporting the model does not grow the user's cache,
    * an unknown transformers cache raises :class:`UnknownCacheError` naming the class.
    """

    def convert(value, key=None):
        if isinstance(value, dict):
            return {k: convert(v, k) for k, v in value.items()}
        if key in CACHE_ARGUMENT_NAMES and _is_legacy_cache(value):
            return convert(_legacy_cache_to_dynamic(value))
        if type(value) in known:
            flatten, unflatten, _ = known[type(value)]
            children, context = flatten(value)
            return unflatten([convert(c) for c in children], context)
        if isinstance(value, (list, tuple)) and not hasattr(value, "_fields"):
            return type(value)(convert(v) for v in value)
        return value

    def modificator(inputs: Any) -> Any:
        inputs = convert(inputs)
        check_cache_inputs(inputs, known)
        return inputs

    return modificator


@contextlib.contextmanager
def bypass_export_some_errors(
    patch_transformers: bool = False, patch_torch: bool = True, verbose: int = 0
) -> Callable[[Any], Any]:
    """Applies patches making models exportable, and removes them all on exit (even on
    an exception). Works with :func:`torch.export.export`,
    :func:`to_onnx <experimental_experiment.torch_interpreter.to_onnx>` and
    :func:`torch.onnx.export`.

    :param patch_transformers: registers transformers' caches with torch's pytree and
        applies the patches of transformers and ours to transformers' models (below)
    :param patch_torch: applies our patches to torch (below)
    :param verbose: logs the patches applied and removed and the caches registered
        (the package's logger)
    :return: a context manager yielding the *modificator* described below

    * ``patch_transformers=True``:

      - registers transformers' cache classes with torch's pytree (``DynamicCache``,
        ``StaticCache``, ``EncoderDecoderCache`` and their subclasses that the
        installed transformers defines, VoxtralRealtime's padding cache, one tensor
        per convolution named ``padding_cache_<conv>``); torch.export otherwise refuses
        a model called with (or returning) a cache. The flattened inputs of :func:`to_onnx
        <experimental_experiment.torch_interpreter.to_onnx>` are named
        ``past_key_values_key_<i>`` and ``past_key_values_value_<i>`` (keys of every
        layer, then values, then for hybrid decoders ``..._conv_state_<i>`` and
        ``..._recurrent_state_<i>``, ``<i>`` the index of the layer,
        :mod:`experimental_experiment.torch_interpreter.patches.cache_layers`)
        whether the model's argument is ``past_key_values``
        (transformers < 5.24), ``cache`` (transformers >= 5.24) or ``cache_params``
        (Mamba), so the code feeding onnxruntime does not change with transformers;
        the ``dynamic_shapes`` of a cache is a list of one entry per tensor, keyed by
        the argument's name;
      - applies the export patches transformers ships
        (``transformers.exporters.utils.apply_patches("dynamo")``: sliding-window
        layers traced as full layers, SDPA through its math kernel...),
      - then the patches of
        :mod:`experimental_experiment.torch_interpreter.patches.patch_transformers`
        for what is still broken:

        * masks built with ``torch.vmap`` (``use_vmap=True``, custom mask functions):
          *"no converter for lazy_load_decompositions / _add_batch_dim / flat_apply"*,
          replaced by broadcasting;
        * ``rope_type="dynamic"`` rotary embeddings: *"GuardOnDataDependentSymNode:
          Could not guard on data-dependent expression"*, made traceable with
          ``torch.where``;
        * mixture-of-experts (Mixtral, Qwen2-MoE): *"no converter for
          transformers.grouped_mm_fallback"*, experts run with ``batched_mm``;
        * sliding-window cache layers (Mistral, Gemma 2, Gemma 3) specializing the
          cache length to the window, only when transformers does not patch them;

      - the patches of
        :mod:`experimental_experiment.torch_interpreter.patches.patch_diffusers` for
        the diffusers models already imported (a mask written in a Python loop over
        frames x height x width, unrolled at the example's sizes).

    * ``patch_torch=True``: the patches of
      :mod:`experimental_experiment.torch_interpreter.patches.patch_torch`.

    The context manager yields a *modificator*, a function converting inputs into an
    exportable form (a tuple of ``(key, value)`` pairs becomes a DynamicCache, caches
    are copied so that a run does not grow them, an unknown cache class raises
    :class:`UnknownCacheError`).

    **Threads and nesting.** The patches change attributes of modules and classes, for
    the whole process. Entering the context manager from several threads at once, or
    nesting it, is safe: a process-wide lock counts the users, each patch is applied
    once while any user is inside and restored when the last one leaves, in the reverse
    order of application whatever the order in which the users leave (a patch whose
    users have all left stays applied while a patch applied after it is still in use).
    ``active_patches()`` (:mod:`experimental_experiment.torch_interpreter.patches`)
    lists what is applied at any moment. A patch failing on entry undoes what was
    applied for this user before the exception leaves the ``with`` statement. The code
    run in other threads while one thread is inside sees the patches too.

    .. code-block:: python

        with bypass_export_some_errors(patch_transformers=True) as modificator:
            inputs = modificator(inputs)
            onx = to_onnx(model, (), inputs, dynamic_shapes=ds)
    """
    from .patches.patch_diffusers import get_diffusers_patches
    from .patches.patch_torch import get_torch_patches
    from .patches.patch_transformers import (
        get_transformers_patches,
        transformers_own_patch_names,
        transformers_own_patches,
    )

    with shared_patches() as shared:
        known: dict[type, tuple] = {}
        if patch_torch:
            shared.patches("torch", get_torch_patches, verbose=verbose)
        if patch_transformers:
            known = shared.context(
                "caches",
                lambda: register_cache_classes(verbose=verbose),
                lambda classes: [f"pytree:{c.__name__}" for c in classes],
            )
            if verbose:
                logger.warning(
                    "[bypass_export_some_errors] registered %s", sorted(c.__name__ for c in known)
                )
            # transformers' own patches first, then ours for what they leave broken
            shared.context(
                "transformers",
                lambda: transformers_own_patches(verbose=verbose),
                lambda _: transformers_own_patch_names(),
            )
            shared.patches("transformers", get_transformers_patches, verbose=verbose)
            shared.patches("diffusers", get_diffusers_patches, verbose=verbose)
        yield _make_modificator(known)
