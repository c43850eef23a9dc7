"""Patterns producing onnxruntime contrib operators (domain ``com.microsoft``).

``ORT_PATTERNS`` lists the pattern classes of the ``"onnxruntime"`` set, in the order
they are tried (see :func:`experimental_experiment.xoptim.get_pattern_list`).
The models they produce run with onnxruntime only.

``ORT_EXTRA_PATTERNS`` (set ``"onnxruntime_extra"``, selected with
``patterns="default+onnxruntime+onnxruntime_extra"``) holds the fusions onnxruntime's
CPU kernels run slower than the unfused nodes (measured with onnxruntime 1.31, one
thread, hidden sizes 64 to 1024): SkipLayerNormalization is 3 to 7 times slower than
Add + LayerNormalization, SkipSimplifiedLayerNormalization up to 2 times slower than Add
+ SimplifiedLayerNormalization; FusedMatMul(X, W, transB=1) on a constant weight is
slower than MatMul on the weight onnxruntime transposes and prepacks when the session
starts (measured by :mod:`experimental_experiment.bench.llm_latency`). Other execution
providers may prefer them.
"""

from .activation import (
    AddFastGeluToFastGelu,
    AddGeluToBiasGelu,
    GeluErfToOrtGelu,
    GeluTanhToFastGelu,
)
from .attention import CausalAttentionToGroupQueryAttention
from .attention_mask import GridGatherNDToSlice
from .attention_packing import (
    MatMulGroupQueryAttentionToPackedGroupQueryAttention,
    RotaryGroupQueryAttentionToGroupQueryAttention,
)
from .conv import ConvActivationToFusedConv
from .matmul import (
    MatMulScaleToFusedMatMul,
    TransposeMatMulToFusedMatMul,
    TransposeWeightMatMulToFusedMatMul,
)
from .normalization import (
    AddLayerNormToSkipLayerNorm,
    AddSimplifiedLayerNormToSkipSimplifiedLayerNorm,
    RMSNormToSimplifiedLayerNorm,
    SimplifiedLayerNormMulToScale,
)
from .rotary import HalfRotaryToRotaryEmbedding, TransposedRotaryToRotaryEmbedding

#: pattern classes of the ``"onnxruntime"`` set
ORT_PATTERNS = (
    TransposeMatMulToFusedMatMul,
    MatMulScaleToFusedMatMul,
    RMSNormToSimplifiedLayerNorm,
    SimplifiedLayerNormMulToScale,
    GeluErfToOrtGelu,
    GeluTanhToFastGelu,
    AddGeluToBiasGelu,
    HalfRotaryToRotaryEmbedding,
    AddFastGeluToFastGelu,
    ConvActivationToFusedConv,
    GridGatherNDToSlice,
    CausalAttentionToGroupQueryAttention,
    TransposedRotaryToRotaryEmbedding,
    RotaryGroupQueryAttentionToGroupQueryAttention,
    MatMulGroupQueryAttentionToPackedGroupQueryAttention,
)

#: pattern classes of the ``"onnxruntime_extra"`` set (slower on CPU, see above)
ORT_EXTRA_PATTERNS = (
    TransposeWeightMatMulToFusedMatMul,
    AddSimplifiedLayerNormToSkipSimplifiedLayerNorm,
    AddLayerNormToSkipLayerNorm,
)

__all__ = [c.__name__ for c in ORT_PATTERNS + ORT_EXTRA_PATTERNS] + [
    "ORT_EXTRA_PATTERNS",
    "ORT_PATTERNS",
]
