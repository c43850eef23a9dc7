"""Pattern-based optimizer of ONNX graphs (never imports torch).

* :func:`optimize_model` optimizes any ONNX model,
* :class:`Pattern` and :class:`Match` write new patterns (see
  :mod:`experimental_experiment.xoptim.pattern`),
* :func:`get_pattern_list` selects pattern sets by name,
* :func:`bisect_patterns` finds the first rewrite changing a model's results.
"""

from .api import optimize_model
from .bisect import bisect_patterns
from .optimizer import RewriteLog, optimize_builder
from .pattern import Match, Pattern
from .registry import get_pattern_list

__all__ = ["Match", "Pattern", "RewriteLog", "bisect_patterns", "get_pattern_list",
           "optimize_builder", "optimize_model"]
