"""Patches of diffusers models whose code writes a tensor in a Python loop over a
number of rows computed from the input sizes. During torch.export the loop is
unrolled at the example's sizes: the exported model writes the example's rows at every
size (the capture only records the guard ``frames * height * width == <example's>``,
reported as a ``ConstrainedDimensionWarning``).

A patch is applied only when the diffusers module defining the class is already
imported (the model was built); it never imports diffusers. Each replacement computes
bit for bit what the original computes, with tensor operations whose sizes stay
symbolic.
"""

from __future__ import annotations

import sys

import torch


def causal_frame_mask(n_frame, n_hw, dtype, device, batch_size: int | None = None) -> torch.Tensor:
    """The mask of ``HunyuanVideo15AttnBlock.prepare_causal_attention_mask``: rows and
    columns are the ``n_frame * n_hw`` positions of a video, frame by frame; a position
    attends (``0``) to every position of its frame and of the frames before, not
    (``-inf``) to those of the frames after. The frame of a position is
    ``index // n_hw``: row ``i`` is ``0`` on the columns ``j`` with
    ``j // n_hw <= i // n_hw``, the columns ``j < (i // n_hw + 1) * n_hw`` the original
    loop fills."""
    seq_len = n_frame * n_hw
    frame = torch.arange(seq_len, device=device) // n_hw
    attends = frame.unsqueeze(1) >= frame.unsqueeze(0)
    mask = torch.full((seq_len, seq_len), float("-inf"), dtype=dtype, device=device)
    mask = mask.masked_fill(attends, 0)
    if batch_size is not None:
        mask = mask.unsqueeze(0).expand(batch_size, -1, -1)
    return mask


def _hunyuan_video15_causal_mask(original):
    """Replaces ``HunyuanVideo15AttnBlock.prepare_causal_attention_mask`` (the
    attention of the mid-block of ``AutoencoderKLHunyuanVideo15``'s encoder and
    decoder) by :func:`causal_frame_mask`: the same mask from ``arange`` and one
    comparison of frame indices instead of ``for i in range(seq_len): mask[i, :(i //
    n_hw + 1) * n_hw] = 0``.

    Fixes: a numerical mismatch at any size but the example's (``max absolute
    difference 0.344``) with the guard ``((1 + ((frames - 1) // 4)) * (height // 16) *
    (width // 16)) == 8``: the loop, unrolled at the example's sizes, wrote the
    example's rows of the mask into the ONNX model.
    """
    return staticmethod(causal_frame_mask)


#: (module of diffusers, class, static method, replacement)
_PATCHES = (
    (
        "models.autoencoders.autoencoder_kl_hunyuanvideo15",
        "HunyuanVideo15AttnBlock",
        "prepare_causal_attention_mask",
        _hunyuan_video15_causal_mask,
    ),
)


def get_diffusers_patches() -> list:
    """Patches of the diffusers modules already imported (the model was built), never
    imports one."""
    from . import Patch

    patches = []
    for module, cls_name, method, replacement in _PATCHES:
        cls = getattr(sys.modules.get(f"diffusers.{module}"), cls_name, None)
        if cls is not None and isinstance(vars(cls).get(method), staticmethod):
            patches.append(Patch(cls, method, replacement, replacement.__doc__))
    return patches
