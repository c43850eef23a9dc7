"""Temporary patches applied by :func:`bypass_export_some_errors
<experimental_experiment.torch_interpreter.onnx_export_errors.bypass_export_some_errors>`.

Every patch is a ``Patch``: the object owning the attribute, the attribute name and
a function ``factory(original) -> replacement``. Each one documents the error it fixes
and says when it is needed (a feature check on the installed packages, not a version).
"""

from __future__ import annotations

from .apply import Patch, apply_patches
from .shared import active_names


def active_patches() -> list[str]:
    """Names of what :func:`bypass_export_some_errors
    <experimental_experiment.torch_interpreter.onnx_export_errors.bypass_export_some_errors>`
    applied and is still applied at this moment (in any thread): our patches
    (``Module.to``...), transformers' own (``transformers:<object>.<attribute>``), the
    cache classes registered with pytree (``pytree:DynamicCache``...)."""
    return active_names()


__all__ = ["Patch", "active_patches", "apply_patches"]
