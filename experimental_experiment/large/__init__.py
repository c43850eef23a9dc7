"""Large models: weights filled from checkpoints into the external data of a model
exported without them (``to_onnx(..., large_model=True)`` on a ``meta`` model)."""

from .checkpoint_checks import CheckpointError
from .checkpoints import CheckpointTensor, read_checkpoints
from .fill import FillReport, WeightsMismatchError, fill_weights, match_checkpoints
from .matching import match_names

__all__ = [
    "CheckpointError",
    "CheckpointTensor",
    "FillReport",
    "WeightsMismatchError",
    "fill_weights",
    "match_checkpoints",
    "match_names",
    "read_checkpoints",
]
