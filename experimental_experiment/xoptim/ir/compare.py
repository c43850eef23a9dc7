"""The three patterns of the prototype in both representations, in the same order:
the IR ones and their xoptim counterparts (used by the tests and
``experimental_experiment.bench.optim_ir``)."""

from __future__ import annotations

import onnx

from ..patterns.matmul import MatMulAddToGemm
from ..patterns.transpose import TransposeTransposeToTranspose
from ..patterns_ort.normalization import RMSNormToSimplifiedLayerNorm
from .patterns import IR_PATTERNS  # noqa: F401  (both lists side by side)

XOPTIM_PATTERNS = (TransposeTransposeToTranspose, MatMulAddToGemm, RMSNormToSimplifiedLayerNorm)


def patterns_only():
    """Optimization options running the patterns and no pass (both sides compare the
    patterns alone)."""
    from ...xbuilder.optimization_options import OptimizationOptions

    return OptimizationOptions(
        remove_unused=False,
        remove_identity=False,
        constant_folding=False,
        cse=False,
        merge_initializers=False,
    )


def run_xoptim(model: onnx.ModelProto) -> tuple[onnx.ModelProto, int]:
    """The three xoptim patterns on a ModelProto; returns ``(ModelProto, rewrites)``."""
    from ..api import optimize

    res = optimize(
        model,
        patterns=[p() for p in XOPTIM_PATTERNS],  # type: ignore[arg-type]
        options=patterns_only(),
    )
    return res.model, sum(e.applied for e in res.report)


def run_ir(model: onnx.ModelProto) -> tuple[onnx.ModelProto, int]:
    """The three IR patterns on a ModelProto; returns ``(ModelProto, rewrites)``."""
    from .model import load, save
    from .passes import default_passes  # passes never imports this module

    result = default_passes().call(load(model))
    return save(result.model), result.rewrites
