"""Graph builder: builds ONNX graphs with dtype/shape tracking (never imports torch)."""

from .graph_builder import DEFAULT_OPSET, GraphBuilder
from .errors import GraphBuilderError
from .optimization_options import OptimizationOptions

__all__ = ["DEFAULT_OPSET", "GraphBuilder", "GraphBuilderError", "OptimizationOptions"]
