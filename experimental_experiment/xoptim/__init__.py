"""Pattern-based optimizer of ONNX graphs.

Layer 1: it may import :mod:`experimental_experiment.xbuilder`, the bottom modules
(``errors``, ``verbosity``, ``helpers``), onnx and numpy; never torch nor
``torch_interpreter`` (``_unittests/test_layers.py`` checks it).

* :func:`optimize` (an :class:`OptimizationResult`) and :func:`optimize_model`
  optimize any ONNX model, :func:`optimize_builder` a GraphBuilder,
* :mod:`experimental_experiment.xoptim.passes`: the graph passes (small classes run by a
  :class:`PassManager <experimental_experiment.xoptim.passes.PassManager>`),
* :class:`Pattern` and :class:`Match` write new patterns (see
  :mod:`experimental_experiment.xoptim.pattern`),
* :func:`get_pattern_list` selects pattern sets by name,
* :func:`bisect_patterns` finds the first rewrite changing a model's results.
"""

from .api import optimize, optimize_model
from .bisect import bisect_patterns
from .optimizer import RewriteLog, optimize_builder
from .pattern import Match, Pattern
from .registry import get_pattern_list
from .report import OptimizationReport, OptimizationResult, ReportEntry

__all__ = [
    "Match",
    "OptimizationReport",
    "OptimizationResult",
    "Pattern",
    "ReportEntry",
    "RewriteLog",
    "bisect_patterns",
    "get_pattern_list",
    "optimize",
    "optimize_builder",
    "optimize_model",
]
