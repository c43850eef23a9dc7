"""Cases of the model zoo: every model type transformers' auto mappings list with a
text, vision or speech head, a tiny configuration (the default one shrunk generically,
random weights) and inputs matching the head's forward.

.. code-block:: python

    from experimental_experiment.bench.zoo_cases import list_cases, build_case

    cases = list_cases()                 # [ZooCase(model_type='llama', head='causal-lm'), ...]
    model, inputs, check_inputs, ds = build_case(cases[0])
"""

from __future__ import annotations

from typing import Any

import torch

from .zoo_configs import OVERRIDES, shrink_config_dict, tiny_config  # noqa: F401
from .zoo_diffusers import DIFFUSERS_TYPES, build_diffusers_case, diffusers_available
from .zoo_head_inputs import PROMPT_HEADS, adapt_image_size, make_inputs
from .zoo_heads import (  # noqa: F401 (names of this module before the split)
    ALL_HEADS,
    HEADS,
    ZooCase,
    ZooCaseSkipped,
    head_pairs,
    model_class_name,
    skip_reason,
)
from .zoo_inputs import (  # noqa: F401 (names of this module before the split)
    audio_feature_dim,
    codebooks,
    input_kind,
    seq_factor,
)

#: sizes of the exported inputs and of the second set used for the check
EXPORT_SIZES = dict(batch=2, seq=3, past=5, samples=1600)
CHECK_SIZES = dict(batch=3, seq=4, past=7, samples=2000)

#: the ``--quick`` subset (CI, about 3 minutes with one exporter): decoders with a cache
#: (llama, qwen2, gpt2), a state space model (mamba), an encoder (bert), seq2seq with a
#: cache (bart), vision (vit, resnet), speech (whisper, wav2vec2)
QUICK_TYPES = (
    "llama",
    "qwen2",
    "gpt2",
    "mamba",
    "bert",
    "bart",
    "vit",
    "resnet",
    "whisper",
    "wav2vec2",
)


def _interleave(by_head: dict[str, list[str]]) -> list[ZooCase]:
    """Heads interleaved in proportion to their sizes (types sorted within a head): a
    type at rank i of a head of n types comes at (i + 1/2) / n."""
    order = [
        ((i + 0.5) / len(names), h, name)
        for h, names in enumerate(by_head.values())
        for i, name in enumerate(names)
    ]
    heads = list(by_head)
    return [ZooCase(name, heads[h]) for _, h, name in sorted(order)]


def list_cases(
    types: list[str] | None = None, heads: str = "first", per_head: int = 0
) -> list[ZooCase]:
    """The cases of the zoo, heads interleaved in proportion to their sizes: a partial
    run is a sample of every head.

    * ``heads="first"``: one case per model type, its first head in :data:`HEADS`
      (the dashboard's list), then the diffusers models;
    * ``heads="all"``: every (model type, head) pair of :data:`ALL_HEADS`
      (transformers' auto mappings used for inference), or a comma separated list of
      head names for the pairs of these heads.

    ``types`` restricts the list (unknown types are kept: they fail at the config stage),
    ``per_head`` keeps at most that many model types per head (0: all).

    .. code-block:: python

        list_cases(heads="all", per_head=2)  # two model types of every head
    """
    by_head: dict[str, list[str]] = {}
    if heads == "first":
        from transformers.models.auto import modeling_auto

        by_head = {h: [] for h in HEADS}
        seen: set[str] = set()
        for head, mapping in HEADS.items():
            for model_type in sorted(getattr(modeling_auto, mapping)):
                if model_type not in seen:
                    seen.add(model_type)
                    by_head[head].append(model_type)
    else:
        for model_type, head in head_pairs(heads):
            by_head.setdefault(head, []).append(model_type)
    if types is not None:
        wanted = set(types)
        by_head = {h: [t for t in names if t in wanted] for h, names in by_head.items()}
    if per_head:
        by_head = {h: names[:per_head] for h, names in by_head.items()}
    cases = _interleave({h: names for h, names in by_head.items() if names})
    if heads == "first" and diffusers_available():
        cases.extend(
            ZooCase(name, head)
            for name, head in DIFFUSERS_TYPES.items()
            if types is None or name in types
        )
    if types is not None:
        listed = {c.model_type for c in cases}
        if heads == "first":  # in the order of ``types``
            known = {c.model_type: c for c in cases}
            return [known.get(t, ZooCase(t, "unknown")) for t in types]
        cases.extend(ZooCase(t, "unknown") for t in types if t not in listed)
    return cases


def _model_class(case: ZooCase):
    import transformers

    return getattr(transformers, model_class_name(case))


def _config_for_class(cls, config):
    """The sub-configuration ``cls`` expects when it is not ``config``'s class
    (``Emu3ForCausalLM`` takes the text configuration of ``Emu3Config``)."""
    expected = getattr(cls, "config_class", None)
    if expected is None or isinstance(config, expected):
        return config
    for name in ("text_config", "decoder", "language_config", "llm_config"):
        sub = getattr(config, name, None)
        if isinstance(sub, expected):
            return sub
    return config


def _repair_for_head(case: ZooCase, cls, config):
    """The configuration of a model given images and a prompt repaired like the
    multimodal table's (``torch_models.multimodal``: a VQ-VAE's vocabulary map, a
    Q-Former's image token and OPT's word embeddings); BLIP-2's retrieval model reads
    the text in its Q-Former (``use_qformer_text_input``, False by default: its layers
    then have no text feed-forward)."""
    from ..torch_models.multimodal.families import prepare_qformer_config
    from ..torch_models.multimodal.tiny_configs import repair_tiny_config

    if case.head in PROMPT_HEADS:
        repair_tiny_config(config)
    prepare_qformer_config(config)
    qformer = getattr(config, "qformer_config", None)
    if cls.__name__.endswith("ImageTextRetrieval") and hasattr(qformer, "use_qformer_text_input"):
        qformer.use_qformer_text_input = True
    return config


def _randomize_zero_weights(model, seed: int):
    """Matrices left at zero by the initialization (MoE routers of AFMoE, DeepSeek-V4)
    get random values: with a zero router every expert ties, and torch and onnxruntime
    break ties of ``topk`` differently (a mismatch that is no export error)."""
    generator = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for param in model.parameters():
            if param.dim() >= 2 and param.dtype.is_floating_point and not param.any():
                param.copy_(torch.randn(param.shape, generator=generator) * 0.02)
    return model


def _disable_cache(model) -> None:
    """``use_cache=False`` in the configuration of the model and its sub-models."""
    for module in model.modules():
        config = getattr(module, "config", None)
        if config is not None and hasattr(config, "use_cache"):
            config.use_cache = False
            text = (
                config.get_text_config(decoder=True) if hasattr(config, "get_text_config") else None
            )
            if text is not None and hasattr(text, "use_cache"):
                text.use_cache = False


def _eager(model, inputs: dict):
    import copy

    with torch.no_grad():
        return model(**copy.deepcopy(inputs))


def _check_reproducible(model, inputs: dict) -> None:
    """Raises ``RuntimeError`` when two eager runs on the same inputs differ: the model
    keeps a state in its modules between calls (RecurrentGemma with a cache), which no
    exported graph reproduces."""
    from ..torch_models.llm_models import compare_outputs, eager_outputs

    first = eager_outputs(model, inputs)
    second = [t.detach().numpy() for t in eager_outputs(model, inputs)]
    if compare_outputs(first, second) > 0:
        raise RuntimeError("two eager runs on the same inputs differ (state kept in modules)")


def build_case(case: ZooCase, seed: int = 0) -> dict[str, Any]:
    """Builds the tiny model of ``case``, its export inputs, its check inputs (other sizes)
    and dynamic shapes, after running eager once on both input sets. A decoder whose
    eager run fails with a cache, or gives another result when run again on the same
    inputs, is retried without one (``cache=0`` in the result).

    :return: ``dict(model=, inputs=, check_inputs=, dynamic_shapes=, cache=, model_class=)``
    """
    reason = skip_reason(case)
    if reason:
        raise ZooCaseSkipped(reason)
    if case.model_type in DIFFUSERS_TYPES:
        return build_diffusers_case(case.model_type, EXPORT_SIZES, CHECK_SIZES, seed=seed)
    torch.manual_seed(seed)
    config = tiny_config(case.model_type)
    cls = _model_class(case)
    if cls.forward is torch.nn.Module.forward:  # BarkModel: generate only
        raise ZooCaseSkipped(
            f"{cls.__name__} defines no forward: only its generation loop chains its sub-models"
        )
    config = _config_for_class(cls, _repair_for_head(case, cls, config))
    try:
        model = (
            cls._from_config(config, attn_implementation="sdpa")
            if getattr(cls, "_supports_sdpa", False)
            else cls._from_config(config)
        )
    except ValueError as e:  # a sub-model without sdpa (a ResNet backbone)
        if "scaled_dot_product_attention" not in str(e):
            raise
        model = None
    if model is None:  # outside the handler: its own failure is the row's cause
        model = cls._from_config(config, attn_implementation="eager")
    model = _randomize_zero_weights(model.eval(), seed)
    caches = [True, False] if case.head in ("causal-lm", "seq2seq-lm") else [False]
    error: Exception | None = None
    for with_cache in caches:
        if not with_cache:  # no cache in, no cache out: the model does not create one
            _disable_cache(model)
        try:
            inputs, ds = make_inputs(
                case, model, config, EXPORT_SIZES, seed=seed, with_cache=with_cache
            )
            check, _ = make_inputs(
                case, model, config, CHECK_SIZES, seed=seed + 1, with_cache=with_cache
            )
            _eager(model, inputs)
            _eager(model, check)
            inputs, check = adapt_image_size(case, model, inputs, check, ds, _eager)
            if with_cache:
                _check_reproducible(model, check)
        except Exception as e:  # retried without a cache, raised after the last try
            error = e
            continue
        return dict(
            model=model,
            inputs=inputs,
            check_inputs=check,
            dynamic_shapes=ds,
            cache=int(with_cache),
            model_class=cls.__name__,
        )
    assert error is not None
    raise error
