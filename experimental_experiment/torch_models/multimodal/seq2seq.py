"""Image-to-text encoder-decoder models (VisionEncoderDecoder, Pix2Struct, Florence-2,
PP-FormulaNet): the image (and the encoder's text prompt, if the encoder takes one) goes
through the encoder once, a text decoder with cross-attention generates. They take the
path of Whisper (``speech``): the encoder part returns the encoder states, the decoder part
takes the tokens, the encoder states and the self-attention cache.

The encoder part calls the model's own forward with a one-token decoder prompt and returns
``encoder_last_hidden_state`` (the decoder nodes, unused, are removed from the graph): the
model merges the image features into its encoder's prompt (Florence-2) as ``generate``
does, whatever the inputs of its encoder are called (``pixel_values``,
``flattened_patches``).

.. code-block:: python

    case = build_image_seq2seq("vision-encoder-decoder")
    parts = export_speech_parts(case)
    report = check_speech_generation(case, parts, steps=8)
"""

from __future__ import annotations

import inspect
from dataclasses import dataclass, field
from typing import Any

import torch

from .errors import MultimodalPartsError

#: inputs of the forward of an encoder-decoder model that the encoder reads
ENCODER_INPUTS = ("pixel_values", "flattened_patches", "input_ids", "attention_mask")


def is_image_seq2seq(model_type: str) -> bool:
    """True when the image-text-to-text class of ``model_type`` is an encoder-decoder
    model reading an image (its forward takes ``encoder_outputs`` and pixels or
    patches)."""
    import transformers
    from transformers.models.auto import modeling_auto

    name = modeling_auto.MODEL_FOR_IMAGE_TEXT_TO_TEXT_MAPPING_NAMES.get(model_type)
    cls = getattr(transformers, name, None) if name else None
    if cls is None:
        return False
    params = set(inspect.signature(cls.forward).parameters)
    return "encoder_outputs" in params and bool(params & {"pixel_values", "flattened_patches"})


@dataclass
class ImageSeq2SeqCase:
    """A tiny image-to-text encoder-decoder model, the inputs of its encoder (the image,
    the encoder prompt) and the decoder prompt; ``encoder`` and ``encoder_inputs`` are
    what ``export_speech_parts`` and ``check_speech_generation`` read."""

    model_type: str
    model: Any
    encoder_inputs: dict
    decoder_input_ids: torch.Tensor
    encoder_dynamic_shapes: dict = field(default_factory=dict)

    def encoder(self) -> torch.nn.Module:
        return ImageEncoder(self.model, list(self.encoder_inputs))


class ImageEncoder(torch.nn.Module):
    """The encoder inputs (named ``names``, in order) to the encoder states: the model's
    forward with the decoder start token, ``encoder_last_hidden_state``."""

    def __init__(self, model, names: list[str]):
        super().__init__()
        self.model = model
        self.names = names
        self.start = decoder_start_token_id(model)

    def forward(self, *args):
        kwargs = dict(zip(self.names, args))
        batch = args[0].shape[0]
        start = torch.full((batch, 1), self.start, dtype=torch.int64, device=args[0].device)
        out = self.model(**kwargs, decoder_input_ids=start, use_cache=False)
        return out.encoder_last_hidden_state


def decoder_start_token_id(model) -> int:
    """The first token of the decoder prompt: ``decoder_start_token_id`` of the model,
    the generation or the text configuration, else ``bos_token_id``, else 0."""
    text = model.config.get_text_config(decoder=True)
    for owner in (model.generation_config, model.config, text):
        for name in ("decoder_start_token_id", "bos_token_id"):
            value = getattr(owner, name, None)
            if isinstance(value, int):
                return value
    return 0


def _prepare(model) -> None:
    """The generation configuration ``generate`` needs: a start and a padding token
    (tiny VisionEncoderDecoder configurations have none), no forced first or last token
    (the runtime chooses the greedy token at every step)."""
    start = decoder_start_token_id(model)
    gc: Any = model.generation_config
    gc.decoder_start_token_id = start
    model.config.decoder_start_token_id = start
    if getattr(model.config, "pad_token_id", None) is None:
        model.config.pad_token_id = 0
    if gc.pad_token_id is None:
        gc.pad_token_id = 0
    # BART-like decoders force the end-of-sequence token at the last step
    gc.forced_eos_token_id, gc.forced_bos_token_id = None, None


def _image_size(vc) -> int:
    size = getattr(vc, "image_size", None)
    if isinstance(size, (list, tuple)):
        size = size[0]
    return size if isinstance(size, int) else 64


def make_encoder_inputs(model, prompt: int = 3, seed: int = 0) -> tuple[dict, dict]:
    """Random encoder inputs ``(inputs, dynamic shapes)``: pixels of the image size of the
    vision configuration, or the flattened patches of Pix2Struct (row and column
    indices first) with their mask, and, when the encoder reads a prompt, ``prompt``
    random tokens after the image tokens."""
    gen = torch.Generator().manual_seed(seed)
    params = set(inspect.signature(model.forward).parameters)
    config = model.config
    vc = getattr(config, "vision_config", None) or getattr(config, "encoder", None) or config
    inputs: dict[str, Any] = {}
    ds: dict[str, Any] = {}
    if "flattened_patches" in params:
        side = 4
        rows, cols = torch.meshgrid(
            torch.arange(1, side + 1), torch.arange(1, side + 1), indexing="ij"
        )
        values = torch.randn(side * side, vc.patch_embed_hidden_size, generator=gen)
        patches = torch.cat([rows.reshape(-1, 1), cols.reshape(-1, 1), values], dim=1)
        inputs["flattened_patches"] = patches.unsqueeze(0).to(torch.float32)
        inputs["attention_mask"] = torch.ones((1, side * side), dtype=torch.int64)
        ds = {"flattened_patches": {0: "batch"}, "attention_mask": {0: "batch"}}
        return inputs, ds
    channels = getattr(vc, "num_channels", None) or getattr(vc, "in_channels", 3)
    size = _image_size(vc)
    inputs["pixel_values"] = torch.randn(1, channels, size, size, generator=gen)
    ds["pixel_values"] = {0: "batch"}
    if "input_ids" in params and "image_token_id" in config.to_dict():
        from .parts import image_features_function

        with torch.no_grad():
            n = image_features_function(model)(inputs["pixel_values"]).pooler_output.shape[1]
        token = config.image_token_id
        vocab = config.get_text_config(decoder=True).vocab_size
        text = torch.randint(4, vocab - 64, (1, prompt), generator=gen)
        text[text == token] = 4
        ids = torch.cat([torch.full((1, n), token, dtype=torch.int64), text], dim=1)
        inputs["input_ids"] = ids
        inputs["attention_mask"] = torch.ones_like(ids)
        ds.update(input_ids={0: "batch", 1: "seq"}, attention_mask={0: "batch", 1: "seq"})
    return inputs, ds


def build_image_seq2seq(
    model_type: str, prompt: int = 1, batch: int = 1, seed: int = 0, model=None
) -> ImageSeq2SeqCase:
    """The tiny model (``build_model``, or ``model``), its encoder inputs
    (``make_encoder_inputs``) and a decoder prompt of the start token followed by
    ``prompt - 1`` random tokens; ``batch`` copies of both."""
    from .cases import build_model

    if not is_image_seq2seq(model_type):
        raise MultimodalPartsError(f"{model_type!r} is not an image encoder-decoder model")
    model = build_model(model_type, seed=seed) if model is None else model
    _prepare(model)
    if "bbox" in inspect.signature(model.forward).parameters:
        raise MultimodalPartsError(
            f"{type(model).__name__} reads a document layout (bbox, visual_bbox): "
            "no generic encoder inputs"
        )
    inputs, ds = make_encoder_inputs(model, seed=seed)
    inputs = {k: v.expand(batch, *v.shape[1:]).contiguous() for k, v in inputs.items()}
    gen = torch.Generator().manual_seed(seed + 1)
    vocab = model.config.get_text_config(decoder=True).vocab_size
    start = torch.full((batch, 1), decoder_start_token_id(model), dtype=torch.int64)
    rest = torch.randint(4, vocab - 64, (batch, prompt - 1), generator=gen)
    return ImageSeq2SeqCase(model_type, model, inputs, torch.cat([start, rest], dim=1), ds)


__all__ = [
    "ENCODER_INPUTS",
    "ImageEncoder",
    "ImageSeq2SeqCase",
    "build_image_seq2seq",
    "decoder_start_token_id",
    "is_image_seq2seq",
    "make_encoder_inputs",
]
