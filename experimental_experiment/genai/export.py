"""Loads a causal language model, checks it is a decoder with a cache, exports it with
:func:`to_onnx` (a DynamicCache, dynamic batch, sequence and cache lengths)."""

from __future__ import annotations

import os

from .errors import NotADecoderError


def load_decoder(model):
    """``model`` itself, or the causal LM saved in the folder ``model``
    (``save_pretrained``, no download)."""
    if not isinstance(model, (str, os.PathLike)):
        return model
    path = os.fspath(model)
    if not os.path.isfile(os.path.join(path, "config.json")):
        raise NotADecoderError(
            f"{path!r} is not a folder written by save_pretrained (no config.json); give "
            "a transformers causal LM or the folder it was saved in")
    import transformers

    try:
        return transformers.AutoModelForCausalLM.from_pretrained(
            path, local_files_only=True).eval()
    except (ValueError, KeyError) as e:  # a configuration no causal LM class maps to
        raise NotADecoderError(
            f"{path!r} holds no causal language model transformers can load "
            f"({str(e).splitlines()[0][:200]}); give a *ForCausalLM checkpoint") from e


def check_decoder(model) -> str:
    """Raises :class:`NotADecoderError` unless ``model`` is a transformers causal LM
    taking a cache; returns the name of its cache argument."""
    from ..torch_models.llm_helper import cache_argument_name

    config = getattr(model, "config", None)
    name = type(model).__name__
    if config is None or not hasattr(config, "get_text_config"):
        raise NotADecoderError(
            f"{name} is not a transformers model (no config); give a *ForCausalLM model")
    if getattr(config, "is_encoder_decoder", False):
        raise NotADecoderError(
            f"{name} is an encoder-decoder; onnxruntime-genai packages here take a "
            "decoder-only *ForCausalLM model")
    can_generate = getattr(model, "can_generate", None)
    if can_generate is None or not can_generate():
        raise NotADecoderError(
            f"{name} cannot generate (not a causal language model); give the "
            "*ForCausalLM class of this architecture")
    try:
        return cache_argument_name(model)
    except ValueError as e:
        raise NotADecoderError(f"{name} has no recognizable cache: {e}") from e


def export_decoder(model, *, patterns: str = "default+onnxruntime"):
    """Exports ``model`` with :func:`to_onnx` under ``bypass_export_some_errors``,
    example batch 2, 3 new tokens, a cache of 5 positions, every one of those dynamic.
    Returns the ModelProto (inputs ``input_ids``, ``attention_mask``, ``position_ids``
    when the model takes them, ``*_key_<i>``, ``*_value_<i>``)."""
    import torch

    from ..torch_interpreter import to_onnx
    from ..torch_interpreter.onnx_export_errors import bypass_export_some_errors
    from ..torch_models.llm_helper import make_llm_inputs
    from ..xbuilder import OptimizationOptions

    inputs, ds = make_llm_inputs(model.config, batch=2, seq=3, past=5, model=model,
                                 generator=torch.Generator().manual_seed(0))
    with torch.no_grad(), bypass_export_some_errors(patch_transformers=True) as modificator:
        return to_onnx(model, (), modificator(inputs), dynamic_shapes=ds,
                       options=OptimizationOptions(patterns=patterns))


__all__ = ["check_decoder", "export_decoder", "load_decoder"]
