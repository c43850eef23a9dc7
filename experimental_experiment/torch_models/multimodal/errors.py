"""Errors of the multimodal export."""

from __future__ import annotations

from ...errors import ExportError


class MultimodalPartsError(ExportError):
    """The parts of a multimodal model (vision or audio encoder, token embeddings,
    decoder with a cache) cannot be identified.

    Cause: the model has no ``get_image_features`` (or ``get_audio_features``), no
    input embeddings, no image token id in its configuration, or a forward that takes
    neither ``inputs_embeds`` nor a cache; the message names the model class and what
    is missing.

    Fix: write the three wrappers for the model (see
    ``experimental_experiment.torch_models.multimodal.parts``): one calling its vision
    tower and projector, one merging the features into the token embeddings, one calling
    its language model with ``inputs_embeds`` and a cache; export each with ``to_onnx``."""


__all__ = ["MultimodalPartsError"]
