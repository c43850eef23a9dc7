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
from .families import (
    config_image_size,
    cross_attention_names,
    flattened_patches,
    image_token_id,
    is_cross_attention_lm,
    is_image_seq2seq,
)

#: inputs of the forward of an encoder-decoder model that the encoder reads
ENCODER_INPUTS = ("pixel_values", "flattened_patches", "input_ids", "attention_mask")


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
        """The encoder part: ``DocumentEncoder`` for an encoder reading word boxes
        (UDOP), whose output has positions the decoder must not see, else
        ``ImageEncoder``."""
        if "bbox" in self.encoder_inputs:
            return DocumentEncoder(self.model, list(self.encoder_inputs))
        return ImageEncoder(self.model, list(self.encoder_inputs))

    @property
    def decoder_model(self):
        """The model the decoder part calls: the text decoder of BLIP, else the model."""
        return getattr(self.model, "text_decoder", None) or self.model

    def end_tokens(self) -> list[int]:
        """The end-of-sequence tokens ``generate`` never chooses here: BLIP's generate
        ends on the separator token."""
        from .run import end_token_ids

        if self.decoder_model is self.model:
            return end_token_ids(self.model)
        return [self.model.config.text_config.sep_token_id]

    def generate_inputs(self) -> dict:
        """The inputs of ``generate``: BLIP's generate drops the last token of
        ``input_ids`` (the separator its processor appends), starts with the
        beginning-of-sequence token and sets the padding token itself."""
        if self.decoder_model is self.model:
            return dict(
                **self.encoder_inputs, decoder_input_ids=self.decoder_input_ids, pad_token_id=0
            )
        sep = torch.zeros_like(self.decoder_input_ids[:, :1])
        ids = torch.cat([self.decoder_input_ids, sep], dim=1)
        return dict(**self.encoder_inputs, input_ids=ids)


class ImageEncoder(torch.nn.Module):
    """The encoder inputs (named ``names``, in order) to the encoder states: the model's
    forward with the decoder start token, ``encoder_last_hidden_state``, or the last
    states of the vision model when the forward takes no encoder outputs (BLIP)."""

    def __init__(self, model, names: list[str]):
        super().__init__()
        self.model = model
        self.names = names
        self.start = decoder_start_token_id(model)

    def forward(self, *args):
        kwargs = dict(zip(self.names, args))
        if "encoder_outputs" not in inspect.signature(self.model.forward).parameters:
            return self.model.vision_model(**kwargs).last_hidden_state
        batch = args[0].shape[0]
        start = torch.full((batch, 1), self.start, dtype=torch.int64, device=args[0].device)
        out = self.model(**kwargs, decoder_input_ids=start, use_cache=False)
        return out.encoder_last_hidden_state


class DocumentEncoder(torch.nn.Module):
    """The words, their boxes and the image of a document (UDOP, inputs named ``names``,
    in order) to the encoder states and their attention mask, as ``generate`` computes
    them (the model's encoder) and the decoder reads them (``encoder_outputs``).

    The encoder drops the image patches the word boxes cover and pads the others with
    zeros to the number of patches: the sequence keeps its length (the words, then the
    patches), the mask is 0 on the padding, which the decoder must not attend to.
    During the export the patch ``_udop_patches_by_gather`` (``patch_models``) moves
    the kept patches first with a gather instead of a boolean index, whose number of
    rows only the values of ``bbox`` know."""

    def __init__(self, model, names: list[str]):
        super().__init__()
        self.model = model
        self.names = names

    def forward(self, *args):
        out = self.model.get_encoder()(**dict(zip(self.names, args)))
        return out.last_hidden_state, out.attention_mask


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


def make_encoder_inputs(model, prompt: int = 3, seed: int = 0) -> tuple[dict, dict]:
    """Random encoder inputs ``(inputs, dynamic shapes)``: pixels of the image size of the
    vision configuration, or the flattened patches of Pix2Struct (row and column
    indices first) with their mask, and, when the encoder reads a prompt, ``prompt``
    random tokens after the image tokens."""
    gen = torch.Generator().manual_seed(seed)
    params = set(inspect.signature(model.forward).parameters)
    config = model.config
    encoder = getattr(config, "encoder", None)
    vc = (
        getattr(config, "vision_config", None)
        or getattr(encoder, "vision_config", None)  # T5Gemma 2: a Gemma 3 encoder
        or encoder
        or config
    )
    inputs: dict[str, Any] = {}
    ds: dict[str, Any] = {}
    if "flattened_patches" in params:
        inputs["flattened_patches"] = flattened_patches(vc, gen)
        inputs["attention_mask"] = torch.ones(
            inputs["flattened_patches"].shape[:2], dtype=torch.int64
        )
        ds = {"flattened_patches": {0: "batch"}, "attention_mask": {0: "batch"}}
        return inputs, ds
    channels = getattr(vc, "num_channels", None) or getattr(vc, "in_channels", 3)
    size = config_image_size(vc)
    inputs["pixel_values"] = torch.randn(1, channels, size, size, generator=gen)
    ds["pixel_values"] = {0: "batch"}
    if "bbox" in params:  # UDOP: the words of a document and their boxes
        vocab = config.get_text_config(decoder=True).vocab_size
        ids = torch.randint(4, vocab - 64, (1, prompt), generator=gen)
        corners = torch.rand(1, prompt, 2, 2, generator=gen).sort(dim=2).values
        inputs["input_ids"] = ids
        inputs["bbox"] = corners.reshape(1, prompt, 4)  # x0, y0, x1, y1
        inputs["attention_mask"] = torch.ones_like(ids)
        ds.update(
            input_ids={0: "batch", 1: "seq"},
            bbox={0: "batch", 1: "seq"},
            attention_mask={0: "batch", 1: "seq"},
        )
    token = _image_token(model)
    if "input_ids" in params and "encoder_outputs" in params and token is not None:
        from .families import image_features_function

        with torch.no_grad():
            n = image_features_function(model)(inputs["pixel_values"]).pooler_output.shape[1]
        vocab = config.get_text_config(decoder=True).vocab_size
        text = torch.randint(4, vocab - 64, (1, prompt), generator=gen)
        text[text == token] = 4
        ids = torch.cat([torch.full((1, n), token, dtype=torch.int64), text], dim=1)
        inputs["input_ids"] = ids
        inputs["attention_mask"] = torch.ones_like(ids)
        ds.update(input_ids={0: "batch", 1: "seq"}, attention_mask={0: "batch", 1: "seq"})
    return inputs, ds


def _image_token(model) -> int | None:
    """The image token of an encoder reading a prompt with image placeholders
    (Florence-2 ``image_token_id``, T5Gemma 2 ``image_token_index``), else None."""
    try:
        return image_token_id(model)
    except MultimodalPartsError:
        return None


def build_image_seq2seq(
    model_type: str, prompt: int = 1, batch: int = 1, seed: int = 0, model=None
) -> ImageSeq2SeqCase:
    """The tiny model (``build_model``, or ``model``), its encoder inputs
    (``make_encoder_inputs``) and a decoder prompt of the start token followed by
    ``prompt - 1`` random tokens; ``batch`` copies of both."""
    from .cases import build_model

    if not is_image_seq2seq(model_type):
        raise MultimodalPartsError(f"{model_type!r} is not an image encoder-decoder model")
    if model is None:
        model = build_model(model_type, seed=seed)
        decoder = getattr(model, "text_decoder", None)
        if decoder is not None and model.get_output_embeddings() is None:
            from .cases import sharpen_logits

            sharpen_logits(decoder)  # BLIP: the head is the text decoder's
    _prepare(model)
    if getattr(model, "text_decoder", None) is not None:
        _prepare(model.text_decoder)
    inputs, ds = make_encoder_inputs(model, seed=seed)
    inputs = {k: v.expand(batch, *v.shape[1:]).contiguous() for k, v in inputs.items()}
    gen = torch.Generator().manual_seed(seed + 1)
    vocab = model.config.get_text_config(decoder=True).vocab_size
    start = torch.full((batch, 1), decoder_start_token_id(model), dtype=torch.int64)
    rest = torch.randint(4, vocab - 64, (batch, prompt - 1), generator=gen)
    return ImageSeq2SeqCase(model_type, model, inputs, torch.cat([start, rest], dim=1), ds)


# --- a decoder-only language model with cross-attention layers (Mllama) ---


@dataclass
class CrossAttentionCase:
    """A tiny language model with cross-attention layers, one image (the pixels of its
    tiles and their aspect ratio), a prompt holding the image token and the mask of the
    image tiles every token sees (``cross_attention_mask``, ``(batch, seq, images,
    tiles)``: the tokens from the image token on see its tile, the ones before see
    nothing, as the processor builds it)."""

    model_type: str
    model: Any
    vision_inputs: dict
    input_ids: torch.Tensor
    cross_attention_mask: torch.Tensor


class CrossVisionEncoder(torch.nn.Module):
    """The image (pixels of its tiles, aspect ratio id and mask for Mllama, the pixels
    of ``(batch, images, c, h, w)`` for IDEFICS) to the states the cross-attention
    layers attend to, ``(batch, n_states, hidden)`` (Mllama), ``(batch, images,
    n_states, hidden)`` (IDEFICS)."""

    def __init__(self, model):
        super().__init__()
        self.model = model

    def forward(self, pixel_values, aspect_ratio_ids=None, aspect_ratio_mask=None):
        inner = self.model.model
        if aspect_ratio_ids is None:  # IDEFICS
            batch, images = pixel_values.shape[:2]
            flat = pixel_values.reshape(batch * images, *pixel_values.shape[2:])
            states = inner.vision_model(pixel_values=flat).last_hidden_state
            if getattr(self.model.config, "use_resampler", False):
                states = inner.perceiver_resampler(states)
            return states.reshape(batch, images, *states.shape[1:])
        states = inner.vision_model(
            pixel_values=pixel_values,
            aspect_ratio_ids=aspect_ratio_ids,
            aspect_ratio_mask=aspect_ratio_mask,
        ).last_hidden_state
        states = inner.multi_modal_projector(states)
        return states.reshape(pixel_values.shape[0], -1, states.shape[-1])


def _cross_layers(model) -> tuple[int, set[int]]:
    """The number of layers of the cache, the indices of those of cross-attention
    (Mllama; none for IDEFICS, whose gated cross-attention layers have no cache)."""
    text = model.config.get_text_config(decoder=True)
    n = text.num_hidden_layers
    return n, {i for i in getattr(text, "cross_attention_layers", []) if i < n}


class CrossAttentionDecoder(torch.nn.Module):
    """Tokens, mask, positions, the cache of the self-attention layers, the image
    states and the tiles the new tokens see (``cross_attention_mask``) in, logits and
    the present self-attention cache out. The cross-attention
    layers get an empty cache entry at every call: they project the image states again
    (as Whisper's decoder does here), their keys and values never leave the graph."""

    def __init__(self, model):
        super().__init__()
        self.model = model
        self.n_layers, self.cross = _cross_layers(model)
        self.states_name, self.mask_name = cross_attention_names(model)

    def forward(
        self,
        input_ids,
        attention_mask,
        position_ids,
        past_key_values,
        cross_attention_states,
        cross_attention_mask,
    ):
        from transformers.cache_utils import DynamicCache

        from ..causal_lm import output_cache

        cache = DynamicCache()
        own = iter(past_key_values.layers)
        first = past_key_values.layers[0].keys
        for i in range(self.n_layers):
            if i in self.cross:
                empty = first[:, :, :0]
                cache.update(empty, empty, i)
            else:
                layer = next(own)
                cache.update(layer.keys, layer.values, i)
        out = self.model(
            input_ids=input_ids,
            attention_mask=attention_mask,
            position_ids=position_ids,
            past_key_values=cache,
            **{self.states_name: cross_attention_states, self.mask_name: cross_attention_mask},
            use_cache=True,
        )
        full: Any = output_cache(out)
        present = DynamicCache()
        j = 0
        for i in range(self.n_layers):
            if i not in self.cross:
                present.update(full.layers[i].keys, full.layers[i].values, j)
                j += 1
        return out.logits, present


def open_gates(model, seed: int = 0):
    """Gives the gates of the cross-attention layers (parameters named ``*gate*`` or
    ``alpha_*`` (IDEFICS), zeros
    after initialization: ``tanh(0)`` closes them and the image changes nothing) random
    values in [0.5, 1]."""
    gen = torch.Generator().manual_seed(seed + 5)
    with torch.no_grad():
        for name, param in model.named_parameters():
            last = name.rsplit(".", 1)[-1]
            if ("gate" in last or last.startswith("alpha_")) and not param.any():
                param.copy_(0.5 + 0.5 * torch.rand(param.shape, generator=gen))
    return model


def build_cross_attention(
    model_type: str, prompt: tuple[int, int] = (3, 4), seed: int = 0, model=None
) -> CrossAttentionCase:
    """The tiny model (``build_model``, or ``model``), one image of one tile (aspect
    ratio 1x1, the other tiles masked) and a prompt of ``prompt[0]`` tokens, the image
    token, ``prompt[1]`` tokens."""
    from .cases import _text_ids, build_model
    from .families import image_token_id

    if not is_cross_attention_lm(model_type):
        raise MultimodalPartsError(f"{model_type!r} has no cross-attention layers")
    model = open_gates(build_model(model_type, seed=seed), seed) if model is None else model
    vc = model.config.vision_config
    gen = torch.Generator().manual_seed(seed)
    size, channels = vc.image_size, getattr(vc, "num_channels", 3)
    vocab = model.config.get_text_config(decoder=True).vocab_size
    tiles = getattr(vc, "max_num_tiles", None)
    if tiles is None:  # IDEFICS: one image, any token (the processor's <image>) marks it
        token = 4
        inputs: dict = {"pixel_values": torch.randn(1, 1, channels, size, size, generator=gen)}
    else:
        pixels = torch.randn(1, 1, tiles, channels, size, size, generator=gen)
        pixels[:, :, 1:] = 0
        ratio_ids = torch.tensor([[1]], dtype=torch.int64)  # (1, 1): one tile
        ratio_mask = torch.zeros((1, 1, tiles), dtype=torch.int64)
        ratio_mask[..., 0] = 1
        inputs = dict(pixel_values=pixels, aspect_ratio_ids=ratio_ids, aspect_ratio_mask=ratio_mask)
        token = image_token_id(model)
    gen = torch.Generator().manual_seed(seed + 2)
    avoid = {token} | {
        v
        for k, v in model.config.to_dict().items()
        if k.endswith(("_token_id", "_token_index")) and isinstance(v, int)
    }
    ids = (
        _text_ids(vocab, prompt[0], avoid, gen) + [token] + _text_ids(vocab, prompt[1], avoid, gen)
    )
    # the tokens from the image token on see the image (its first tile)
    seen = torch.zeros((1, len(ids), 1) + ((tiles,) if tiles else ()), dtype=torch.int64)
    if tiles:
        seen[:, prompt[0] :, :, 0] = 1
    else:
        seen[:, prompt[0] :, :] = 1
    return CrossAttentionCase(
        model_type, model, inputs, torch.tensor([ids], dtype=torch.int64), seen
    )


def _self_cache(model, batch: int, past: int, generator=None):
    from transformers.cache_utils import DynamicCache

    from ..llm_helper import _cache_geometry

    n, cross = _cross_layers(model)
    _, n_kv, head_dim = _cache_geometry(model.config)
    cache = DynamicCache()
    for j in range(n - len(cross)):
        shape = (batch, n_kv, past, head_dim)
        cache.update(
            torch.randn(*shape, generator=generator), torch.randn(*shape, generator=generator), j
        )
    return cache


def export_cross_attention_parts(case: CrossAttentionCase):
    """Exports the vision part (the example image) and the decoder (dynamic batch,
    sequence, cache length)."""
    import time

    from ..llm_helper import cache_dynamic_shapes
    from .export import ExportedParts, export_part

    result = ExportedParts()
    begin = time.perf_counter()
    vision = CrossVisionEncoder(case.model)
    result.models["vision"] = export_part(vision, tuple(case.vision_inputs.values()))
    result.times["vision"] = time.perf_counter() - begin
    begin = time.perf_counter()
    with torch.no_grad():
        shape = vision(*case.vision_inputs.values()).shape
    gen = torch.Generator().manual_seed(0)
    batch, seq, past = 2, 3, 5
    cache = _self_cache(case.model, batch, past, generator=gen)
    vocab = case.model.config.get_text_config(decoder=True).vocab_size
    kwargs = dict(
        input_ids=torch.randint(0, vocab, (batch, seq), generator=gen),
        attention_mask=torch.ones((batch, past + seq), dtype=torch.int64),
        position_ids=torch.arange(past, past + seq).expand(batch, -1).contiguous(),
        past_key_values=cache,
        cross_attention_states=torch.randn(batch, *shape[1:], generator=gen),
        cross_attention_mask=case.cross_attention_mask[:, -1:]
        .expand(batch, seq, *case.cross_attention_mask.shape[2:])
        .contiguous(),
    )
    ds = dict(
        input_ids={0: "batch", 1: "seq"},
        attention_mask={0: "batch", 1: "total"},
        position_ids={0: "batch", 1: "seq"},
        past_key_values=cache_dynamic_shapes(len(cache.layers)),
        cross_attention_states={0: "batch"},
        cross_attention_mask={0: "batch", 1: "seq"},
    )
    result.models["decoder"] = export_part(
        CrossAttentionDecoder(case.model), (), dynamic_shapes=ds, kwargs=kwargs
    )
    result.times["decoder"] = time.perf_counter() - begin
    return result


def check_cross_attention_generation(case: CrossAttentionCase, parts, steps: int = 8) -> dict:
    """Greedy tokens of the chained ONNX parts (vision once, the decoder with the image
    states at every step) against eager ``generate``; the report of
    ``check_generation``."""
    import numpy as np

    from ..decoding_check import eager_greedy_decoding
    from ..onnx_outputs import user_outputs
    from .run import end_token_ids, generation_report, greedy_token, session

    model, ids = case.model, case.input_ids
    mask = {cross_attention_names(model)[1]: case.cross_attention_mask}
    eager = eager_greedy_decoding(model, ids, steps, **mask, **case.vision_inputs)

    vision, decoder = session(parts.models["vision"]), session(parts.models["decoder"])
    feeds = dict(
        zip([i.name for i in vision.get_inputs()], [v.numpy() for v in case.vision_inputs.values()])
    )
    states: Any = vision.run(None, feeds)[0]
    names = [i.name for i in decoder.get_inputs()]
    batch = ids.shape[0]
    cache = {
        i.name: np.zeros((batch, i.shape[1], 0, i.shape[3]), dtype=np.float32)
        for i in decoder.get_inputs()[3:-2]
    }
    seen: Any = case.cross_attention_mask.numpy()
    eos = end_token_ids(model)
    tokens_: Any = ids.numpy()
    past, tokens, logits = 0, [], []
    for _ in range(steps):
        seq = tokens_.shape[1]
        outputs: list[Any] = user_outputs(
            decoder,
            list(
                decoder.run(
                    None,
                    {
                        names[0]: tokens_,
                        names[1]: np.ones((batch, past + seq), dtype=np.int64),
                        names[2]: np.arange(past, past + seq, dtype=np.int64)[None].repeat(
                            batch, 0
                        ),
                        names[-2]: states,
                        names[-1]: seen,
                        **cache,
                    },
                )
            ),
        )
        last = outputs[0][:, -1, :]
        logits.append(last)
        tokens_ = greedy_token(last, eos)
        tokens.append(tokens_)
        cache = dict(zip(names[3:-2], outputs[1:]))
        seen = seen[:, -1:]  # a new token sees what the last one saw
        past += seq
    return generation_report(eager, (np.concatenate(tokens, axis=1), logits), eos)


__all__ = [
    "CrossAttentionCase",
    "CrossAttentionDecoder",
    "CrossVisionEncoder",
    "DocumentEncoder",
    "ENCODER_INPUTS",
    "ImageEncoder",
    "ImageSeq2SeqCase",
    "build_cross_attention",
    "build_image_seq2seq",
    "check_cross_attention_generation",
    "decoder_start_token_id",
    "export_cross_attention_parts",
    "make_encoder_inputs",
    "open_gates",
]
