"""Benchmarks, runnable as ``python -m experimental_experiment.bench.<name>``.

Layer 4 (top): it may import every layer below, never ``ext_test_case``
(``experimental_experiment.runtime`` runs the models).
"""
