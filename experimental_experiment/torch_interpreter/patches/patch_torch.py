"""Patches for torch functions which block torch.export of some models.

Each patch is a :class:`Patch <experimental_experiment.torch_interpreter.patches.Patch>`
built by a small function whose docstring names the error it fixes;
:func:`get_torch_patches` returns the ones the installed torch needs, decided by
feature checks.

With torch 2.13, none of the models of
:func:`get_tiny_llm <experimental_experiment.torch_models.llm_helper.get_tiny_llm>`
needs a torch patch: caches are registered with pytree and the blocking code lives in
transformers (see :mod:`.patch_transformers`); in-place updates of a ``StaticCache``
are functionalized by torch.export and become extra outputs of the ONNX model
(``<input>_updated``). The list is the place for the next ones.
"""

from __future__ import annotations

from . import Patch


def get_torch_patches() -> list[Patch]:
    """The patches needed by the installed torch (feature checks): none for torch 2.13."""
    patches: list[Patch] = []
    return patches
