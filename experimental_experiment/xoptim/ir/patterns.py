"""The IR patterns of the prototype, in the order ``default_passes`` runs them."""

from __future__ import annotations

from .gemm import MatMulAddToGemmIR
from .rmsnorm import RMSNormIR
from .transpose import TransposeTransposeIR

IR_PATTERNS = (TransposeTransposeIR, MatMulAddToGemmIR, RMSNormIR)
