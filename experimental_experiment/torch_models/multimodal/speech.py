"""Speech-to-text (Whisper) exported as two parts: the audio encoder (log-mel features
to encoder states) and the decoder with its self-attention cache (tokens and encoder
states in, logits and present cache out; the cross-attention keys and values are
computed again from the encoder states at every step), chained in onnxruntime.

.. code-block:: python

    case = build_speech("whisper")
    parts = export_speech_parts(case)
    report = check_speech_generation(case, parts, steps=8)
"""

from __future__ import annotations

import inspect
import time
from dataclasses import dataclass
from typing import Any, cast

import numpy as np
import torch

from .errors import MultimodalPartsError
from .export import ExportedParts, export_part

#: speech-to-text model types handled here
SPEECH_TYPES = ("whisper",)


@dataclass
class SpeechCase:
    """A tiny speech-to-text model, its audio features and the decoder prompt."""

    model_type: str
    model: Any
    input_features: torch.Tensor
    decoder_input_ids: torch.Tensor

    @property
    def encoder_inputs(self) -> dict:
        """The inputs of the encoder part, by name."""
        return {"input_features": self.input_features}

    @property
    def encoder_dynamic_shapes(self) -> dict:
        """The dynamic dimensions of the encoder inputs."""
        return {"input_features": {0: "batch"}}

    def encoder(self) -> torch.nn.Module:
        """The encoder part."""
        return AudioEncoder(self.model)

    @property
    def decoder_model(self):
        """The model the decoder part calls."""
        return self.model

    def end_tokens(self) -> list[int]:
        """The end-of-sequence tokens ``generate`` never chooses here."""
        from .run import end_token_ids

        return end_token_ids(self.model)

    def generate_inputs(self) -> dict:
        """The inputs of ``generate``."""
        return dict(
            input_features=self.input_features,
            decoder_input_ids=self.decoder_input_ids,
            pad_token_id=0,
        )


class AudioEncoder(torch.nn.Module):
    """Log-mel features to the encoder states the decoder attends to."""

    def __init__(self, model):
        super().__init__()
        if not hasattr(model, "get_encoder"):
            raise MultimodalPartsError(f"{type(model).__name__} has no get_encoder")
        self.encoder = model.get_encoder()

    def forward(self, input_features):
        return self.encoder(input_features=input_features).last_hidden_state


def _encoder_states_class():
    from transformers.modeling_outputs import BaseModelOutput

    @dataclass
    class EncoderStates(BaseModelOutput):
        """The encoder outputs the decoder reads: the states, and no attention mask (UDOP
        reads ``encoder_outputs.attention_mask``; None, every position is seen)."""

        attention_mask: torch.Tensor | None = None

    return EncoderStates


EncoderStates = _encoder_states_class()


class SpeechDecoder(torch.nn.Module):
    """Tokens, encoder states and the self-attention cache in, logits and the present
    self-attention cache out."""

    def __init__(self, model):
        from ..llm_helper import cache_argument_name

        super().__init__()
        self.model = model
        # 'cache' since transformers 5.24, 'past_key_values' before
        self.cache_name = cache_argument_name(model)

    def forward(self, decoder_input_ids, encoder_hidden_states, past_key_values):
        from transformers.cache_utils import DynamicCache, EncoderDecoderCache

        from ..causal_lm import output_cache

        cache = EncoderDecoderCache(past_key_values, DynamicCache())
        if "encoder_outputs" not in inspect.signature(self.model.forward).parameters:
            # a text decoder attending to the image states (BLIP's text_decoder)
            out = self.model(
                input_ids=decoder_input_ids,
                encoder_hidden_states=encoder_hidden_states,
                use_cache=True,
                **{self.cache_name: cache},
            )
            cache = output_cache(out)
            return out.logits, cast(Any, cache).self_attention_cache
        out = self.model(
            # a model output, not a tuple: Florence-2 reads its last_hidden_state
            encoder_outputs=EncoderStates(last_hidden_state=encoder_hidden_states),
            decoder_input_ids=decoder_input_ids,
            use_cache=True,
            **{self.cache_name: cache},
        )
        return out.logits, cast(Any, output_cache(out)).self_attention_cache


class MaskedSpeechDecoder(SpeechDecoder):
    """``SpeechDecoder`` also taking the attention mask of the encoder states (UDOP: 0 on
    the image patches its encoder padded), which the model reads from
    ``encoder_outputs.attention_mask``."""

    def forward(
        self, decoder_input_ids, encoder_hidden_states, encoder_attention_mask, past_key_values
    ):
        from transformers.cache_utils import DynamicCache, EncoderDecoderCache

        from ..causal_lm import output_cache

        states = EncoderStates(
            last_hidden_state=encoder_hidden_states, attention_mask=encoder_attention_mask
        )
        out = self.model(
            encoder_outputs=states,
            decoder_input_ids=decoder_input_ids,
            use_cache=True,
            **{self.cache_name: EncoderDecoderCache(past_key_values, DynamicCache())},
        )
        return out.logits, cast(Any, output_cache(out)).self_attention_cache


def build_speech_model(model_type: str = "whisper", seed: int = 0):
    """The tiny model (zoo configuration, perturbed normalization weights, sharpened
    logits), without the tokens ``generate`` suppresses (a tiny vocabulary has none of
    them)."""
    import transformers

    from ...bench.zoo_configs import tiny_config
    from ..causal_lm import perturb_norm_weights
    from .cases import sharpen_logits

    if model_type not in SPEECH_TYPES:
        raise MultimodalPartsError(f"no speech-to-text parts known for {model_type!r}")
    config = tiny_config(model_type)
    torch.manual_seed(seed)
    cls = transformers.WhisperForConditionalGeneration
    model = sharpen_logits(perturb_norm_weights(cls._from_config(config).eval(), seed + 1))
    gc: Any = model.generation_config
    gc.suppress_tokens, gc.begin_suppress_tokens, gc.forced_decoder_ids = None, None, None
    return model


def build_speech(
    model_type: str = "whisper", prompt: int = 1, batch: int = 1, seed: int = 0, model=None
) -> SpeechCase:
    """The tiny model (``build_speech_model``, or ``model``), random features of the
    length the encoder expects, a decoder prompt of the start token followed by
    ``prompt - 1`` random tokens."""
    model = build_speech_model(model_type, seed) if model is None else model
    config = model.config
    gen = torch.Generator().manual_seed(seed)
    length = 2 * config.max_source_positions
    features = torch.randn(batch, config.num_mel_bins, length, generator=gen)
    start = torch.full((batch, 1), config.decoder_start_token_id, dtype=torch.int64)
    rest = torch.randint(1, config.vocab_size - 64, (batch, prompt - 1), generator=gen)
    return SpeechCase(model_type, model, features, torch.cat([start, rest], dim=1))


def export_speech_parts(case) -> ExportedParts:
    """Exports the encoder (dynamic batch, and the dimensions of
    ``case.encoder_dynamic_shapes``) and the decoder (dynamic batch, sequence, cache
    length) with ``to_onnx``. ``case`` is a ``SpeechCase`` or any case with the same
    ``model``, ``encoder()``, ``encoder_inputs`` and ``encoder_dynamic_shapes`` (the
    image encoder-decoder models of ``seq2seq``)."""
    from ..llm_helper import cache_dynamic_shapes, make_dynamic_cache

    model, result = case.decoder_model, ExportedParts()
    begin = time.perf_counter()
    encoder = case.encoder()
    inputs = {k: v.expand(2, *v.shape[1:]).contiguous() for k, v in case.encoder_inputs.items()}
    result.models["encoder"] = export_part(
        encoder,
        tuple(inputs.values()),
        dynamic_shapes=tuple(case.encoder_dynamic_shapes.get(k, {}) for k in inputs),
    )
    result.times["encoder"] = time.perf_counter() - begin
    begin = time.perf_counter()
    gen = torch.Generator().manual_seed(0)
    with torch.no_grad():
        encoded = encoder(*inputs.values())
    # an encoder returning (states, mask): the number of states varies (UDOP: the words)
    masked = isinstance(encoded, tuple)
    shape = (encoded[0] if masked else encoded).shape
    states = torch.randn(*shape, generator=gen)
    vocab = model.config.get_text_config(decoder=True).vocab_size
    ids = torch.randint(0, vocab, (2, 3), generator=gen)
    cache = make_dynamic_cache(model.config, 2, 5, generator=gen)
    kwargs: dict[str, Any] = dict(decoder_input_ids=ids, encoder_hidden_states=states)
    ds: dict[str, Any] = {
        "decoder_input_ids": {0: "batch", 1: "seq"},
        "encoder_hidden_states": {0: "batch", 1: "encoded"} if masked else {0: "batch"},
    }
    if masked:
        mask = torch.ones(shape[:2], dtype=encoded[1].dtype)
        mask[:, -2:] = 0  # the padding of an encoder (UDOP's patches)
        kwargs["encoder_attention_mask"] = mask
        ds["encoder_attention_mask"] = {0: "batch", 1: "encoded"}
    kwargs["past_key_values"] = cache
    ds["past_key_values"] = cache_dynamic_shapes(len(cache.layers))
    result.models["decoder"] = export_part(
        (MaskedSpeechDecoder if masked else SpeechDecoder)(model),
        (),
        dynamic_shapes=ds,
        kwargs=kwargs,
    )
    result.times["decoder"] = time.perf_counter() - begin
    return result


def onnx_speech_generate(case, parts: ExportedParts, steps: int = 8):
    """Greedy generation with the ONNX encoder and decoder, the end-of-sequence tokens
    excluded as ``generate(min_new_tokens=steps)`` does; returns ``(tokens (batch,
    steps), logits of the last position per step)``."""
    from ..onnx_outputs import user_outputs
    from .run import greedy_token, session

    encoder, decoder = session(parts.models["encoder"]), session(parts.models["decoder"])
    feeds = [v.numpy() for v in case.encoder_inputs.values()]
    encoded: list[Any] = encoder.run(None, dict(zip([i.name for i in encoder.get_inputs()], feeds)))
    names = [i.name for i in decoder.get_inputs()]
    # the encoder states, and their mask when the encoder returns one (UDOP)
    first = len(user_outputs(encoder, encoded))
    encoded_feeds = dict(zip(names[1 : 1 + first], encoded[:first]))
    ids = case.decoder_input_ids.numpy()
    batch = ids.shape[0]
    cache = {
        i.name: np.zeros((batch, i.shape[1], 0, i.shape[3]), dtype=np.float32)
        for i in decoder.get_inputs()[1 + first :]
    }
    tokens, logits = [], []
    eos = case.end_tokens()
    for _ in range(steps):
        outputs: list[Any] = user_outputs(
            decoder, list(decoder.run(None, {names[0]: ids, **encoded_feeds, **cache}))
        )
        last = outputs[0][:, -1, :]
        logits.append(last)
        ids = greedy_token(last, eos)
        tokens.append(ids)
        cache = dict(zip(names[1 + first :], outputs[1:]))
    return np.concatenate(tokens, axis=1), logits


def check_speech_generation(case, parts: ExportedParts, steps: int = 8) -> dict[str, Any]:
    """Greedy tokens of the chained ONNX parts against eager ``model.generate``; the
    same report as ``check_generation``."""
    from ..decoding_check import eager_greedy_decoding
    from .run import generation_report

    eager = eager_greedy_decoding(case.model, None, steps, **case.generate_inputs())
    onnx = onnx_speech_generate(case, parts, steps)
    return generation_report(eager, onnx, case.end_tokens())


__all__ = [
    "AudioEncoder",
    "MaskedSpeechDecoder",
    "SPEECH_TYPES",
    "SpeechCase",
    "SpeechDecoder",
    "build_speech",
    "build_speech_model",
    "check_speech_generation",
    "export_speech_parts",
    "onnx_speech_generate",
]
