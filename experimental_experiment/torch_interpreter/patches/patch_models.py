"""Patches of single transformers architectures whose code cannot be traced with
dynamic shapes. Each patch is applied only when the model's module is already imported
(the model was built), never imports it.
"""

from __future__ import annotations

import sys

import torch


def _cpmant_attention_mask(original):
    """Replaces ``CpmAntModel._prepare_attention_mask``: the left padding mask is built
    with ``torch.arange`` instead of ``torch.tensor(list(range(seqlen - prompt)))``.

    Fixes: ``Constraints violated ... ('seq') of input 'input_ids' ... specialized it to
    be a constant``: a Python list of the sequence length makes it a constant.
    """

    def prepare(self, input_ids, span, context, length):
        batch, seqlen = input_ids.shape
        device = input_ids.device
        positions = torch.arange(seqlen, device=device)
        causal = positions[None, :] <= positions[:, None]
        mask = context[:, None, :] | (context[:, :, None].logical_not() & causal[None])
        mask = mask & (span[:, None, :] == span[:, :, None])
        # tokens after the prompt, counted from the end, beyond ``length`` are padding
        from_end = torch.arange(seqlen - self.prompt_length - 1, -1, -1, device=device)
        kept = torch.cat([torch.ones(batch, self.prompt_length, dtype=torch.bool, device=device),
                          from_end[None, :] < length[:, None]], dim=1)
        return kept[:, :, None] & kept[:, None, :] & mask

    return prepare


def get_model_patches() -> list:
    """Patches of the architectures whose modules are imported."""
    from . import Patch

    patches = []
    cpmant = sys.modules.get("transformers.models.cpmant.modeling_cpmant")
    model = getattr(cpmant, "CpmAntModel", None)
    if model is not None and "_prepare_attention_mask" in vars(model):
        patches.append(Patch(model, "_prepare_attention_mask", _cpmant_attention_mask,
                             _cpmant_attention_mask.__doc__))
    return patches
