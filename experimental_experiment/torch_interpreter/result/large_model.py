"""The large-model branch of :func:`to_onnx`: models without weights (``meta`` device,
fake tensors), weights pinned to external data, the container.

A model whose weights have no data exports as any other: its inputs are moved to the
weights' device (or fake mode) before the capture, its initializers are declared
external, to be filled later from checkpoints
(:func:`experimental_experiment.large.fill_weights`). Weights going to external data are
never folded by the optimizer (a transposed weight stays ``Transpose(weight)``,
onnxruntime folds it when the session loads): every external initializer is a weight
of the model, under its state dict name, recorded in the model's metadata.
"""

from __future__ import annotations

import logging
import warnings
from typing import BinaryIO

import torch

from ...progress import Progress
from ...xbuilder import GraphBuilder
from ...xbuilder.model_container import PROTOBUF_LIMIT, ModelContainer, builder_to_container
from .._torch_helper import TorchTensorRef, has_data, onnx_dtype_to_torch
from ..errors import InvalidArgumentError, UnfilledWeightsWarning
from ..stages import ExampleInputs, SerializationPlan

logger = logging.getLogger(__name__)


def _first_weight_without_data(model) -> torch.Tensor | None:
    if isinstance(model, torch.export.ExportedProgram):
        tensors = list(model.state_dict.values())
    elif isinstance(model, torch.nn.Module):
        tensors = [*model.parameters(), *model.buffers()]
    else:
        return None
    return next((t for t in tensors if not has_data(t)), None)


def weight_free_inputs(
    model: torch.nn.Module | torch.export.ExportedProgram,
    inputs: ExampleInputs,
    plan: SerializationPlan,
) -> ExampleInputs:
    """Moves the inputs to the device (or the fake mode) of weights without data and
    records it in ``plan.weight_free``. Raises when such a model would be returned as
    a ModelProto (it has no data to put in it)."""
    weight = _first_weight_without_data(model)
    if weight is None:
        return inputs
    if not plan.may_be_weight_free:
        raise InvalidArgumentError(
            f"the model's weights have no data (device {weight.device}, "
            f"{type(weight).__name__}): export it with large_model=True (a container "
            "to save) or filename=... (saved with external data), then fill the weights "
            "with experimental_experiment.large.fill_weights"
        )
    _warn_non_persistent(model)
    from torch._subclasses.fake_tensor import FakeTensor

    if isinstance(weight, FakeTensor):

        def move(t):
            return t if isinstance(t, FakeTensor) else weight.fake_mode.from_tensor(t)
    else:

        def move(t):
            return t.to(weight.device)

    args, kwargs = torch.utils._pytree.tree_map_only(
        torch.Tensor, move, (inputs.args, inputs.kwargs)
    )
    logger.info("weights without data: inputs moved to %s", weight.device)
    plan.weight_free = True
    return ExampleInputs(args, kwargs)


def _warn_non_persistent(model) -> None:
    """Non-persistent buffers are in no checkpoint: without data, they stay unfilled."""
    if not isinstance(model, torch.nn.Module):
        return
    saved = set(model.state_dict())
    missing = [n for n, b in model.named_buffers() if n not in saved and not has_data(b)]
    if missing:
        warnings.warn(
            f"non-persistent buffers {missing[:5]} have no data and are in no checkpoint: "
            "fill_weights will leave them unfilled. Create them with data (build the "
            "module on the cpu device, or rebuild these buffers) before the export, or "
            "fill them from a file of your own.",
            UnfilledWeightsWarning,
            stacklevel=3,
        )


def pin_weights(builder: GraphBuilder, plan: SerializationPlan) -> bool:
    """Decides whether the model goes to external data (``large_model``, weights
    without data or weights past 2 GB) and pins the model's weights which will: the
    optimizer leaves them as they are. Records the decision in ``plan.external`` and
    returns it."""
    refs = [v for v in builder.initializers.values() if isinstance(v, TorchTensorRef)]
    plan.external = plan.forces_external or sum(r.nbytes for r in refs) >= PROTOBUF_LIMIT
    if plan.external:
        for ref in refs:
            ref.pinned = not ref.has_data or ref.nbytes >= plan.threshold
    return plan.external


def _aliases(model) -> dict[str, list[str]]:
    """Every name of a tensor shared under several names (tied weights: a checkpoint
    may store it under the other name, ``save_pretrained`` keeps one)."""
    if not isinstance(model, torch.nn.Module):
        return {}
    groups: dict[int, list[str]] = {}
    named = [
        *model.named_parameters(remove_duplicate=False),
        *model.named_buffers(remove_duplicate=False),
    ]
    for name, t in named:
        groups.setdefault(id(t), []).append(name)
    return {n: [n, *(m for m in g if m != n)] for g in groups.values() if len(g) > 1 for n in g}


def make_container(
    builder: GraphBuilder,
    threshold: int,
    filename: str | None,
    model: torch.nn.Module | torch.export.ExportedProgram | None = None,
    progress: Progress | None = None,
) -> ModelContainer:
    """The container of the builder, saved to ``filename`` if given; the sources of
    tied weights list every name they have in ``model``; ``progress`` (a
    ``experimental_experiment.progress.Progress`` or None) counts the
    bytes saved."""
    container = builder_to_container(builder, threshold)
    aliases = _aliases(model)
    for init, source in container.sources.items():
        if source in aliases:
            container.sources[init] = aliases[source]
    if filename:
        container.save(filename, progress=progress)
    return container


def write_tensor(tensor: torch.Tensor, f: BinaryIO) -> None:
    """Writes the bytes of a tensor as external data stores them, at the file position."""
    TorchTensorRef(tensor).write_to(f)


__all__ = [
    "make_container",
    "onnx_dtype_to_torch",
    "pin_weights",
    "weight_free_inputs",
    "write_tensor",
]
