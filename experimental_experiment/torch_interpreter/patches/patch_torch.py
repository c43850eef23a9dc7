"""Patches for torch functions which block torch.export of some models.

Each patch is a :class:`Patch <experimental_experiment.torch_interpreter.patches.Patch>`
built by a small function whose docstring names the error it fixes;
:func:`get_torch_patches` returns the ones the installed torch needs, decided by
feature checks.

Caches are registered with pytree and most of the blocking code lives in transformers
(see :mod:`.patch_transformers`); in-place updates of a ``StaticCache``
are functionalized by torch.export and become extra outputs of the ONNX model
(``<input>_updated``).
"""

from __future__ import annotations

import itertools

import torch

from . import Patch


def _unchanged(module: torch.nn.Module, device, dtype) -> bool:
    """True when ``module.to(device, dtype)`` would change no tensor."""
    for t in itertools.chain(module.parameters(), module.buffers()):
        if device is not None and t.device != torch.device(device):
            return False
        if dtype is not None and (t.is_floating_point() or t.is_complex()) and t.dtype != dtype:
            return False
    return True


def _module_to_noop(original):
    """Replaces ``torch.nn.Module.to``: a call that changes no tensor returns the module
    without going through ``_apply``.

    Fixes: ``RuntimeError: _apply(): Couldn't swap Linear.weight`` (*"Cannot swap t1
    because it has weakref associated with it"*): SwitchTransformers calls
    ``self.classifier = self.classifier.to(self.dtype)`` in its forward; under
    torch.export the parameters cannot be swapped, even by a conversion to their own
    dtype.
    """

    def to(self, *args, **kwargs):
        device, dtype, _, memory_format = torch._C._nn._parse_to(*args, **kwargs)
        if memory_format is None and _unchanged(self, device, dtype):
            return self
        return original(self, *args, **kwargs)

    return to


def get_torch_patches() -> list[Patch]:
    """The patches needed by the installed torch."""
    return [Patch(torch.nn.Module, "to", _module_to_noop, _module_to_noop.__doc__)]
