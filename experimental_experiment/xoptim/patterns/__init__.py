"""The default pattern set, grouped by topic, in the order the patterns are tried."""

from .activation import (
    ExpSumDivToSoftmax,
    GeluErfToGelu,
    GeluTanhToGelu,
    SoftmaxSubMaxToSoftmax,
)
from .arith import (
    AddZeroToIdentity,
    AndTrueToIdentity,
    DivByOneToIdentity,
    MulByOneToIdentity,
    SubZeroToIdentity,
)
from .casts import CastCastToCast, CastToIdentity
from .conv import ConvBatchNormToConv
from .integer_division import FloorDivOfSizeToDiv
from .matmul import MatMulAddToGemm
from .normalization import (
    DecomposedLayerNormToLayerNorm,
    DecomposedRMSNormToRMSNorm,
    LayerNormAddToLayerNorm,
)
from .reshape import ReshapeReshapeToReshape, ReshapeToIdentity
from .shape_folding import GatherShapeToConstant, ShapeToConstant
from .shape_ops import (
    ExpandToIdentity,
    SliceSliceToSlice,
    SliceToIdentity,
    SplitConcatToIdentity,
    SqueezeUnsqueezeToIdentity,
    UnsqueezeSqueezeToIdentity,
    UnsqueezeUnsqueezeToUnsqueeze,
)
from .transpose import (
    TransposeGemmToGemm,
    TransposeMatMulToGemm,
    TransposeToIdentity,
    TransposeTransposeToTranspose,
)

#: pattern classes of the ``"default"`` set; on one node, the first matching pattern
#: wins: fusions come first so that a simplification does not break their structure
DEFAULT_PATTERNS = (
    DecomposedLayerNormToLayerNorm,
    LayerNormAddToLayerNorm,
    DecomposedRMSNormToRMSNorm,
    ExpSumDivToSoftmax,
    SoftmaxSubMaxToSoftmax,
    GeluErfToGelu,
    GeluTanhToGelu,
    CastToIdentity,
    CastCastToCast,
    ReshapeToIdentity,
    ReshapeReshapeToReshape,
    TransposeToIdentity,
    TransposeTransposeToTranspose,
    ExpandToIdentity,
    SqueezeUnsqueezeToIdentity,
    UnsqueezeSqueezeToIdentity,
    UnsqueezeUnsqueezeToUnsqueeze,
    SliceToIdentity,
    SliceSliceToSlice,
    SplitConcatToIdentity,
    MulByOneToIdentity,
    AddZeroToIdentity,
    SubZeroToIdentity,
    DivByOneToIdentity,
    AndTrueToIdentity,
    ShapeToConstant,
    GatherShapeToConstant,
    FloorDivOfSizeToDiv,
    MatMulAddToGemm,
    ConvBatchNormToConv,
    TransposeMatMulToGemm,
    TransposeGemmToGemm,
)

__all__ = [c.__name__ for c in DEFAULT_PATTERNS] + ["DEFAULT_PATTERNS"]
