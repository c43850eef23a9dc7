"""Graph builder: builds ONNX graphs with dtype/shape tracking.

Layer 0: it may import onnx, numpy and the bottom modules (``errors``); never torch,
:mod:`experimental_experiment.xoptim` (the optimizer sits above it: call
``xoptim.optimize_builder(g)`` before ``g.to_onnx()``) nor anything above
(``_unittests/test_layers.py`` checks it).
"""

from .errors import GraphBuilderError
from .graph_builder import DEFAULT_OPSET, GraphBuilder
from .optimization_options import OptimizationOptions

__all__ = ["DEFAULT_OPSET", "GraphBuilder", "GraphBuilderError", "OptimizationOptions"]
