"""Inputs of the heads ``--heads all`` adds to the zoo: multiple choice tokens,
images with a prompt (one prefill call, no cache), images with tokens (zero-shot
classification and detection, BLIP's questions), prompts for segmentation (points),
time series, text to speech, transducers (audio and tokens), longer audio for
x-vectors; the image size of the dense heads (detection, segmentation, depth) becomes
dynamic when the model accepts another one. The other heads go to
``experimental_experiment.bench.zoo_inputs.make_inputs``.

.. code-block:: python

    from experimental_experiment.bench.zoo_head_inputs import make_inputs

    inputs, ds = make_inputs(ZooCase("clip", "zero-shot-image-classification"), model,
                             config, dict(batch=2, seq=3, past=5, samples=1600))
"""

from __future__ import annotations

import inspect

import torch

from .zoo_configs import _is_int
from .zoo_heads import ZooCase
from .zoo_inputs import (
    _audio_inputs,
    _image_features_fn,
    _image_inputs,
    _signature_order,
    _text_inputs,
    codebooks,
)
from .zoo_inputs import make_inputs as _base_inputs

#: heads whose image size may be dynamic (convolutions or interpolated positions)
DENSE_HEADS = (
    "object-detection",
    "image-segmentation",
    "semantic-segmentation",
    "instance-segmentation",
    "universal-segmentation",
    "depth-estimation",
    "normal-estimation",
    "pointmap-estimation",
    "keypoint-detection",
    "image-to-image",
    "image-matting",
    "backbone",
)
#: heads given images and a prompt with image tokens
PROMPT_HEADS = ("image-text-to-text", "multimodal-lm", "visual-question-answering", "retrieval")
#: heads given images and tokens without image tokens
IMAGE_TEXT_HEADS = ("zero-shot-image-classification", "zero-shot-object-detection")
#: extra pixels of the check images of a dense head (a multiple of every usual stride)
GROW = 32
#: smallest export image side of a dense head: the deepest level of a detector (stride
#: 32 for DETR's ResNet, 64 for Deformable DETR's extra level) then has two rows; with
#: one, torch.export specializes that dimension to 1 and the exported model only holds
#: for images of at most that many pixels (a Concat or Reshape fails on the check images)
MIN_DENSE_SIDE = 4 * GROW
#: answers of a multiple choice case
CHOICES = 2
#: x-vector heads stack convolutions over frames (TDNN, kernel 5 and more): the audio
#: is this many times longer
XVECTOR_LONGER = 8


def head_kind(head: str, params, model=None) -> str | None:
    """The kind of inputs of the heads this module builds, None for the others. A
    prompt head without ``get_image_features`` (BLIP) takes tokens and pixels without
    image tokens."""
    params = set(params)
    if head == "multiple-choice":
        return "choices"
    if head in PROMPT_HEADS and "pixel_values" in params and "input_ids" in params:
        return "prompt" if model is None or _image_features_fn(model) else "image-text"
    if head in IMAGE_TEXT_HEADS:
        return "image-text"
    if head in ("rnnt", "tdt") and "decoder_input_ids" in params:
        return "transducer"
    if head == "audio-xvector":
        return "xvector"
    if head.startswith("time-series"):
        return "time-series"
    if head in ("text-to-waveform", "text-to-spectrogram"):
        return "text-to-audio"
    if head == "mask-generation" and "input_points" in params:
        return "image-points"
    return None


def _choice_inputs(config, sizes, generator):
    """Tokens (batch, choices, seq): every answer of every question."""
    inputs, _ = _text_inputs(config, dict(sizes, batch=sizes["batch"] * CHOICES), generator)
    b = sizes["batch"]
    inputs = {k: v.reshape(b, CHOICES, -1) for k, v in inputs.items()}
    dims = {0: "batch", 2: "seq"}
    return inputs, {k: dims for k in inputs}


def _image_token_id(config) -> int:
    for name in ("image_token_id", "image_token_index"):
        value = getattr(config, name, None)
        if _is_int(value):
            return int(value)
    raise ValueError(
        f"{type(config).__name__} has no image_token_id: the prompt cannot "
        "say where the image features go"
    )


def _count_features(out, batch: int, hidden: int) -> int:
    """Image features per image given by ``get_image_features``: a tensor, a list of
    tensors (one per image) or an output with ``pooler_output``."""
    if not isinstance(out, (torch.Tensor, list, tuple)):
        out = getattr(out, "pooler_output", None)
        if out is None:
            raise TypeError("get_image_features returned no tensor")
    tensors = [out] if isinstance(out, torch.Tensor) else list(out)
    return sum(t.numel() for t in tensors) // (batch * hidden)


def _prompt_inputs(model, config, sizes, generator):
    """Pixels and a prompt: the image token as many times as the vision tower gives
    features per image, then ``seq`` text tokens (one prefill call). The configuration
    of a retrieval model wrapping a vision language model is its ``vlm_config``; a tower
    taking a pixel mask (Idefics3, ModernVBERT) is given the images of every prompt,
    ``(batch, images, channels, height, width)``."""
    fn = _image_features_fn(model)
    if fn is None:
        raise TypeError(
            f"{type(model).__name__} has no get_image_features: the number "
            "of image tokens of the prompt is unknown"
        )
    config = getattr(config, "vlm_config", None) or config
    inputs, ds = _image_inputs(config, sizes, generator)
    if "pixel_attention_mask" in inspect.signature(fn).parameters:
        inputs["pixel_values"] = inputs["pixel_values"].unsqueeze(1)
    b, s = sizes["batch"], sizes["seq"]
    text = config.get_text_config()
    with torch.no_grad():
        out = fn(pixel_values=inputs["pixel_values"])
    n = _count_features(out, b, text.hidden_size)
    image_id = _image_token_id(config)
    vocab = text.vocab_size
    ids = torch.randint(0, vocab, (b, s), generator=generator)
    ids[ids == image_id] = (image_id + 1) % vocab
    inputs["input_ids"] = torch.cat([torch.full((b, n), image_id), ids], dim=1)
    inputs["attention_mask"] = torch.ones(inputs["input_ids"].shape, dtype=torch.int64)
    ds.update(input_ids={0: "batch", 1: "seq"}, attention_mask={0: "batch", 1: "seq"})
    return inputs, ds


def _image_text_inputs(config, sizes, generator, params):
    """Tokens of one query and pixels of one image per batch row (CLIP, OWL-ViT), and
    the answer's first tokens for a decoder (BLIP)."""
    text = getattr(config, "text_config", None) or config
    inputs, ds = _text_inputs(text, sizes, generator)
    queries, image_id = (
        getattr(config, n, None) for n in ("num_query_tokens", "image_token_index")
    )
    if _is_int(queries) and _is_int(image_id):  # BLIP-2: the query tokens' places first
        b = sizes["batch"]
        ids = inputs["input_ids"]
        ids[ids == image_id] = (image_id + 1) % text.vocab_size
        inputs["input_ids"] = torch.cat([torch.full((b, queries), image_id), ids], dim=1)
        inputs["attention_mask"] = torch.ones(inputs["input_ids"].shape, dtype=torch.int64)
    pixels, pds = _image_inputs(config, sizes, generator)
    inputs.update(pixels)
    ds.update(pds)
    if "decoder_input_ids" in params:
        inputs["decoder_input_ids"] = inputs["input_ids"].clone()
        ds["decoder_input_ids"] = {0: "batch", 1: "answer"}
    return inputs, ds


def _time_series_inputs(model, config, sizes, generator, params):
    """``past_values`` (batch, context, channels) and, when the forward takes them,
    the observed mask and time features; one series per row (batch, context) for the
    models declaring no channels (TimesFM)."""
    b = sizes["batch"]
    context = getattr(config, "context_length", None) or getattr(config, "patch_length", 8) * 4
    channels = getattr(config, "num_input_channels", None) or getattr(config, "input_size", None)
    values = torch.randn(b, context, channels or 1, generator=generator)
    if channels is None:  # univariate series, one per row
        values = values[..., 0]
    inputs: dict = {"past_values": values}
    ds: dict = {"past_values": {0: "batch"}}
    if "past_observed_mask" in params:
        inputs["past_observed_mask"] = torch.ones_like(values)
        ds["past_observed_mask"] = {0: "batch"}
    if "freq" in params:  # TimesFM: the frequency class of every series
        inputs["freq"] = torch.zeros(b, 1, dtype=torch.int64)
        ds["freq"] = {0: "batch"}
    return inputs, ds


def _text_encoder_config(config):
    """The configuration of the model reading the text of a text-to-audio model: the
    text configuration, the text encoder's (MusicGen: its decoder has a vocabulary
    too) or the acoustic model's (FastSpeech2 with HiFi-GAN)."""
    text = getattr(config, "text_encoder", None)
    if text is not None:
        return text
    text = config.get_text_config()
    model = getattr(config, "model_config", None)
    if getattr(text, "vocab_size", None) is None and model is not None:
        return model
    return text


def _text_to_audio_inputs(model, config, sizes, generator, params):
    """Tokens, the mel frames of the decoder for a spectrogram decoder (SpeechT5), the
    audio codes of every codebook for a decoder embedding them separately (MusicGen:
    ``decoder_input_ids`` of shape (batch * codebooks, seq); without them, the forward
    encodes audio it is not given)."""
    inputs, ds = _text_inputs(_text_encoder_config(config), sizes, generator)
    decoder = getattr(model, "decoder", None)  # not the text encoder's embeddings
    k = codebooks(decoder) if "decoder_input_ids" in params and decoder is not None else 0
    if k:
        vocab = config.get_text_config(decoder=True).vocab_size
        b, s = sizes["batch"], sizes["seq"]
        inputs["decoder_input_ids"] = torch.randint(0, vocab, (b * k, s), generator=generator)
        ds["decoder_input_ids"] = {0: "batch_codebooks", 1: "seq"}
    if "decoder_input_values" in params:
        mel = getattr(config, "num_mel_bins", 80)
        inputs["decoder_input_values"] = torch.randn(
            sizes["batch"], sizes["seq"] + 1, mel, generator=generator
        )
        ds["decoder_input_values"] = {0: "batch", 1: "frames"}
    return inputs, ds


def _transducer_inputs(config, sizes, generator, params):
    """Audio features and the token of the prediction network (RNN-T, TDT): a forward
    is one decoding step, one token per utterance (``decoder_input_ids`` of shape
    ``(batch, 1)``); given several, the capture specializes their count."""
    inputs, ds = _audio_inputs(config, sizes, generator, params)
    text = config.get_text_config(decoder=True)
    vocab = getattr(text, "vocab_size", None) or getattr(config, "vocab_size", 32)
    inputs["decoder_input_ids"] = torch.randint(0, vocab, (sizes["batch"], 1), generator=generator)
    ds["decoder_input_ids"] = {0: "batch"}
    return inputs, ds


def _points_inputs(config, sizes, generator):
    """Pixels and one point prompt per image (SAM): coordinates in pixels, label 1."""
    inputs, ds = _image_inputs(config, sizes, generator)
    b, h = sizes["batch"], inputs["pixel_values"].shape[-1]
    inputs["input_points"] = torch.rand(b, 1, 1, 2, generator=generator) * h
    inputs["input_labels"] = torch.ones((b, 1, 1), dtype=torch.int64)
    ds.update(input_points={0: "batch"}, input_labels={0: "batch"})
    return inputs, ds


def make_inputs(
    case: ZooCase, model, config, sizes: dict, *, seed: int = 0, with_cache: bool = True
) -> tuple[dict, dict]:
    """Inputs of sizes ``sizes`` for ``case`` and their dynamic shapes, in the order
    of the forward's parameters; the heads of the first zoo go to
    ``experimental_experiment.bench.zoo_inputs.make_inputs``."""
    params = set(inspect.signature(model.forward).parameters)
    kind = head_kind(case.head, params, model)
    if kind is None:
        return _base_inputs(case, model, config, sizes, seed=seed, with_cache=with_cache)
    if kind == "xvector":
        longer = dict(sizes, samples=sizes["samples"] * XVECTOR_LONGER)
        return _base_inputs(case, model, config, longer, seed=seed, with_cache=with_cache)
    generator = torch.Generator().manual_seed(seed)
    if kind == "choices":
        inputs, ds = _choice_inputs(config, sizes, generator)
    elif kind == "prompt":
        inputs, ds = _prompt_inputs(model, config, sizes, generator)
    elif kind == "image-text":
        inputs, ds = _image_text_inputs(config, sizes, generator, params)
    elif kind == "time-series":
        inputs, ds = _time_series_inputs(model, config, sizes, generator, params)
    elif kind == "transducer":
        inputs, ds = _transducer_inputs(config, sizes, generator, params)
    elif kind == "text-to-audio":
        inputs, ds = _text_to_audio_inputs(model, config, sizes, generator, params)
    else:
        inputs, ds = _points_inputs(config, sizes, generator)
    return _signature_order(model, inputs, ds)


def _resized(inputs: dict, height: int, width: int, seed: int) -> dict:
    """``inputs`` with random images (and a full pixel mask) of another size."""
    generator = torch.Generator().manual_seed(seed)
    b, c = inputs["pixel_values"].shape[:2]
    resized = dict(inputs, pixel_values=torch.randn(b, c, height, width, generator=generator))
    if "pixel_mask" in resized:
        resized["pixel_mask"] = torch.ones((b, height, width), dtype=torch.int64)
    return resized


def adapt_image_size(
    case: ZooCase, model, inputs: dict, check: dict, ds: dict, run
) -> tuple[dict, dict]:
    """For a dense head (:data:`DENSE_HEADS`), export images of at least
    :data:`MIN_DENSE_SIDE` pixels and check images :data:`GROW` pixels taller and
    wider than the export ones, when ``run(model, inputs)`` accepts them: height and
    width become dynamic in ``ds`` (modified in place). Returns the export and check
    inputs to use (unchanged when the model takes one image size)."""
    pixels = check.get("pixel_values")
    if case.head not in DENSE_HEADS or not isinstance(pixels, torch.Tensor):
        return inputs, check
    if pixels.dim() != 4 or inputs["pixel_values"].dim() != 4:
        return inputs, check
    export = inputs
    h, w = export["pixel_values"].shape[2:]
    seed = len(case.model_type)
    if min(h, w) < MIN_DENSE_SIDE:
        larger = _resized(export, max(h, MIN_DENSE_SIDE), max(w, MIN_DENSE_SIDE), seed)
        try:
            run(model, larger)
            export, (h, w) = larger, larger["pixel_values"].shape[2:]
        except Exception:  # the model takes small images only: kept as they are
            pass
    bigger = _resized(check, h + GROW, w + GROW, seed + 1)
    try:
        run(model, bigger)
    except Exception:  # the model takes one image size: it stays static
        return inputs, check
    ds["pixel_values"] = {0: "batch", 2: "height", 3: "width"}
    if "pixel_mask" in ds:
        ds["pixel_mask"] = {0: "batch", 1: "height", 2: "width"}
    return export, bigger
