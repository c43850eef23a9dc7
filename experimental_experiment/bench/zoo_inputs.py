"""Inputs of the model zoo's cases: tokens, images, patchified images, image and text,
audio samples or features (sized from the audio encoder's configuration), speech
seq2seq, text-to-speech, multi-stream and codebook tokens, decoders with a cache;
every builder returns the inputs and their dynamic shapes (dimension names).

.. code-block:: python

    from experimental_experiment.bench.zoo_inputs import make_inputs

    inputs, ds = make_inputs(case, model, config, dict(batch=2, seq=3, past=5, samples=1600))
"""

from __future__ import annotations

import inspect

import torch

from .zoo_configs import VOCAB as _VOCAB
from .zoo_configs import _is_int
from .zoo_heads import ZooCase

#: heads given pixels (or tokens when the forward takes no pixels, ImageGPT)
IMAGE_HEADS = (
    "image-classification",
    "vision-encoder",
    "object-detection",
    "image-segmentation",
    "semantic-segmentation",
    "instance-segmentation",
    "universal-segmentation",
    "depth-estimation",
    "normal-estimation",
    "pointmap-estimation",
    "pose-estimation",
    "keypoint-detection",
    "mask-generation",
    "image-matting",
    "image-to-image",
    "masked-image-modeling",
    "causal-image-modeling",
    "backbone",
    "video-classification",
    "table-recognition",
    "text-recognition",
)
#: heads given audio samples or features
AUDIO_HEADS = (
    "ctc",
    "audio-classification",
    "audio-frame-classification",
    "audio-xvector",
    "rnnt",
    "tdt",
)


def _signature_order(model, inputs: dict, ds: dict) -> tuple[dict, dict]:
    """Inputs and dynamic shapes in the order of ``model.forward``'s parameters;
    an ``attention_mask`` the forward does not take is dropped."""
    params = list(inspect.signature(model.forward).parameters)
    if "attention_mask" not in params:
        inputs.pop("attention_mask", None)
    unknown = [k for k in inputs if k not in params]
    if unknown:
        raise TypeError(f"{type(model).__name__}.forward takes no {unknown}")
    keys = sorted(inputs, key=params.index)
    return {k: inputs[k] for k in keys}, {k: ds[k] for k in keys if k in ds}


def seq_factor(config) -> int:
    """Tokens per sequence position for the models that downsample the sequence:
    canine's ``downsampling_rate``, funnel's pooling by 2 between blocks.

    .. code-block:: python

        seq_factor(tiny_config("canine"))  # 4
    """
    if _is_int(getattr(config, "downsampling_rate", None)):
        return config.downsampling_rate
    blocks = getattr(config, "block_sizes", None)
    if isinstance(blocks, (list, tuple)) and len(blocks) > 1:
        return 2 ** (len(blocks) - 1)
    return 1


def _text_inputs(config, sizes, generator):
    vocab = getattr(config.get_text_config(), "vocab_size", None) or _VOCAB
    b, s = sizes["batch"], sizes["seq"] * seq_factor(config)
    inputs = {
        "input_ids": torch.randint(0, vocab, (b, s), generator=generator),
        "attention_mask": torch.ones((b, s), dtype=torch.int64),
    }
    return inputs, {"input_ids": {0: "batch", 1: "seq"}, "attention_mask": {0: "batch", 1: "seq"}}


def _add_boxes(inputs: dict, ds: dict, generator) -> None:
    """A bounding box (x0, y0, x1, y1) in [0, 1000] for every token (layout models)."""
    b, s = inputs["input_ids"].shape
    low = torch.randint(0, 500, (b, s, 2), generator=generator)
    size = torch.randint(0, 500, (b, s, 2), generator=generator)
    inputs["bbox"] = torch.cat([low, low + size], dim=-1)
    ds["bbox"] = {0: "batch", 1: "seq"}


def _multistream_inputs(model, config, sizes, generator):
    """Tokens of a text stream and of every audio codebook, one position each
    (kyutai_speech_to_text: input_ids of shape (batch, seq, 1 + codebooks))."""
    inputs, ds = _text_inputs(config, sizes, generator)
    b, s = inputs["input_ids"].shape
    k = config.num_codebooks
    audio = torch.randint(0, config.codebook_vocab_size - 1, (b, s, k), generator=generator)
    inputs["input_ids"] = torch.cat([inputs["input_ids"].unsqueeze(-1), audio], dim=-1)
    return inputs, ds


def _image_inputs(config, sizes, generator, name="pixel_values"):
    """pixel_values (batch, channels, height, width), (batch, frames, ...) for videos
    (``name`` is ``pixel_values_videos`` for a forward taking only videos); V-JEPA 2
    names the size ``crop_size`` and the frames ``frames_per_clip``."""
    vision = getattr(config, "vision_config", None) or config
    size = getattr(vision, "image_size", None) or getattr(vision, "crop_size", None) or 32
    h, w = (size, size) if _is_int(size) else tuple(size)[:2]
    c = getattr(vision, "num_channels", 3)
    frames = getattr(vision, "num_frames", None) or getattr(vision, "frames_per_clip", None)
    shape = (sizes["batch"], frames, c, h, w) if _is_int(frames) else (sizes["batch"], c, h, w)
    return {name: torch.randn(*shape, generator=generator)}, {name: {0: "batch"}}


def _add_mask_noise(config, inputs: dict, ds: dict, generator) -> None:
    """``noise`` (batch, patches) of the models masking random patches (ViT-MAE): given
    as an input, eager and the exported model mask the same patches (drawn inside the
    model, ``torch.rand`` differs between them)."""
    size, patch = getattr(config, "image_size", 32), getattr(config, "patch_size", 16)
    h, w = (size, size) if _is_int(size) else tuple(size)[:2]
    p = patch if _is_int(patch) else tuple(patch)[0]
    batch = next(iter(inputs.values())).shape[0]
    inputs["noise"] = torch.rand(batch, (h // p) * (w // p), generator=generator)
    ds["noise"] = {0: "batch"}


#: sub-configurations holding the settings of an audio encoder
_AUDIO_CONFIGS = ("audio_config", "encoder_config", "speech_config", "encoder")
#: frames the feature extractor stacks where the configuration does not say so
_STACKED = {"granite_speech5_encoder": 4}  # its input_linear takes num_mel_bins * 4


def audio_feature_dim(config) -> int | None:
    """The last dimension of ``input_features`` from the configuration or its audio
    encoder's: a feature projection's input, else mel bins times stacked frames.

    .. code-block:: python

        audio_feature_dim(tiny_config("canary"))  # 128, from encoder_config.num_mel_bins
    """
    for sub in (config, *(getattr(config, n, None) for n in _AUDIO_CONFIGS)):
        if sub is None or isinstance(sub, (int, str)):
            continue
        if _is_int(getattr(sub, "feature_projection_input_dim", None)):
            return sub.feature_projection_input_dim
        mel = getattr(sub, "num_mel_bins", None) or getattr(sub, "input_feat_per_channel", None)
        if _is_int(mel):
            stacked = getattr(sub, "num_stacked_frames", None) or _STACKED.get(
                getattr(sub, "model_type", ""), 1
            )
            return mel * stacked * (getattr(sub, "input_channels", None) or 1)
    return None


def _patch_inputs(config, sizes, generator):
    """Patchified pixels (siglip2): (batch, patches, channels * patch * patch), the mask
    of the valid patches and the (height, width) of every image in patches."""
    vision = getattr(config, "vision_config", None) or config
    p, c = vision.patch_size, getattr(vision, "num_channels", 3)
    side = int(vision.num_patches**0.5)
    b, n = sizes["batch"], side * side
    inputs = {
        "pixel_values": torch.randn(b, n, c * p * p, generator=generator),
        "pixel_attention_mask": torch.ones((b, n), dtype=torch.int64),
        "spatial_shapes": torch.tensor([[side, side]] * b, dtype=torch.int64),
    }
    return inputs, {
        "pixel_values": {0: "batch", 1: "patches"},
        "pixel_attention_mask": {0: "batch", 1: "patches"},
        "spatial_shapes": {0: "batch"},
    }


def _image_features_fn(model):
    """``get_image_features`` of the model or of its inner model (``model``, or ``vlm``
    for a retrieval model wrapping a vision language model: ColPali), None without one."""
    for owner in (model, getattr(model, "model", None), getattr(model, "vlm", None)):
        fn = getattr(owner, "get_image_features", None)
        if fn is not None:
            return fn
    return None


def _image_text_inputs(model, config, sizes, generator):
    """Pixels and tokens for an image-text model (cohere2_vision, shieldgemma2): the
    image token repeated as many times as the vision tower gives features per image,
    then ``seq`` text tokens."""
    inputs, ds = _image_inputs(config, sizes, generator)
    b, s = sizes["batch"], sizes["seq"]
    with torch.no_grad():
        out = _image_features_fn(model)(pixel_values=inputs["pixel_values"])
    feats = out if isinstance(out, torch.Tensor) else out.pooler_output
    text = config.get_text_config()
    n = feats.numel() // (b * text.hidden_size)
    image_id = config.image_token_id
    ids = torch.randint(0, text.vocab_size, (b, s), generator=generator)
    ids[ids == image_id] = (image_id + 1) % text.vocab_size
    inputs["input_ids"] = torch.cat([torch.full((b, n), image_id), ids], dim=1)
    inputs["attention_mask"] = torch.ones(inputs["input_ids"].shape, dtype=torch.int64)
    ds.update(input_ids={0: "batch", 1: "seq"}, attention_mask={0: "batch", 1: "seq"})
    return inputs, ds


def _audio_inputs(config, sizes, generator, params):
    """Raw samples (input_values), or features (batch, frames, features) when the
    forward takes input_features (frames dynamic) or fixed size spectrograms."""
    b, n = sizes["batch"], sizes["samples"] // 100
    mel = audio_feature_dim(config) or getattr(config, "feature_size", None)
    if "input_values" in params and _is_int(getattr(config, "max_length", None)) and mel:
        values = torch.randn(b, config.max_length, mel, generator=generator)
        return {"input_values": values}, {"input_values": {0: "batch"}}
    if "input_values" not in params and "input_features" in params:
        # without mel bins, features stand for the embeddings (pop2piano)
        dim = mel or getattr(config, "d_model", None) or getattr(config, "hidden_size", 80)
        feats = torch.randn(b, n * 4, dim, generator=generator)
        return {"input_features": feats}, {"input_features": {0: "batch", 1: "frames"}}
    values = torch.randn(b, sizes["samples"], generator=generator)
    return {"input_values": values}, {"input_values": {0: "batch", 1: "samples"}}


def _text_to_speech_inputs(config, sizes, generator):
    """Text tokens for the encoder and audio codes for the decoder, one per channel
    (dia: decoder_input_ids of shape (batch, seq, channels))."""
    b, s = sizes["batch"], sizes["seq"]
    enc, dec = config.encoder_config, config.decoder_config
    inputs = {
        "input_ids": torch.randint(0, enc.vocab_size, (b, s + 2), generator=generator),
        "attention_mask": torch.ones((b, s + 2), dtype=torch.int64),
        "decoder_input_ids": torch.randint(
            0, dec.vocab_size, (b, s, dec.num_channels), generator=generator
        ),
    }
    return inputs, {
        "input_ids": {0: "batch", 1: "encoder_seq"},
        "attention_mask": {0: "batch", 1: "encoder_seq"},
        "decoder_input_ids": {0: "batch", 1: "seq"},
    }


def _speech_seq2seq_inputs(model, config, sizes, generator, params):
    """input_features (static number of frames) or input_values and decoder tokens,
    no cache; text and audio codes for a text-to-speech model."""
    b = sizes["batch"]
    if not params & {"input_features", "input_values"} and "input_ids" in params:
        return _text_to_speech_inputs(config, sizes, generator)
    frames = 2 * getattr(config, "max_source_positions", 32)
    encoder = getattr(model, "encoder", None)
    if getattr(encoder, "main_input_name", None) in ("input_values", "input_features"):
        params = {encoder.main_input_name}  # the forward takes both (speech-encoder-decoder)
    if "input_features" not in params:
        inputs, ds = _audio_inputs(getattr(config, "encoder", config), sizes, generator, params)
    elif not hasattr(config, "max_source_positions"):  # any number of frames
        inputs, ds = _audio_inputs(config, sizes, generator, {"input_features"})
    elif hasattr(config, "num_mel_bins"):
        inputs = {
            "input_features": torch.randn(b, config.num_mel_bins, frames, generator=generator)
        }
        ds = {"input_features": {0: "batch"}}
    else:
        n = audio_feature_dim(config) or 80
        inputs = {"input_features": torch.randn(b, frames, n, generator=generator)}
        ds = {"input_features": {0: "batch"}}
    vocab = config.get_text_config(decoder=True).vocab_size
    inputs["decoder_input_ids"] = torch.randint(0, vocab, (b, sizes["seq"]), generator=generator)
    ds["decoder_input_ids"] = {0: "batch", 1: "seq"}
    return inputs, ds


def codebooks(model) -> int:
    """The number of codebooks of a decoder embedding every codebook separately
    (musicgen: one embedding per codebook, tokens given as (batch * codebooks, seq)),
    0 for other models."""
    owner = next((m for m in model.modules() if hasattr(m, "embed_tokens")), None)
    emb = getattr(owner, "embed_tokens", None)
    if isinstance(emb, torch.nn.ModuleList) and len(emb) == getattr(owner, "num_codebooks", None):
        return len(emb)
    return 0


def _decoder_inputs(model, config, head, sizes, generator, with_cache):
    from ..torch_models.llm_helper import make_llm_inputs, make_seq2seq_inputs

    b, s, p = sizes["batch"], sizes["seq"], sizes["past"]
    if head == "causal-lm":
        inputs, ds = make_llm_inputs(
            config, b, s, p, with_cache=with_cache, model=model, generator=generator
        )
        k = codebooks(model)
        if k:  # one row per codebook of every sequence: (batch * codebooks, seq)
            inputs["input_ids"] = torch.randint(
                0, config.vocab_size, (b * k, s), generator=generator
            )
            ds["input_ids"] = {0: "batch_codebooks", 1: "seq"}
        return inputs, ds
    decoder = getattr(config, "decoder", None)
    if not hasattr(config, "vocab_size") and hasattr(decoder, "vocab_size"):
        # composite (EncoderDecoderConfig): the cache and tokens are the decoder's,
        # the encoder's tokens come from its own vocabulary
        inputs, ds = make_seq2seq_inputs(
            decoder, b, s, p, with_cache=with_cache, model=model, generator=generator
        )
        inputs["input_ids"] = torch.randint(
            0, config.encoder.vocab_size, inputs["input_ids"].shape, generator=generator
        )
        return inputs, ds
    return make_seq2seq_inputs(
        config, b, s, p, with_cache=with_cache, model=model, generator=generator
    )


def _add_audio_per_token(model, config, inputs: dict, ds: dict, generator) -> None:
    """input_features (batch, mel bins, frames) for a decoder adding an audio embedding
    to every token embedding (voxtral_realtime): as many frames per token as the audio
    encoder reduces into one embedding, measured on a probe."""
    b, s = inputs["input_ids"].shape
    mel, probe = audio_feature_dim(config), 64
    with torch.no_grad():
        out = model.get_audio_features(input_features=torch.zeros(1, mel, probe))
    per_token = probe // out.pooler_output.shape[1]
    inputs["input_features"] = torch.randn(b, mel, s * per_token, generator=generator)
    ds["input_features"] = {0: "batch", 2: "frames"}


def input_kind(head: str, params) -> str:
    """What the forward of a model of this head taking ``params`` is given: ``decoder``,
    ``seq2seq``, ``image``, ``audio``, ``speech-seq2seq`` or ``text``. A seq2seq head
    without decoder tokens (audio language models) is a decoder, a vision head without
    pixels or videos (ImageGPT) takes tokens."""
    if head == "seq2seq-lm":
        return "seq2seq" if "decoder_input_ids" in params else "decoder"
    if head == "causal-lm":
        return "decoder"
    if head in IMAGE_HEADS:
        return "image" if {"pixel_values", "pixel_values_videos"} & set(params) else "text"
    if head in AUDIO_HEADS:
        return "audio"
    if head == "speech-seq2seq":
        return "speech-seq2seq" if "decoder_input_ids" in params else "text"
    return "text"


def make_inputs(
    case: ZooCase, model, config, sizes: dict, *, seed: int = 0, with_cache: bool = True
) -> tuple[dict, dict]:
    """Inputs of sizes ``sizes`` (:data:`EXPORT_SIZES`) for ``case`` and their dynamic
    shapes (dimension names), in the order of the forward's parameters."""
    generator = torch.Generator().manual_seed(seed)
    params = set(inspect.signature(model.forward).parameters)
    kind = input_kind(case.head, params)
    if kind in ("decoder", "seq2seq"):
        head = "causal-lm" if kind == "decoder" else "seq2seq-lm"
        inputs, ds = _decoder_inputs(model, config, head, sizes, generator, with_cache)
        if {"input_features", "encoder_inputs_embeds"} <= params and kind == "decoder":
            _add_audio_per_token(model, config, inputs, ds, generator)
    elif kind == "image" and "input_ids" in params and _image_features_fn(model):
        inputs, ds = _image_text_inputs(model, config, sizes, generator)
    elif kind == "image" and "spatial_shapes" in params:
        inputs, ds = _patch_inputs(config, sizes, generator)
    elif kind == "image":
        name = "pixel_values" if "pixel_values" in params else "pixel_values_videos"
        inputs, ds = _image_inputs(config, sizes, generator, name)
        if "noise" in params:
            _add_mask_noise(config, inputs, ds, generator)
    elif kind == "audio":
        inputs, ds = _audio_inputs(config, sizes, generator, params)
    elif kind == "speech-seq2seq":
        inputs, ds = _speech_seq2seq_inputs(model, config, sizes, generator, params)
    elif any(hasattr(m, "audio_tokens_offsets") for m in model.modules()):
        inputs, ds = _multistream_inputs(model, config, sizes, generator)
    else:
        inputs, ds = _text_inputs(config, sizes, generator)
        if "bbox" in params:
            _add_boxes(inputs, ds, generator)
    return _signature_order(model, inputs, ds)
