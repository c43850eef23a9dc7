"""Batch sizes read in a way that fixes them during the capture.

``len(tensor)`` returns a Python ``int``: torch.export specializes the first dimension
of the tensor to the example's (*"Constraints violated (dimension 0 ('batch') of input
'pixel_values')"*). The patches below give the functions of a model's module a ``len``
which returns ``tensor.shape[0]`` for a tensor (the same number in eager mode, a
symbolic size during the capture) and calls the builtin for anything else.
"""

from __future__ import annotations

import sys

import torch


def _len_of_symbolic_batch(original):
    """Replaces the builtin ``len`` seen by the functions of one module: the size of
    the first dimension of a tensor of at least one dimension (``shape[0]``, symbolic
    during the capture), the builtin for anything else (a 0-d tensor still raises the
    builtin's ``TypeError``).

    Fixes: ``Constraints violated (dimension 0 ('batch') of input 'pixel_values')``:
    ``batch_size = len(source_flatten)`` (D-FINE, DEIMv2) converts the batch to an
    ``int``.
    """

    def len_(obj):
        if isinstance(obj, torch.Tensor) and obj.dim() > 0:
            return obj.shape[0]
        return original(obj)

    len_.__wrapped__ = original  # type: ignore[attr-defined]
    return len_


#: modules whose functions take ``len`` of a tensor of the batch
_MODULES_WITH_LEN_OF_BATCH = (
    "transformers.models.d_fine.modeling_d_fine",
    "transformers.models.deimv2.modeling_deimv2",
)


def get_batch_size_patches() -> list:
    """Patches of the batch sizes read as ``int`` by the modules already imported."""
    from . import Patch

    patches = []
    for name in _MODULES_WITH_LEN_OF_BATCH:
        module = sys.modules.get(name)
        if module is not None:
            patches.append(
                Patch(module, "len", _len_of_symbolic_batch, _len_of_symbolic_batch.__doc__)
            )
    return patches
