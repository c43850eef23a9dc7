"""Patches for transformers functions which block torch.export.

transformers ships its own export patches (``transformers.exporters``, registered for
the ``"dynamo"`` backend): :func:`transformers_own_patches` applies them when the
installed transformers has them. :func:`get_transformers_patches` returns the patches
for what they leave broken. Each patch is a small function whose docstring names the
error it fixes.
"""

from __future__ import annotations

import contextlib
import importlib
import logging
import sys

import torch

from . import Patch

logger = logging.getLogger(__name__)


@contextlib.contextmanager
def transformers_own_patches(verbose: int = 0):
    """Applies ``transformers.exporters.utils.apply_patches("dynamo")`` if it exists.

    Importing ``transformers.exporters.exporter_dynamo`` registers the patches
    (sliding-window cache layers traced as full layers, SDPA through the math kernel,
    optional native kernels disabled...); ``apply_patches`` restores them on exit.
    """
    try:
        importlib.import_module("transformers.exporters.exporter_dynamo")
        utils = importlib.import_module("transformers.exporters.utils")
    except ImportError:
        utils = None
    if utils is None or not hasattr(utils, "apply_patches"):
        yield
        return
    if verbose:
        logger.warning("[bypass_export_some_errors] transformers' own 'dynamo' patches")
    with utils.apply_patches("dynamo"):
        yield


def transformers_own_patch_names() -> list[str]:
    """``transformers:<object>.<attribute>`` for every patch of
    :func:`transformers_own_patches` (empty when transformers has none)."""
    utils = sys.modules.get("transformers.exporters.utils")
    registry = getattr(utils, "_PATCHES", None)
    if not isinstance(registry, dict):
        return []
    return [
        f"transformers:{entry[0]}.{entry[1]}"
        for entry in registry.get("dynamo", [])
        if isinstance(entry, tuple) and len(entry) >= 2
    ]


def _broadcast_expansion_sdpa(original):
    """Replaces ``masking_utils._vmap_expansion_sdpa`` (``torch.vmap`` over the four
    index dimensions) by broadcasting the indices.

    Fixes: ``UnsupportedOpError no converter for ... lazy_load_decompositions`` (or
    ``_add_batch_dim``, ``_vmap_increment_nesting``): a mask built with ``use_vmap=True``
    (custom ``or_mask_function`` / ``and_mask_function``, e.g. bidirectional image
    tokens) leaves functorch's vmap nodes in the exported graph. transformers' mask
    functions are index based, broadcasting gives the same mask.
    """

    def expansion(mask_function):
        def expanded(batch, head, q, kv):
            mask = mask_function(
                batch[:, None, None, None],
                head[None, :, None, None],
                q[None, None, :, None],
                kv[None, None, None, :],
            )
            return mask.expand(batch.shape[0], head.shape[0], q.shape[0], kv.shape[0])

        return expanded

    return expansion


def _no_getitem_to_index(original):
    """Replaces ``masking_utils.TransformGetItemToIndex`` (only used around the vmap
    expansion) by a context doing nothing.

    Fixes: ``UnsupportedOpError no converter for flat_apply`` (``ModIndex``): inside this
    context, ``padding_mask[batch, kv]`` becomes a higher order op for vmap. With the
    broadcast expansion of :func:`_broadcast_expansion_sdpa` plain indexing works.
    """
    return lambda: contextlib.nullcontext()


def _sliding_layer_as_full_layer(original):
    """Traces ``DynamicSlidingWindowLayer`` methods as the ones of ``DynamicLayer``.

    Fixes: the cache length specialized to ``[2, sliding_window - 1]`` (a range
    constraint, or ``Constraints violated``) for Mistral, Gemma 2, Gemma 3 with a cache
    of sliding layers: the layer's python counter and its cut to the window become
    guards. The attention mask still applies the window. Only used when the installed
    transformers does not ship this patch itself (``transformers.exporters``).
    """
    from transformers.cache_utils import DynamicLayer

    return getattr(DynamicLayer, original.__name__)


def _traceable_dynamic_rope(original):
    """Replaces the forward of a rotary embedding decorated by
    ``modeling_rope_utils.dynamic_rope_update`` for ``rope_type="dynamic"``.

    Fixes: ``GuardOnDataDependentSymNode: Could not guard on data-dependent expression``
    raised by ``if seq_len > max_seq_len_cached`` (``seq_len = max(position_ids) + 1``).
    Both sets of frequencies are computed and ``torch.where`` picks one, the buffer is
    restored after the call. The exported model is stateless: eager keeps the
    frequencies of the longest sequence seen so far, the exported model uses the ones
    of the current length (the same for the first call and for growing lengths).
    """
    from transformers import modeling_rope_utils

    inner = _rope_wrapper(original).__wrapped__

    @torch.no_grad()
    def forward(self, x, position_ids, layer_type=None):
        kwargs = {"layer_type": layer_type} if layer_type is not None else {}
        rope_type = self.rope_type if layer_type is None else self.rope_type[layer_type]
        if "dynamic" not in rope_type:
            return original(self, x, position_ids, **kwargs)
        prefix = "" if layer_type is None else f"{layer_type}_"
        init = modeling_rope_utils.ROPE_INIT_FUNCTIONS[rope_type]
        seq_len = torch.max(position_ids) + 1
        scaled, _ = init(self.config, x.device, seq_len=seq_len, **kwargs)
        base = getattr(self, f"{prefix}original_inv_freq").to(x.device)
        name = f"{prefix}inv_freq"
        saved = getattr(self, name)
        setattr(self, name, torch.where(seq_len > self.original_max_seq_len, scaled, base))
        try:
            return inner(self, x, position_ids, **kwargs)
        finally:
            setattr(self, name, saved)

    return forward


def _rope_wrapper(function):
    """The function made by ``dynamic_rope_update`` among the decorators of
    ``function`` (``torch.no_grad`` wraps it), or None."""
    while function is not None and hasattr(function, "__wrapped__"):
        code = getattr(function, "__code__", None)
        if code is not None and code.co_filename.endswith("modeling_rope_utils.py"):
            return function
        function = function.__wrapped__
    return None


def _dynamic_rope_classes() -> list[type]:
    """Rotary embeddings of the imported transformers models whose forward is decorated
    by ``dynamic_rope_update``."""
    from .patch_models import imported_model_classes

    def decorated(cls) -> bool:
        forward = vars(cls).get("forward")
        return callable(forward) and _rope_wrapper(forward) is not None

    return imported_model_classes(decorated)


def _experts_as_batched_mm(original):
    """Maps the ``"grouped_mm"`` experts implementation of mixture-of-experts models
    (Mixtral, Qwen2-MoE...) to ``"batched_mm"``.

    Fixes: ``UnsupportedOpError no converter ... for transformers.grouped_mm_fallback``:
    under torch.export with float32 weights, ``grouped_mm`` falls back to a custom
    operator of transformers. ``batched_mm`` gathers the weights of the selected experts
    and runs batched matrix multiplications, plain aten operators (the choice
    transformers' own ONNX exporter makes for CUDA).
    """
    mapping = dict(original)
    mapping["grouped_mm"] = mapping["batched_mm"]
    return mapping


def _has_own_patches() -> bool:
    try:
        utils = importlib.import_module("transformers.exporters.utils")
    except ImportError:
        return False
    return hasattr(utils, "apply_patches")


def get_transformers_patches() -> list[Patch]:
    """The patches the installed transformers needs (feature checks, no version)."""
    try:
        from transformers import cache_utils, masking_utils
    except ImportError:
        return []
    patches: list[Patch] = []
    if hasattr(masking_utils, "_vmap_expansion_sdpa"):
        patches.append(
            Patch(
                masking_utils,
                "_vmap_expansion_sdpa",
                _broadcast_expansion_sdpa,
                _broadcast_expansion_sdpa.__doc__,
            )
        )
        if hasattr(masking_utils, "TransformGetItemToIndex"):
            patches.append(
                Patch(
                    masking_utils,
                    "TransformGetItemToIndex",
                    _no_getitem_to_index,
                    _no_getitem_to_index.__doc__,
                )
            )
    moe = sys.modules.get("transformers.integrations.moe")
    interface = getattr(moe, "ExpertsInterface", None)
    mapping = getattr(interface, "_global_mapping", None)
    if isinstance(mapping, dict) and "grouped_mm" in mapping and "batched_mm" in mapping:
        patches.append(
            Patch(
                interface, "_global_mapping", _experts_as_batched_mm, _experts_as_batched_mm.__doc__
            )
        )
    for cls in _dynamic_rope_classes():
        patches.append(
            Patch(cls, "forward", _traceable_dynamic_rope, _traceable_dynamic_rope.__doc__)
        )
    from .patch_batch_loops import get_batch_loop_patches
    from .patch_batch_sizes import get_batch_size_patches
    from .patch_bidirectional_mask import get_bidirectional_mask_patches
    from .patch_image_branches import get_image_branch_patches
    from .patch_image_sizes import get_image_size_patches
    from .patch_models import get_model_patches
    from .patch_recurrences import get_recurrence_patches
    from .patch_ssm import get_ssm_patches

    patches.extend(get_bidirectional_mask_patches())
    patches.extend(get_ssm_patches())
    patches.extend(get_recurrence_patches())
    patches.extend(get_model_patches())
    patches.extend(get_image_size_patches())
    patches.extend(get_batch_loop_patches())
    patches.extend(get_image_branch_patches())
    patches.extend(get_batch_size_patches())
    layer = getattr(cache_utils, "DynamicSlidingWindowLayer", None)
    if layer is not None and not _has_own_patches():
        for name in ("update", "get_mask_sizes", "get_seq_length"):
            if name in vars(layer):
                patches.append(
                    Patch(
                        layer,
                        name,
                        _sliding_layer_as_full_layer,
                        _sliding_layer_as_full_layer.__doc__,
                    )
                )
    return patches
