"""Helpers around models: training loops with the onnxruntime backend, dumps."""
