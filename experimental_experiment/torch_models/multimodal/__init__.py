"""Multimodal models exported part by part (vision or audio encoder, embedding merge,
decoder with a cache) and run chained in onnxruntime.

.. code-block:: python

    from experimental_experiment.torch_models.multimodal.cases import build_multimodal
    from experimental_experiment.torch_models.multimodal.export import export_parts
    from experimental_experiment.torch_models.multimodal.run import check_generation

    case = build_multimodal("qwen2_5_vl")
    parts = export_parts(case)
    report = check_generation(case, parts, steps=8)
"""
