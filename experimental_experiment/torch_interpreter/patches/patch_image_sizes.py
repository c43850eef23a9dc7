"""Patches of vision models whose code turns a size computed from the image size into a
Python number: ``int(patch_height * patch_size)``, ``torch_int(...)`` (``int()`` outside
``torch.jit.trace``), ``torch.as_tensor`` of a list of feature map sizes,
``torch.linspace`` with as many steps as rows. During torch.export each of them
specializes the image size to the example's (the exported model computes the example's
output size at every size, or fails in onnxruntime on another one).

Every patch runs the model's own code with one name rebound: ``int`` or ``torch_int``
by :func:`sym_int`, ``torch`` by :data:`TORCH_KEEPING_SIZES`, ``math`` by
:data:`MATH_KEEPING_SIZES`. On plain Python numbers
these call the original functions: in eager mode the patched model computes exactly what
the original computes; only a symbolic size (during the capture) takes another path,
which keeps it symbolic.
"""

from __future__ import annotations

import math
import sys
import types
from typing import Any

import torch


def _symbolic(value: Any) -> bool:
    return isinstance(value, (torch.SymInt, torch.SymFloat))


def sym_int(value: Any) -> Any:
    """``int(value)`` keeping a symbolic size symbolic (``torch.sym_int``); any other
    value goes to ``int`` (transformers' ``torch_int`` returns a tensor unchanged
    but cast to int64 under ``torch.jit.trace``: see :func:`_keep_symbolic_torch_int`)."""
    return torch.sym_int(value) if _symbolic(value) else int(value)


def _has_symbolic(data: Any) -> bool:
    if isinstance(data, (list, tuple)):
        return any(_has_symbolic(d) for d in data)
    return _symbolic(data)


def _stack_sizes(data: Any, dtype, device) -> torch.Tensor:
    """A nested list of sizes (some symbolic) as a tensor, one scalar at a time."""
    if isinstance(data, (list, tuple)):
        return torch.stack([_stack_sizes(d, dtype, device) for d in data])
    return torch.scalar_tensor(data, dtype=dtype, device=device)


class _TorchKeepingSizes:
    """``torch`` for the functions of one module, except for two functions that keep
    symbolic sizes symbolic: ``as_tensor`` of a (nested) list of sizes and
    ``linspace`` with a symbolic number of steps. Any other attribute is torch's."""

    def __getattr__(self, name: str) -> Any:
        return getattr(torch, name)

    @staticmethod
    def as_tensor(data, dtype=None, device=None):
        """``torch.as_tensor``; a list holding symbolic sizes is stacked from scalar
        tensors (``torch.as_tensor`` would make the sizes constants)."""
        if isinstance(data, (list, tuple)) and _has_symbolic(data):
            return _stack_sizes(data, dtype or torch.int64, device)
        return torch.as_tensor(data, dtype=dtype, device=device)

    @staticmethod
    def linspace(start, end, steps, *args, **kwargs):
        """``torch.linspace``; with a symbolic number of steps, the same values
        computed with ``arange`` as torch's kernel does: ``start + step * i`` on the first
        half, ``end - step * (steps - 1 - i)`` on the second, ``start`` alone when
        ``steps == 1`` (``linspace`` takes the steps as a constant)."""
        if args or not _symbolic(steps):
            return torch.linspace(start, end, steps, *args, **kwargs)
        dtype = kwargs.get("dtype") or torch.get_default_dtype()
        device = kwargs.get("device")
        first = torch.scalar_tensor(start, dtype=dtype, device=device)
        last = torch.scalar_tensor(end, dtype=dtype, device=device)
        index = torch.arange(steps, dtype=torch.int64, device=device)
        intervals = torch.scalar_tensor(steps - 1, dtype=dtype, device=device).clamp(min=1)
        step = (last - first) / intervals
        down = (steps - 1 - index).to(dtype)
        up = index.to(dtype)
        head = (index < steps // 2) | (index == 0)
        return torch.where(head, first + step * up, last - step * down)


#: the ``torch`` a patched module sees while the patches are applied
TORCH_KEEPING_SIZES = _TorchKeepingSizes()


class _MathKeepingSizes:
    """``math`` for the functions of one module, except for ``log2`` of a symbolic
    size (``math.log2`` calls ``float()``, which makes the size a constant, and
    torch.export allows no ``torch._sym_log2`` in a graph). Any other attribute is
    math's."""

    def __getattr__(self, name: str) -> Any:
        return getattr(math, name)

    @staticmethod
    def log2(x):
        """``math.log2``; on a symbolic size, the integer ``trunc(log2(x))`` as a
        symbolic integer (a model truncates it to get the exponent of a size,
        ``torch_int(math.log2(width / n))``), a count of the powers of two below
        ``x`` (above it if ``x < 1``), exact for ``2**-31 < x < 2**32``."""
        if not _symbolic(x):
            return math.log2(x)
        above = [torch.sym_ite(x >= 2**k, 1, 0) for k in range(1, 32)]
        below = [torch.sym_ite(x <= 2.0**-k, 1, 0) for k in range(1, 32)]
        return torch.sym_sum(above) - torch.sym_sum(below)


#: the ``math`` a patched module sees while the patches are applied
MATH_KEEPING_SIZES = _MathKeepingSizes()


def _with_globals(function, **names):
    """A copy of ``function`` whose global ``names`` are rebound (same code, defaults,
    closure: the same computation with other functions for these names)."""
    fn = types.FunctionType(
        function.__code__,
        {**function.__globals__, **names},
        function.__name__,
        function.__defaults__,
        function.__closure__,
    )
    fn.__kwdefaults__ = function.__kwdefaults__
    fn.__doc__ = function.__doc__
    fn.__qualname__ = function.__qualname__
    fn.__wrapped__ = function
    return fn


def _symbolic_int_in_forward(original):
    """Replaces ``DepthAnythingDepthEstimationHead.forward`` by the same code where
    ``int`` keeps a symbolic size symbolic (:func:`sym_int`): the size of the upsampled
    depth, ``int(patch_height * self.patch_size)``, follows the image size.

    Fixes: ``output 0: shape (3, 128, 128) != eager (3, 160, 160)`` with the guard
    ``8*(pixel_values.shape[2] // 8) == 128``: ``int()`` of the symbolic height makes
    it the example's height.
    """
    return _with_globals(original, int=sym_int)


def _symbolic_int_in_padding(original):
    """Replaces MobileNet's ``apply_tf_padding`` (TensorFlow's "SAME" padding) by the
    same code where ``int`` keeps a symbolic size symbolic (:func:`sym_int`): the
    padding follows the image size, its branches on ``size % stride`` become guards
    (a ``ConstrainedDimensionWarning`` gives the sizes they hold for).

    Fixes: ``Constraints violated``, the height and width specialized to the example's
    by ``in_height = int(features.shape[-2])``.
    """
    return _with_globals(original, int=sym_int)


def _keep_symbolic_torch_int(original):
    """Replaces transformers' ``torch_int`` in one modeling module (BEiT's relative
    position bias, Prompt Depth Anything's depth head, DPT's square grid of tokens
    ``torch_int(sequence_length ** 0.5)``, the sine position embeddings of D-FINE's and
    DEIMv2's last feature map): a symbolic size stays symbolic
    (:func:`sym_int`), anything else goes to the original.

    Fixes: ``output 0: shape (3, 128, 128) != eager (3, 160, 160)`` (Prompt Depth
    Anything) and ``The input tensor cannot be reshaped to the requested shape`` at a
    second size (ZoeDepth, through BEiT's ``interpolate`` of its relative position
    table; DPT's neck, ``Input shape:{3,400,64}, requested shape:{3,16,16,64}``):
    ``torch_int`` calls ``int()`` on the symbolic size, which makes it a constant.
    """

    def torch_int(x):
        return torch.sym_int(x) if _symbolic(x) else original(x)

    torch_int.__wrapped__ = original  # type: ignore[attr-defined]
    return torch_int


def _torch_keeping_sizes(original):
    """Replaces ``torch`` in ``modeling_deformable_detr`` and ``modeling_rf_detr`` by
    :data:`TORCH_KEEPING_SIZES`:
    ``torch.as_tensor(spatial_shapes_list)`` (the height and width of every feature
    level) and ``torch.linspace(0.5, height - 0.5, height)`` (the reference points) keep
    the sizes of the feature maps symbolic.

    Fixes: ``Attempting to broadcast an axis by a dimension other than 1. 340 by 534``
    in onnxruntime at a second image size with the guard
    ``1 + ((pixel_values.shape[2] - 1) // 8) == 16``: the sizes of the feature levels
    became the example's, the split of the flattened levels too (RF-DETR: ``256 by 400``
    in ``padding_mask.unsqueeze(-1) | ~output_proposals_valid``).
    """
    return TORCH_KEEPING_SIZES


def _math_keeping_sizes(original):
    """Replaces ``math`` in ``modeling_depth_pro`` by :data:`MATH_KEEPING_SIZES`: the
    exponent of the lowest resolution, ``torch_int(math.log2(width / self.out_size))``,
    stays symbolic (``torch_int`` is patched too), and so does the size of the features
    it gives, ``height // 2**exponent_value``.

    Fixes: ``max absolute difference 103`` in onnxruntime at a second image size with the
    guard ``(pixel_values.shape[2] / 1) == 128.0``: ``math.log2`` made the width a
    constant.
    """
    return MATH_KEEPING_SIZES


#: (module of transformers, class or None for the module itself, attribute, replacement)
_PATCHES = (
    (
        "depth_anything.modeling_depth_anything",
        "DepthAnythingDepthEstimationHead",
        "forward",
        _symbolic_int_in_forward,
    ),
    ("beit.modeling_beit", None, "torch_int", _keep_symbolic_torch_int),
    ("dpt.modeling_dpt", None, "torch_int", _keep_symbolic_torch_int),
    ("depth_pro.modeling_depth_pro", None, "torch_int", _keep_symbolic_torch_int),
    ("depth_pro.modeling_depth_pro", None, "math", _math_keeping_sizes),
    (
        "prompt_depth_anything.modeling_prompt_depth_anything",
        None,
        "torch_int",
        _keep_symbolic_torch_int,
    ),
    ("deformable_detr.modeling_deformable_detr", None, "torch", _torch_keeping_sizes),
    ("rf_detr.modeling_rf_detr", None, "torch", _torch_keeping_sizes),
    # the sine position embeddings of the feature map (the size of the last level)
    ("d_fine.modeling_d_fine", None, "torch_int", _keep_symbolic_torch_int),
    ("deimv2.modeling_deimv2", None, "torch_int", _keep_symbolic_torch_int),
    ("mobilenet_v1.modeling_mobilenet_v1", None, "apply_tf_padding", _symbolic_int_in_padding),
    ("mobilenet_v2.modeling_mobilenet_v2", None, "apply_tf_padding", _symbolic_int_in_padding),
)


def patches_of(table) -> list:
    """The patches of a table like :data:`_PATCHES` whose module is already imported
    (the model was built), never imports one."""
    from . import Patch

    patches = []
    for module_name, cls_name, attribute, replacement in table:
        module = sys.modules.get(f"transformers.models.{module_name}")
        if module is None:
            continue
        owner = module if cls_name is None else getattr(module, cls_name, None)
        if owner is None:
            continue
        if attribute in sys.modules and vars(owner).get(attribute) is not sys.modules[attribute]:
            continue  # a module (torch, math) already replaced
        if attribute in vars(owner):
            patches.append(Patch(owner, attribute, replacement, replacement.__doc__))
    return patches


def get_image_size_patches() -> list:
    """Patches of the modules already imported (the model was built), never imports
    one."""
    return patches_of(_PATCHES)
