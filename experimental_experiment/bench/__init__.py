"""Benchmarks, runnable as ``python -m experimental_experiment.bench.<name>``."""
