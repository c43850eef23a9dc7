"""Complex values as real pairs: the representation the interpreter and the complex
converters (``aten/complex_numbers.py``) share.

A complex tensor of shape ``(..., n)`` is carried as a real tensor of shape
``(..., n, 2)``, what ``torch.view_as_real`` returns (complex64 -> float32, complex128
-> float64); the model's complex inputs and outputs are named ``<name>_real_imag``.
"""

from __future__ import annotations

from types import MappingProxyType

import torch
import torch.fx.node
from onnx import TensorProto

#: element type of the real pairs of a complex dtype
PAIR_TYPE = MappingProxyType(
    {torch.complex64: TensorProto.FLOAT, torch.complex128: TensorProto.DOUBLE}
)
#: torch dtype of the real pairs of a complex dtype
PAIR_DTYPE = MappingProxyType({torch.complex64: torch.float32, torch.complex128: torch.float64})
#: suffix of the names of complex inputs and outputs (real pairs)
SUFFIX = "_real_imag"


def is_complex_value(val: object) -> bool:
    """Tells if a node's value (or one of a sequence of values) is a complex tensor."""
    if isinstance(val, (list, tuple)):
        return any(is_complex_value(v) for v in val)
    return isinstance(val, torch.Tensor) and val.is_complex()


def uses_complex(node: torch.fx.Node) -> bool:
    """Tells if the node reads or produces a complex tensor."""
    if is_complex_value(node.meta.get("val")):
        return True
    found = []
    torch.fx.node.map_arg(
        (node.args, node.kwargs), lambda n: found.append(is_complex_value(n.meta.get("val")))
    )
    return any(found)


def complex_name(name: str) -> str:
    """The name of a complex input or output of the model: ``<name>_real_imag``."""
    return name if name.endswith(SUFFIX) else f"{name}{SUFFIX}"
