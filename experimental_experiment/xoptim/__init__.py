"""Pattern-based optimizer of ONNX graphs (never imports torch)."""
