"""Keeps the attention of bidirectional Gemma text models (PaliGemma, ColPali) the same
under torch.export as in eager mode.

With ``config.use_bidirectional_attention=True`` (PaliGemma sets it on its Gemma text
model) the attention modules of Gemma set ``is_causal=False``, but
``masking_utils.create_causal_mask`` only looks at ``config.is_causal``: the mask it
builds is causal. In eager mode with SDPA and a padding mask made of ones only,
``masking_utils._ignore_causal_mask_sdpa`` drops that mask (``None``) and
``sdpa_attention_forward`` passes the module's ``is_causal=False``: every token sees
every token. With one padded token anywhere in the batch the causal mask is built and
applied. transformers itself is therefore inconsistent (a row's output changes when
another row of the batch is padded). Under torch.export, ``_ignore_causal_mask_sdpa``
returns ``False`` at once (``is_torchdynamo_exporting()``: it cannot read the mask's
values), so the exported model was always causal: a max difference of 0.04 with the
eager model on a mask of ones (the ColPali row of the heads zoo). Our other mask
patches (``_broadcast_expansion_sdpa``, ``_no_getitem_to_index``) build the same mask
as transformers and play no part.

:func:`_bidirectional_when_unpadded` rebuilds the eager choice with tensor operations:
the mask transformers builds, or no masking at all when the padding mask holds no zero
(and the query and the keys have the same length, or one query).

Not affected: Gemma 3 text models (``or_mask_function`` makes the built mask
bidirectional, never dropped), Gemma 2 and VaultGemma (no SDPA: the eager mask is always
built, causal in eager mode and in the exported model alike), Gemma 4 with
``use_bidirectional_attention="all"`` (its configuration sets ``is_causal=False``:
``create_bidirectional_mask``), the encoders of T5Gemma and T5Gemma 2
(``create_bidirectional_mask``), PaliGemma called with ``token_type_ids``
(``block_sequence_ids`` forbids dropping the mask).
"""

from __future__ import annotations

import inspect

import torch


def _bidirectional_modules(config) -> bool:
    """True when the attention modules built from ``config`` call SDPA with
    ``is_causal=False`` while ``create_causal_mask`` still builds a causal mask."""
    if config is None or not getattr(config, "is_causal", True):
        return False
    value = getattr(config, "use_bidirectional_attention", None)
    return value is True or value == "all"


def _statically_true(condition) -> bool:
    from torch.fx.experimental.symbolic_shapes import statically_known_true

    return bool(statically_known_true(condition))


def _length(value, device) -> torch.Tensor:
    return torch.full((), value, dtype=torch.int64, device=device)


def _shape_skip(q_length, kv_length, local_size, device) -> bool | torch.Tensor:
    """The shape part of ``_ignore_causal_mask_sdpa``: ``True``/``False`` when known at
    export time, a boolean tensor otherwise (the query and the keys may come from two
    inputs whose lengths are two symbols, equal at runtime)."""
    if local_size is not None:
        if _statically_true(kv_length >= local_size):
            return False
        if not _statically_true(kv_length < local_size):
            fits = _length(kv_length, device) < local_size
            same = _shape_skip(q_length, kv_length, None, device)
            return fits & same if isinstance(same, torch.Tensor) else (fits if same else False)
    if _statically_true(q_length == kv_length) or _statically_true(q_length == 1):
        return True
    q = _length(q_length, device)
    return (q == _length(kv_length, device)) | (q == 1)


def _bidirectional_when_unpadded(original: dict) -> dict:
    """Replaces the ``"sdpa"`` entry of ``AttentionMaskInterface._global_mapping``: under
    torch.export, for a model whose attention modules are bidirectional
    (``use_bidirectional_attention``), the mask becomes ``causal_mask | padding_mask.all()``,
    what eager mode computes (the causal mask when one token is padded, no mask at all
    otherwise). Everything else goes to transformers' ``sdpa_mask``.

    Fixes: a numerical mismatch (max difference about 0.04) between eager and the
    exported PaliGemma / ColPali with a padding mask of ones: the exported model attended
    causally, eager attended both ways.
    """
    from transformers import masking_utils

    sdpa = original["sdpa"]
    signature = inspect.signature(sdpa)

    def sdpa_mask(*args, **kwargs):
        if not torch.compiler.is_exporting():
            return sdpa(*args, **kwargs)
        bound = signature.bind(*args, **kwargs)
        bound.apply_defaults()
        values = dict(bound.arguments)
        values.update(values.pop("kwargs", {}))
        if not (values["allow_is_causal_skip"] and _bidirectional_modules(values.get("config"))):
            return sdpa(*args, **kwargs)
        q_length, kv_length = values["q_length"], values["kv_length"]
        padding = masking_utils.prepare_padding_mask(
            values["attention_mask"], kv_length, values["kv_offset"]
        )
        device = values["device"] if padding is None else padding.device
        skip = _shape_skip(q_length, kv_length, values["local_size"], device)
        if skip is False:
            return sdpa(*args, **kwargs)
        if padding is None and skip is True:  # eager drops the mask
            return None
        values["allow_is_causal_skip"] = False
        mask = sdpa(**values)
        if mask is None:
            return None
        if padding is not None:
            if not _statically_true(padding.shape[-1] == kv_length):
                padding = padding.narrow(-1, values["kv_offset"], kv_length)
            unpadded = padding.to(torch.bool).all()
            skip = unpadded if skip is True else skip & unpadded
        if mask.dtype == torch.bool:
            return mask | skip
        # a float mask (0 or the dtype's minimum): 0 everywhere when eager drops it
        return torch.where(skip, torch.zeros_like(mask), mask)

    mapping = dict(original)
    mapping["sdpa"] = sdpa_mask
    return mapping


def get_bidirectional_mask_patches() -> list:
    """The patch of :func:`_bidirectional_when_unpadded` when transformers dispatches the
    attention masks through ``AttentionMaskInterface`` (feature check)."""
    try:
        from transformers import masking_utils
    except ImportError:
        return []
    interface = getattr(masking_utils, "AttentionMaskInterface", None)
    mapping = getattr(interface, "_global_mapping", None)
    if not isinstance(mapping, dict) or "sdpa" not in mapping:
        return []
    if not hasattr(masking_utils, "prepare_padding_mask"):
        return []
    from . import Patch

    return [
        Patch(
            interface,
            "_global_mapping",
            _bidirectional_when_unpadded,
            _bidirectional_when_unpadded.__doc__,
        )
    ]
