"""experimental_experiment: a PyTorch to ONNX exporter built on torch.export."""

__version__ = "0.1.0"
