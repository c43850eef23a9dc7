"""Options of the optimizer run at the end of :meth:`GraphBuilder.to_onnx`."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class OptimizationOptions:
    """Which passes the builder runs before writing the model.

    :param remove_unused: removes nodes whose outputs are never used
    :param remove_identity: removes Identity nodes, renaming their inputs
    :param constant_folding: evaluates nodes whose inputs are all constants
    :param constant_size_cap: folding is skipped when a result would have more elements
    :param cse: common subexpression elimination (identical sibling nodes)
    :param merge_initializers: identical small initializers share one name
    :param patterns: pattern sets to apply (``"default"``, ``"default+onnxruntime"``,
        ``"default,-CastCastToCast"`` removes one pattern, ``"none"`` or ``None`` for
        none); pattern rewriting is done by :mod:`experimental_experiment.xoptim`
    :param max_iterations: bound on the rounds of pattern matching
    :param subgraphs: optimizes If branches and Loop/Scan bodies too (recursively)
    :param functions: optimizes the bodies of the local functions too
    :param verbose: verbosity (logged with :mod:`logging`)

    .. code-block:: python

        from experimental_experiment.xbuilder import OptimizationOptions

        options = OptimizationOptions(constant_folding=False, patterns=None)
    """

    remove_unused: bool = True
    remove_identity: bool = True
    constant_folding: bool = True
    constant_size_cap: int = 1 << 20
    cse: bool = True
    merge_initializers: bool = True
    patterns: str | None = "default"
    max_iterations: int = 20
    subgraphs: bool = True
    functions: bool = True
    verbose: int = 0
