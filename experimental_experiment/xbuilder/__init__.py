"""Graph builder: builds ONNX graphs with dtype/shape tracking (never imports torch)."""

from .errors import GraphBuilderError
from .graph_builder import DEFAULT_OPSET, GraphBuilder
from .optimization_options import OptimizationOptions

__all__ = ["DEFAULT_OPSET", "GraphBuilder", "GraphBuilderError", "OptimizationOptions"]
