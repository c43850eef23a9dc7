"""Typed values passed from one stage of the exporter to the next (capture to
conversion to result), so that no stage imports another one to read its output.

.. code-block:: python

    plan = InputPlan(inputs={"x": "x"})
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass
class InputPlan:
    """What each placeholder becomes: a graph input, an initializer or nothing."""

    inputs: dict[str, str] = field(default_factory=dict)  # placeholder -> input name
    initializers: dict[str, tuple[str, Any]] = field(default_factory=dict)
    skipped: set[str] = field(default_factory=set)
