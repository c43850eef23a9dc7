"""Helpers around models: training loops with the onnxruntime backend, dumps.

Layer 4 (top, with ``bench`` and the CLI): it may import every layer below
(``torch_dynamo``, ``torch_interpreter``, ``xoptim``, ``xbuilder``), never
``ext_test_case``.
"""
