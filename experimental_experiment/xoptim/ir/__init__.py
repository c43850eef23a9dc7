"""A prototype of the pattern optimizer on ``onnx_ir`` (use-def chains instead of
NodeProtos linked by names): the model is loaded into an ``ir.Model``
(:mod:`.model`), a pattern finds its match by walking producers and uses
(:mod:`.rewrite`), a ``PatternPass``
runs one pattern over the graph and a
``FixedPointPasses``
repeats the passes until none changes anything.

Three patterns are written on the IR, equivalent to xoptim's:
:mod:`.transpose` (Transpose(Transpose)), :mod:`.gemm` (MatMul + Add -> Gemm) and
:mod:`.rmsnorm` (RMSNorm -> SimplifiedLayerNormalization / RMSNormalization);
:mod:`.compare` lists both sets. See the optimizer design page for the measurements and
the decision.

.. code-block:: python

    import onnx
    from experimental_experiment.xoptim.ir import default_passes, load, save

    result = default_passes()(load(onnx.load("model.onnx")))
    print(result.rewrites)
    optimized = save(result.model)
"""

from .model import load, save
from .passes import FixedPointPasses, IRResult, PatternPass, default_passes
from .rewrite import IRMatch, IRPattern

__all__ = [
    "FixedPointPasses",
    "IRMatch",
    "IRPattern",
    "IRResult",
    "PatternPass",
    "default_passes",
    "load",
    "save",
]
