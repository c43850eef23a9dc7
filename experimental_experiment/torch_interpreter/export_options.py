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
    :param fallback: when capture fails, tries the other ``strict`` value before giving
        up (non-strict then strict with the default ``strict=False``); when the capture
        works but the decomposition or the functionalization fails, tries torch's default
        decomposition table; the final error lists every attempt and why it failed
    :param decomposition_fallback: an operator with no converter is decomposed by
        torch's decomposition table for that operator only, then converted (see
        :mod:`experimental_experiment.torch_interpreter.capture.decomposition_fallback`). On by
        default: it changes nothing for a graph whose operators all have a converter
        and turns an export failure into a working model otherwise.
    :param size_oblivious: captures with ``backed_size_oblivious=True`` (as
        ``torch.onnx.export`` does): torch.export does not reason about a dynamic size
        being 0 or 1, which keeps its symbolic reasoning cheap (minutes to seconds on
        MobileViT-like models); when that capture fails, it captures again without.
        ``False``: only when an example size of a dynamic dimension is 0 or 1.

    .. code-block:: python

        from experimental_experiment.torch_interpreter import ExportOptions

        options = ExportOptions(strict=False, decomposition_table="default")
    """

    strict: bool = False
    decomposition_table: Any = None
    fallback: bool = False
    decomposition_fallback: bool = True
    size_oblivious: bool = True
