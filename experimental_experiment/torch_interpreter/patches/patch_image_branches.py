"""Patches of vision models branching on the image size (``if size != native:
resize``, ``if height == width == patch_size: return image``). During torch.export a
branch on a symbolic size becomes a guard and the exported model keeps the branch of the
example's size at every size.

Each replacement calls the original on plain Python numbers (eager mode computes exactly
what the model computes) and, on symbolic sizes, always takes the general branch, which
gives the numbers of the shortcut wherever the shortcut was taken: a bilinear resize to
the same size (``align_corners=False``, with or without antialias) is the identity, in
PyTorch and in onnxruntime's ``Resize``; the unfolding of an image of the patch size is
that image.
"""

from __future__ import annotations

from typing import Any

import torch

from .patch_image_sizes import _symbolic, _with_globals, patches_of, sym_int


def _any_symbolic(*sizes: Any) -> bool:
    return any(_symbolic(s) for s in sizes)


def _resized_to_patches(original):
    """Replaces ``MobileViTLayer.unfolding``: on symbolic sizes the feature map is always
    resized to the next multiples of the patch size (the original resizes only when the
    size is not a multiple of it: ``if new_width != orig_width or new_height !=
    orig_height``) and the numbers of patches are integer ceilings (the original calls
    ``int(math.ceil(size / patch))``, which makes the size a constant). ``folding``
    resizes back because the returned ``info_dict['interpolate']`` is True.

    Fixes: ``The input tensor cannot be reshaped to the requested shape. Input
    shape:{600,8,2,2}, requested shape:{-1,16,64,4}`` in onnxruntime at a second image
    size, the guard ``16*batch*(1 + (height - 1) // 8)*(1 + (width - 1) // 8) ==
    4096*batch``: the numbers of patches were the example's.
    """

    def unfolding(self, features: torch.Tensor) -> tuple[torch.Tensor, dict]:
        batch, channels, height, width = features.shape
        if not _any_symbolic(height, width):
            return original(self, features)
        ph, pw = self.patch_height, self.patch_width
        rows, cols = (height + ph - 1) // ph, (width + pw - 1) // pw
        features = torch.nn.functional.interpolate(
            features, size=(rows * ph, cols * pw), mode="bilinear", align_corners=False
        )
        # (batch, channels, rows * ph, cols * pw) -> (batch * ph * pw, rows * cols, channels)
        patches = features.reshape(batch, channels, rows, ph, cols, pw)
        patches = patches.permute(0, 3, 5, 2, 4, 1).reshape(batch * ph * pw, rows * cols, channels)
        info = {
            "orig_size": (height, width),
            "batch_size": batch,
            "channels": channels,
            "interpolate": True,
            "num_patches": rows * cols,
            "num_patches_width": cols,
            "num_patches_height": rows,
        }
        return patches, info

    unfolding.__wrapped__ = original  # type: ignore[attr-defined]
    unfolding.__doc__ = original.__doc__
    return unfolding


class _JitTracing:
    """``torch.jit`` where ``is_tracing()`` is True: the code written for
    ``torch.jit.trace`` (no shortcut at the native size, no check comparing ``int()``
    of sizes) is the one that keeps the sizes symbolic."""

    def __getattr__(self, name: str) -> Any:
        return getattr(torch.jit, name)

    @staticmethod
    def is_tracing() -> bool:
        return True


class _TorchTracing:
    """``torch`` whose ``jit`` is :class:`_JitTracing`."""

    jit = _JitTracing()

    def __getattr__(self, name: str) -> Any:
        return getattr(torch, name)


def _tracing_path_when_symbolic(original):
    """Replaces ``interpolate_pos_encoding`` (TIPSv2's vision embeddings): on symbolic
    sizes the code written for ``torch.jit.trace`` runs, ``torch.jit.is_tracing()``
    True and ``int``/``torch_int`` keeping sizes symbolic (:func:`sym_int`): the
    positions are always resized to the grid of patches (the original returns them
    unchanged when the grid is the native one, a branch on the number of patches) and
    ``size=(torch_int(height), torch_int(width))`` stays symbolic.

    Fixes: ``Attempting to broadcast an axis by a dimension other than 1. 257 by 401``
    in onnxruntime at a second image size, the guard ``1 + (height // 8)*(width // 8)
    == 257``: ``torch_int`` made the grid of positions the example's.
    """
    tracing = _with_globals(original, torch=_TorchTracing(), int=sym_int, torch_int=sym_int)

    def interpolate_pos_encoding(self, embeddings, height, width):
        if _any_symbolic(height, width, *embeddings.shape):
            return tracing(self, embeddings, height, width)
        return original(self, embeddings, height, width)

    interpolate_pos_encoding.__wrapped__ = original  # type: ignore[attr-defined]
    interpolate_pos_encoding.__doc__ = original.__doc__
    return interpolate_pos_encoding


def _residual_resized_when_symbolic(original):
    """Replaces ``Tipsv2DptFeatureFusionLayer.forward``: on symbolic sizes the residual
    is always resized to the size of the hidden state before the original runs (the
    original resizes it only when the shapes differ, ``if hidden_state.shape !=
    residual.shape``, a branch on the image size; after the resize both shapes are the
    same symbols and the branch is not taken, without a guard).

    Fixes: the guard ``2 + 2*((height // 8 - 1) // 2) == height // 8`` (the feature
    maps of the example had even sizes), a model wrong for the sizes giving odd ones.
    """

    def forward(self, hidden_state: torch.Tensor, residual: torch.Tensor | None = None):
        if residual is not None and _any_symbolic(*hidden_state.shape, *residual.shape):
            residual = torch.nn.functional.interpolate(
                residual, size=hidden_state.shape[2:], mode="bilinear", align_corners=False
            )
        return original(self, hidden_state, residual)

    forward.__wrapped__ = original  # type: ignore[attr-defined]
    forward.__doc__ = original.__doc__
    return forward


def _unfolded_when_symbolic(original):
    """Replaces DepthPro's ``split_to_patches``: on symbolic sizes the image is always
    unfolded into patches (the original returns an image of the patch size unchanged,
    ``if height == width == patch_size``, which the unfolding gives as one patch: the
    same numbers). The chained comparison made the capture assume a square image
    (``height == width``, the width renamed 'height' in the exported model).

    Fixes: ``Cannot split using values in 'split' attribute`` in onnxruntime on an image
    whose height and width differ.
    """

    def split_to_patches(pixel_values: torch.Tensor, patch_size: int, overlap_ratio: float):
        if not _any_symbolic(*pixel_values.shape):
            return original(pixel_values, patch_size, overlap_ratio)
        stride = int(patch_size * (1 - overlap_ratio))
        patches = torch.nn.functional.unfold(
            pixel_values, kernel_size=(patch_size, patch_size), stride=(stride, stride)
        )
        # (batch, channels * patch_size**2, n) -> (n * batch, channels, patch_size, patch_size)
        channels = pixel_values.shape[1]
        return patches.permute(2, 0, 1).reshape(-1, channels, patch_size, patch_size)

    split_to_patches.__wrapped__ = original  # type: ignore[attr-defined]
    split_to_patches.__doc__ = original.__doc__
    return split_to_patches


def _kept_positions(side, out: int, padding: int, device) -> torch.Tensor:
    """Rows (or columns) of a grid of ``side`` boxes of ``out`` rows kept when every
    box loses ``padding`` rows on each side facing another box: output row ``j`` of box
    ``b`` is row ``j + 2 * padding * b`` of the grid."""
    length = side * out - 2 * padding * (side - 1)
    rows = torch.arange(length, device=device)
    first = out - padding  # rows of the first box
    box = torch.where(rows < first, 0, 1 + (rows - first) // (out - 2 * padding))
    last = torch.full((), side - 1, dtype=rows.dtype, device=device)
    return rows + 2 * padding * torch.minimum(box, last)


def _merged_by_index(original):
    """Replaces DepthPro's ``merge_patches``: on symbolic sizes the patches of a batch
    row are put on their square grid (the first ``side**2`` of them, ``side =
    int(n ** 0.5)``) and the rows and columns of the boxes' inner borders are removed
    by one gather per axis. The original loops over the boxes (``for h in
    range(sqrt_n_patches_per_batch)``), which makes the number of patches a constant,
    and branches on it (one patch per batch row, fewer than 4: no padding); both give
    the numbers of the grid with one box, where no border is inner.

    Fixes: ``valid only for sizes in [128, 135]`` (example size 128) and a model
    computing the example's grid at every size when the patch encoder's grid is at
    least 4 tokens wide (the padding of the merge is then not 0).
    """

    def merge_patches(patches: torch.Tensor, batch_size: int, padding: int) -> torch.Tensor:
        n_patches, hidden, out, _ = patches.shape
        if not _any_symbolic(n_patches, batch_size):
            return original(patches, batch_size, padding)
        per_batch = n_patches // batch_size
        side = torch.sym_int(per_batch**0.5)
        grid = patches.reshape(per_batch, batch_size, hidden, out, out).permute(1, 2, 0, 3, 4)
        grid = grid[:, :, : side * side].reshape(batch_size, hidden, side, side, out, out)
        merged = grid.permute(0, 1, 2, 4, 3, 5).reshape(batch_size, hidden, side * out, -1)
        padding = min(out // 4, padding)
        if padding == 0:
            return merged
        kept = _kept_positions(side, out, padding, patches.device)
        return merged.index_select(2, kept).index_select(3, kept)

    merge_patches.__wrapped__ = original  # type: ignore[attr-defined]
    merge_patches.__doc__ = original.__doc__
    return merge_patches


#: (module of transformers, class or None for the module itself, attribute, replacement)
_PATCHES = (
    ("mobilevit.modeling_mobilevit", "MobileViTLayer", "unfolding", _resized_to_patches),
    (
        "tipsv2.modeling_tipsv2",
        "Tipsv2VisionEmbeddings",
        "interpolate_pos_encoding",
        _tracing_path_when_symbolic,
    ),
    (
        "tipsv2_dpt.modeling_tipsv2_dpt",
        "Tipsv2DptFeatureFusionLayer",
        "forward",
        _residual_resized_when_symbolic,
    ),
    ("depth_pro.modeling_depth_pro", None, "split_to_patches", _unfolded_when_symbolic),
    ("depth_pro.modeling_depth_pro", None, "merge_patches", _merged_by_index),
)


def get_image_branch_patches() -> list:
    """Patches of the modules already imported (the model was built), never imports
    one."""
    return patches_of(_PATCHES)
