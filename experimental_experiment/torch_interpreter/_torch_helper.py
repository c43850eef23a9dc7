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


def has_data(t: torch.Tensor) -> bool:
    """False for a tensor without storage: on the ``meta`` device or a fake tensor."""
    from torch._subclasses.fake_tensor import FakeTensor

    return not (t.is_meta or isinstance(t, FakeTensor))


class TorchTensorRef:
    """An initializer kept as a reference to a torch tensor until serialization.

    ``source`` is the name of the model's weight (state dict key) it holds; ``pinned``
    (set for large models) keeps the builder from folding it: it stays the model's
    weight, written to external data as it is, and can be filled from a checkpoint.
    """

    __slots__ = ("tensor", "elem_type", "shape", "source", "pinned", "has_data")

    def __init__(self, tensor: torch.Tensor, source: str | None = None):
        self.tensor = tensor.detach()
        self.elem_type = torch_dtype_to_onnx(tensor.dtype)
        self.shape = tuple(tensor.shape)
        self.source = source
        self.pinned = False
        self.has_data = has_data(tensor)

    @property
    def foldable(self) -> bool:
        return self.has_data and not self.pinned

    @property
    def nbytes(self) -> int:
        return self.tensor.numel() * self.tensor.element_size()

    def _cpu(self) -> torch.Tensor:
        if not self.has_data:
            raise ValueError(
                f"weight {self.source!r} has no data (device "
                f"{self.tensor.device}): save it as external data and fill it "
                "from a checkpoint (experimental_experiment.large.fill_weights)"
            )
        t = self.tensor.cpu().contiguous()
        if t.dtype == torch.bfloat16:
            return t.view(torch.int16)
        return t.to(torch.uint8) if t.dtype == torch.bool else t

    def to_numpy(self) -> np.ndarray:
        self._cpu()  # the error for a tensor without data
        return tensor_to_numpy(self.tensor)

    def write_to(self, f) -> None:
        """Writes the tensor's bytes at the file position (no copy when contiguous)."""
        f.write(memoryview(self._cpu().numpy()).cast("B"))

    def to_tensor_proto(self, name: str) -> TensorProto:
        return self.fill_tensor_proto(TensorProto(), name)

    def fill_tensor_proto(self, proto: TensorProto, name: str) -> TensorProto:
        """Writes name, type, shape and bytes into ``proto`` (e.g. an element just added
        to ``model.graph.initializer``) and returns it."""
        proto.name = name
        proto.data_type = self.elem_type
        proto.dims.extend(self.shape)
        proto.raw_data = self._cpu().numpy().tobytes()
        return proto
