"""How the model is captured before conversion."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class ExportOptions:
    """Capture strategy of :func:`to_onnx`.

    :param strict: ``strict`` argument of :func:`torch.export.export`
    :param decomposition_table: None (no decomposition, the default), ``"default"``
        (torch's default table) or a table ``{op: function}`` given to
        :meth:`torch.export.ExportedProgram.run_decompositions`
    :param fallback: when capture fails, tries the other ``strict`` value before giving up

    .. code-block:: python

        from experimental_experiment.torch_interpreter import ExportOptions

        options = ExportOptions(strict=False, decomposition_table="default")
    """

    strict: bool = False
    decomposition_table: Any = None
    fallback: bool = False
