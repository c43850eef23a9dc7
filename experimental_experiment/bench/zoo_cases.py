"""Cases of the model zoo: every model type transformers' auto mappings list with a
text, vision or speech head, a tiny configuration (the default one shrunk generically,
random weights) and inputs matching the head's forward.

.. code-block:: python

    from experimental_experiment.bench.zoo_cases import list_cases, build_case

    cases = list_cases()                 # [ZooCase(model_type='llama', head='causal-lm'), ...]
    model, inputs, check_inputs, ds = build_case(cases[0])
"""

from __future__ import annotations

import inspect
from dataclasses import dataclass
from typing import Any

import torch

#: heads in order of preference (a model type gets the first head it has) and the
#: auto mapping each one comes from
HEADS: dict[str, str] = {
    "seq2seq-lm": "MODEL_FOR_SEQ_TO_SEQ_CAUSAL_LM_MAPPING_NAMES",
    "masked-lm": "MODEL_FOR_MASKED_LM_MAPPING_NAMES",
    "causal-lm": "MODEL_FOR_CAUSAL_LM_MAPPING_NAMES",
    "image-classification": "MODEL_FOR_IMAGE_CLASSIFICATION_MAPPING_NAMES",
    "speech-seq2seq": "MODEL_FOR_SPEECH_SEQ_2_SEQ_MAPPING_NAMES",
    "ctc": "MODEL_FOR_CTC_MAPPING_NAMES",
    "audio-classification": "MODEL_FOR_AUDIO_CLASSIFICATION_MAPPING_NAMES",
    "sequence-classification": "MODEL_FOR_SEQUENCE_CLASSIFICATION_MAPPING_NAMES",
    "vision-encoder": "MODEL_FOR_IMAGE_MAPPING_NAMES",
}

#: sizes of the exported inputs and of the second set used for the check
EXPORT_SIZES = dict(batch=2, seq=3, past=5, samples=1600)
CHECK_SIZES = dict(batch=3, seq=4, past=7, samples=2000)

#: a few types of the ``--quick`` subset (one or two per head)
QUICK_TYPES = ("llama", "gpt2", "qwen2", "bert", "roberta", "t5", "bart", "vit", "resnet",
               "whisper", "wav2vec2", "distilbert")

#: per type configuration overrides, applied after the generic shrinking
OVERRIDES: dict[str, dict[str, Any]] = {
    "whisper": dict(max_source_positions=16, max_target_positions=32),
    "swin": dict(embed_dim=32, window_size=4),
}

_LAYERS = ("num_hidden_layers", "num_layers", "n_layer", "n_layers", "num_decoder_layers",
           "encoder_layers", "decoder_layers", "num_encoder_layers")
_HEADS = ("num_attention_heads", "n_head", "n_heads", "num_heads", "encoder_attention_heads",
          "decoder_attention_heads")
_KV_HEADS = ("num_key_value_heads", "num_kv_heads")
_HIDDEN = ("hidden_size", "d_model", "n_embd", "dim", "embed_dim", "embedding_size")
_HEAD_DIM = ("head_dim", "d_kv", "attention_head_size")
_INTERMEDIATE = ("intermediate_size", "d_ff", "n_inner", "ffn_dim", "encoder_ffn_dim",
                 "decoder_ffn_dim", "ffn_hidden_size")
_EXPERTS = {"num_experts": 4, "num_local_experts": 4, "n_routed_experts": 4,
            "moe_num_experts": 4, "num_experts_per_tok": 2, "moe_topk": 2, "top_k": 2,
            "num_shared_experts": 1, "n_shared_experts": 1, "moe_intermediate_size": 128,
            "shared_expert_intermediate_size": 128, "n_group": 2, "topk_group": 1,
            # partial rotary, multi-head latent attention, group norms
            "rotary_dim": 8, "kv_lora_rank": 32, "q_lora_rank": 32, "qk_rope_head_dim": 16,
            "qk_nope_head_dim": 16, "qk_head_dim": 32, "v_head_dim": 16, "num_groups": 4}
_VOCAB = 1024


@dataclass(frozen=True)
class ZooCase:
    """One model type with the head it is exported with."""

    model_type: str
    head: str


def list_cases(types: list[str] | None = None) -> list[ZooCase]:
    """One case per model type (its first head in :data:`HEADS`), heads interleaved in
    proportion to their sizes (types sorted within a head): a partial run is a sample of
    every head.
    ``types`` restricts the list (unknown types are kept: they fail at the config stage).
    """
    from transformers.models.auto import modeling_auto

    by_head: dict[str, list[str]] = {h: [] for h in HEADS}
    seen: set[str] = set()
    for head, mapping in HEADS.items():
        for model_type in sorted(getattr(modeling_auto, mapping)):
            if model_type not in seen:
                seen.add(model_type)
                by_head[head].append(model_type)
    # a type at rank i of a head of n types comes at (i + 1/2) / n: proportional mixing
    order = [((i + 0.5) / len(names), h, name) for h, names in enumerate(by_head.values())
             for i, name in enumerate(names)]
    heads = list(by_head)
    cases = [ZooCase(name, heads[h]) for _, h, name in sorted(order)]
    if types is not None:
        known = {c.model_type: c for c in cases}
        cases = [known.get(t, ZooCase(t, "unknown")) for t in types]
    return cases


def _shrink_ids(d: dict, vocab: int) -> None:
    """Token ids beyond the shrunk vocabulary become distinct ids at its end."""
    mapping: dict[int, int] = {}

    def new_id(v):
        if isinstance(v, int) and not isinstance(v, bool) and v >= vocab:
            mapping.setdefault(v, vocab - 1 - len(mapping))
            return mapping[v]
        return v

    for k in list(d):
        if k.endswith(("_token_id", "_token_index")):
            v = d[k]
            d[k] = [new_id(x) for x in v] if isinstance(v, list) else new_id(v)


def _is_int(v) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def shrink_config_dict(d: dict) -> dict:
    """The configuration dictionary ``d`` made tiny (in place, nested configs too):
    2 layers, 4 heads (2 key/value heads), hidden size 64, head dimension 16,
    intermediate size 128, 4 experts (2 per token), a vocabulary of 1024, images of
    32 pixels; per-layer lists (``layer_types``, ``mlp_layer_types``...) are cut."""
    n_before = next((d[k] for k in _LAYERS if _is_int(d.get(k))), None)
    for k, v in list(d.items()):
        if isinstance(v, dict) and "model_type" in v:
            shrink_config_dict(v)
        elif k in _LAYERS and _is_int(v):
            d[k] = min(v, 2)
        elif k in _HEADS and _is_int(v):
            d[k] = min(v, 4)
        elif k in _HEADS and isinstance(v, list):
            d[k] = [min(x, 2) for x in v]
        elif k in _KV_HEADS and _is_int(v):
            d[k] = min(v, 2)
        elif k in _HIDDEN and _is_int(v):
            d[k] = min(v, 64)
        elif k in _HEAD_DIM and _is_int(v):
            d[k] = min(v, 16)
        elif k in _INTERMEDIATE and _is_int(v):
            d[k] = min(v, 128)
        elif k in _EXPERTS and _is_int(v):
            d[k] = min(v, _EXPERTS[k])
        elif k == "depths" and isinstance(v, list):
            d[k] = [1 for _ in v]
        elif k == "hidden_sizes" and isinstance(v, list):
            d[k] = [16 * 2**i for i in range(len(v))]
        elif k == "image_size" and _is_int(v) and v > 32:
            d[k] = 32
        elif k == "image_size" and isinstance(v, list):
            d[k] = [min(x, 32) for x in v]
        elif k == "patch_size" and _is_int(v) and v > 8:
            d[k] = 8
    for k in ("out_features", "out_indices", "stage_names"):  # backbones: recomputed
        d.pop(k, None)
    n_after = next((d[k] for k in _LAYERS if _is_int(d.get(k))), None)
    for k, v in list(d.items()):
        if isinstance(v, list) and n_before and n_after and len(v) == n_before and (
                k.endswith(("layer_types", "layers_block_type")) or k == "layer_types"):
            d[k] = v[:n_after]
    if _is_int(d.get("vocab_size")) and d["vocab_size"] > _VOCAB:
        d["vocab_size"] = _VOCAB
        _shrink_ids(d, _VOCAB)
    return d


def tiny_config(model_type: str):
    """A tiny configuration of ``model_type``: its default shrunk by
    :func:`shrink_config_dict`, then :data:`OVERRIDES`; sdpa attention when supported."""
    from transformers import AutoConfig

    default = AutoConfig.for_model(model_type)
    d = shrink_config_dict(default.to_dict())
    d.update(OVERRIDES.get(model_type, {}))
    config = type(default).from_dict(d)
    return config


def _model_class(case: ZooCase, config):
    from transformers.models.auto import modeling_auto

    if case.head not in HEADS:
        raise ValueError(f"model type {case.model_type!r} has no head in {list(HEADS)}")
    names = getattr(modeling_auto, HEADS[case.head])
    name = names[case.model_type]
    name = name[0] if isinstance(name, (list, tuple)) else name
    import transformers

    return getattr(transformers, name)


def _signature_order(model, inputs: dict, ds: dict) -> tuple[dict, dict]:
    """Inputs and dynamic shapes in the order of ``model.forward``'s parameters."""
    params = list(inspect.signature(model.forward).parameters)
    unknown = [k for k in inputs if k not in params]
    if unknown:
        raise TypeError(f"{type(model).__name__}.forward takes no {unknown}")
    keys = sorted(inputs, key=params.index)
    return {k: inputs[k] for k in keys}, {k: ds[k] for k in keys if k in ds}


def _text_inputs(config, sizes, generator):
    vocab = getattr(config.get_text_config(), "vocab_size", None) or _VOCAB
    b, s = sizes["batch"], sizes["seq"]
    inputs = {"input_ids": torch.randint(0, vocab, (b, s), generator=generator),
              "attention_mask": torch.ones((b, s), dtype=torch.int64)}
    return inputs, {"input_ids": {0: "batch", 1: "seq"}, "attention_mask": {0: "batch", 1: "seq"}}


def _image_inputs(config, sizes, generator):
    vision = getattr(config, "vision_config", None) or config
    size = getattr(vision, "image_size", 32)
    h, w = (size, size) if _is_int(size) else tuple(size)[:2]
    c = getattr(vision, "num_channels", 3)
    pixels = torch.randn(sizes["batch"], c, h, w, generator=generator)
    return {"pixel_values": pixels}, {"pixel_values": {0: "batch"}}


def _audio_inputs(config, sizes, generator):
    values = torch.randn(sizes["batch"], sizes["samples"], generator=generator)
    return {"input_values": values}, {"input_values": {0: "batch", 1: "samples"}}


def _speech_seq2seq_inputs(model, config, sizes, generator):
    """input_features (static number of frames) and decoder tokens, no cache."""
    b = sizes["batch"]
    frames = 2 * getattr(config, "max_source_positions", 32)
    if hasattr(config, "num_mel_bins"):
        feats = torch.randn(b, config.num_mel_bins, frames, generator=generator)
    else:
        n = getattr(config, "input_feat_per_channel", 80) * getattr(config, "input_channels", 1)
        feats = torch.randn(b, frames, n, generator=generator)
    vocab = config.get_text_config(decoder=True).vocab_size
    inputs = {"input_features": feats,
              "decoder_input_ids": torch.randint(0, vocab, (b, sizes["seq"]), generator=generator)}
    return inputs, {"input_features": {0: "batch"}, "decoder_input_ids": {0: "batch", 1: "seq"}}


def _decoder_inputs(model, config, head, sizes, generator, with_cache):
    from ..torch_models.llm_helper import make_llm_inputs, make_seq2seq_inputs

    b, s, p = sizes["batch"], sizes["seq"], sizes["past"]
    if head == "causal-lm":
        return make_llm_inputs(config, b, s, p, with_cache=with_cache, model=model,
                               generator=generator)
    return make_seq2seq_inputs(config, b, s, p, with_cache=with_cache, model=model,
                               generator=generator)


def make_inputs(case: ZooCase, model, config, sizes: dict, *, seed: int = 0,
                with_cache: bool = True) -> tuple[dict, dict]:
    """Inputs of sizes ``sizes`` (:data:`EXPORT_SIZES`) for ``case`` and their dynamic
    shapes (dimension names), in the order of the forward's parameters."""
    generator = torch.Generator().manual_seed(seed)
    if case.head in ("causal-lm", "seq2seq-lm"):
        inputs, ds = _decoder_inputs(model, config, case.head, sizes, generator, with_cache)
    elif case.head in ("image-classification", "vision-encoder"):
        inputs, ds = _image_inputs(config, sizes, generator)
    elif case.head in ("ctc", "audio-classification"):
        inputs, ds = _audio_inputs(config, sizes, generator)
    elif case.head == "speech-seq2seq":
        inputs, ds = _speech_seq2seq_inputs(model, config, sizes, generator)
    else:
        inputs, ds = _text_inputs(config, sizes, generator)
    return _signature_order(model, inputs, ds)


def _eager(model, inputs: dict):
    import copy

    with torch.no_grad():
        return model(**copy.deepcopy(inputs))


def build_case(case: ZooCase, seed: int = 0) -> dict[str, Any]:
    """Builds the tiny model of ``case``, its export inputs, its check inputs (other sizes)
    and dynamic shapes, after running eager once on both input sets. A decoder whose
    eager run fails with a cache is retried without one (``cache=0`` in the result).

    :return: ``dict(model=, inputs=, check_inputs=, dynamic_shapes=, cache=, model_class=)``
    """
    torch.manual_seed(seed)
    config = tiny_config(case.model_type)
    cls = _model_class(case, config)
    model = cls._from_config(config, attn_implementation="sdpa") if getattr(
        cls, "_supports_sdpa", False) else cls._from_config(config)
    model = model.eval()
    caches = [True, False] if case.head in ("causal-lm", "seq2seq-lm") else [False]
    error: Exception | None = None
    for with_cache in caches:
        try:
            inputs, ds = make_inputs(case, model, config, EXPORT_SIZES, seed=seed,
                                     with_cache=with_cache)
            check, _ = make_inputs(case, model, config, CHECK_SIZES, seed=seed + 1,
                                   with_cache=with_cache)
            _eager(model, inputs)
            _eager(model, check)
        except Exception as e:  # retried without a cache, raised after the last try
            error = e
            continue
        return dict(model=model, inputs=inputs, check_inputs=check, dynamic_shapes=ds,
                    cache=int(with_cache), model_class=cls.__name__)
    assert error is not None
    raise error
