"""Bridges between torch objects and the builder (dtypes, tensor references)."""

from __future__ import annotations

import numpy as np
import torch
from onnx import TensorProto

from ..runtime import tensor_to_numpy  # noqa: F401  (kept importable from here)

_TORCH_TO_ONNX = {
    torch.float32: TensorProto.FLOAT,
    torch.float64: TensorProto.DOUBLE,
    torch.float16: TensorProto.FLOAT16,
    torch.bfloat16: TensorProto.BFLOAT16,
    torch.int64: TensorProto.INT64,
    torch.int32: TensorProto.INT32,
    torch.int16: TensorProto.INT16,
    torch.int8: TensorProto.INT8,
    torch.uint8: TensorProto.UINT8,
    torch.uint16: TensorProto.UINT16,
    torch.uint32: TensorProto.UINT32,
    torch.uint64: TensorProto.UINT64,
    torch.bool: TensorProto.BOOL,
    torch.complex64: TensorProto.COMPLEX64,
    torch.complex128: TensorProto.COMPLEX128,
}
_ONNX_TO_TORCH = {v: k for k, v in _TORCH_TO_ONNX.items()}


def torch_dtype_to_onnx(dtype: torch.dtype) -> int:
    """ONNX element type of a torch dtype."""
    if dtype not in _TORCH_TO_ONNX:
        raise TypeError(f"torch dtype {dtype} has no ONNX element type")
    return _TORCH_TO_ONNX[dtype]


def onnx_dtype_to_torch(elem_type: int) -> torch.dtype:
    """Torch dtype of an ONNX element type."""
    return _ONNX_TO_TORCH[elem_type]


class TorchTensorRef:
    """An initializer kept as a reference to a torch tensor until serialization."""

    __slots__ = ("tensor", "elem_type", "shape")

    def __init__(self, tensor: torch.Tensor):
        self.tensor = tensor.detach()
        self.elem_type = torch_dtype_to_onnx(tensor.dtype)
        self.shape = tuple(tensor.shape)

    def to_numpy(self) -> np.ndarray:
        return tensor_to_numpy(self.tensor)

    def to_tensor_proto(self, name: str) -> TensorProto:
        proto = TensorProto()
        proto.name = name
        proto.data_type = self.elem_type
        proto.dims.extend(self.shape)
        t = self.tensor.cpu().contiguous()
        if t.dtype == torch.bfloat16:
            t = t.view(torch.int16)
        elif t.dtype == torch.bool:
            t = t.to(torch.uint8)
        proto.raw_data = t.numpy().tobytes()
        return proto
