"""Builds the causal language model transformers maps a configuration to, and reads
the cache a model returned. :mod:`llm_helper <experimental_experiment.torch_models.llm_helper>`
and :mod:`hybrid_cache <experimental_experiment.torch_models.hybrid_cache>` both use it."""

from __future__ import annotations

import torch

from ..torch_interpreter.patches.cache_registration import CACHE_ARGUMENT_NAMES


def output_cache(outputs):
    """The cache a transformers model returned (``outputs.cache`` since transformers 5.24,
    ``outputs.past_key_values`` before), None when there is none.

    :param outputs: what the model returned
    :return: the cache or None

    .. code-block:: python

        from experimental_experiment.torch_models.llm_helper import get_tiny_llm, output_cache

        data = get_tiny_llm("llama")
        outputs = data["model"](**data["inputs"])
        cache = output_cache(outputs)  # a DynamicCache
    """
    for name in CACHE_ARGUMENT_NAMES:
        value = getattr(outputs, name, None)
        if value is not None:
            return value
    return None


def build_causal_lm(config, *, meta: bool = False, seed: int = 0):
    """The causal LM transformers maps ``config`` to, in eval mode: random weights drawn
    after ``torch.manual_seed(seed)``, or, with ``meta=True``, on the ``meta`` device
    without weights (to export without weights, then fill them from a checkpoint).
    Non-persistent buffers (the rotary embedding's ``inv_freq``) are in no checkpoint:
    on ``meta`` the rotary embeddings are created again with data.

    .. code-block:: python

        model = build_causal_lm(get_tiny_config("llama"), meta=True)
    """
    cls = _causal_lm_class(config)
    if not meta:
        torch.manual_seed(seed)
        return cls(config).eval()
    with torch.device("meta"):
        model = cls(config)
    for name, module in list(model.named_modules()):
        if name and type(module).__name__.endswith("RotaryEmbedding"):
            parent, _, attr = name.rpartition(".")
            setattr(model.get_submodule(parent), attr, type(module)(config))
    return model.eval()


def _causal_lm_class(config):
    """The causal LM class transformers maps ``config`` to."""
    from transformers.models.auto.modeling_auto import MODEL_FOR_CAUSAL_LM_MAPPING

    return MODEL_FOR_CAUSAL_LM_MAPPING[type(config)]


def perturb_norm_weights(model, seed: int = 0):
    """Adds ``N(0, 0.1)`` noise to every normalization weight of ``model`` (in place):
    with random weights and normalization weights all equal to one, greedy decoding
    meets near-ties; returns the model.

    :param model: a torch module
    :param seed: seed of the noise
    :return: the same model

    .. code-block:: python

        model = perturb_norm_weights(build_causal_lm(config), seed=1)
    """
    gen = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if "norm" in name and name.endswith("weight"):
                p.add_(torch.randn(p.shape, generator=gen) * 0.1)
    return model


__all__ = ["build_causal_lm", "output_cache", "perturb_norm_weights"]
